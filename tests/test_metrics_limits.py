"""The metrics listener under a flood of slow connections from a local user: scrapes are
still answered, the daemon holds a bounded number of descriptors (it runs here with a limit
of 128), slow headers are cut off, and stderr gets a summary instead of a traceback each."""

from __future__ import annotations

import contextlib
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from logwatch.daemon.metrics import MAX_CONNECTIONS, REQUEST_SECONDS
from tests.conftest import ROOT, SAMPLES
from tests.test_metrics import free_port

FD_LIMIT = 128


def scrape(port: int, timeout: float = 5) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
        return str(r.read().decode())


def descriptors(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def closed_by_peer(conn: socket.socket) -> bool:
    try:
        return conn.recv(1, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True


@pytest.mark.slow
def test_slow_connections_cannot_exhaust_the_daemon(tmp_path: Path) -> None:
    log, port, err = tmp_path / "vllm.log", free_port(), tmp_path / "stderr"
    log.write_bytes((SAMPLES / "demo_marlin_and_mtp.log").read_bytes())
    with open(err, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "logwatch", "daemon", "--file", str(log), "--db",
             str(tmp_path / "h.duckdb"), "--no-socket", "--metrics", f"127.0.0.1:{port}"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                  (FD_LIMIT, FD_LIMIT)))
    silent: list[socket.socket] = []
    trickling: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                scrape(port)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "no metrics"
                time.sleep(0.1)
        baseline = descriptors(proc.pid)
        # three connections that send a header line every 0.2 s, forever: cut at the deadline
        for _ in range(3):
            trickling.append(socket.create_connection(("127.0.0.1", port)))
            trickling[-1].sendall(b"GET /metrics HTTP/1.1\r\n")
        started = time.monotonic()
        while not all(closed_by_peer(c) for c in trickling):
            assert time.monotonic() - started < REQUEST_SECONDS + 5, "slow headers kept"
            for conn in trickling:
                with contextlib.suppress(ConnectionError):
                    conn.sendall(b"X-Slow: yes\r\n")
            time.sleep(0.2)
        assert time.monotonic() - started > REQUEST_SECONDS - 1  # kept while in time
        # then 200 that connect and never send anything, while a scrape comes in
        for _ in range(200):
            conn = socket.socket()
            conn.setblocking(False)
            conn.connect_ex(("127.0.0.1", port))
            silent.append(conn)
        most, text = baseline, ""
        while not text or sum(map(closed_by_peer, silent)) < 2 * MAX_CONNECTIONS:
            assert time.monotonic() - started < REQUEST_SECONDS + 30, "no turnover"
            most = max(most, descriptors(proc.pid))
            text = text or scrape(port, timeout=10)  # answered while the flood goes on
            time.sleep(0.1)
        assert "logwatch_uptime_seconds" in text
        assert most <= baseline + MAX_CONNECTIONS + 4, (baseline, most)
    finally:
        for conn in silent + trickling:
            conn.close()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()  # never leave it behind
            raise
    output = err.read_text()
    assert len(output) < 16_384, output[:2000]
    assert "Traceback" not in output
    assert "metrics_connections_dropped" in output
    assert "too_slow" in output and "over_limit" in output
