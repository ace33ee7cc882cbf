"""Helpers for tests that drive a running `logwatch daemon`: each on its own control socket,
waiting on what the daemon says (its status, its log lines), never on fixed sleeps."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from logwatch.daemon.client import request, wait_ready
from tests.conftest import ROOT
from tests.inprocess import Completed, caught_up, daemon_until


def spec_line(n: int) -> bytes:
    """A SpecDecoding line (a finding) whose `Accepted:` count identifies it."""
    return (f"(APIServer pid=7) INFO 11-29 10:00:00 [metrics.py:101] SpecDecoding metrics: Mean "
            f"acceptance length: 2.50, Accepted throughput: 1.00 tokens/s, Drafted throughput: "
            f"1.00 tokens/s, Accepted: {n} tokens, Drafted: {n + 1000} tokens, Per-position "
            f"acceptance rate: 0.800, Avg Draft acceptance rate: 80.0%\n").encode()


def filler_line(n: int) -> bytes:
    """An access-log line: no finding."""
    return f'INFO:     10.0.0.{n % 250}:4000 - "POST /v1/completions HTTP/1.1" 200 OK\n'.encode()


def accepted_in(data: bytes) -> list[tuple[int, int]]:
    """(line number, accepted count) of every spec line in a generation's content."""
    return [(i, int(line.split(b"Accepted: ")[1].split(b" ")[0]))
            for i, line in enumerate(data.splitlines(), 1) if b"Accepted: " in line]


def accepted_rows(db: Path) -> list[tuple[int, int]]:
    """(accepted count, line) of every spec finding recorded, repeats included."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT CAST(captures->>'accepted' AS INTEGER), line FROM findings "
                           "WHERE signature = 'spec_decode.acceptance'").fetchall()
    finally:
        con.close()
    return sorted((int(n), int(line)) for n, line in rows)


def run_daemon(*args: str, findings: int = 0, timeout: float = 120) -> Completed[str]:
    """`logwatch daemon ARGS` in-process until it has caught up with at least `findings` new
    findings (see inprocess.caught_up), then stopped as SIGTERM stops it."""
    return daemon_until(caught_up(findings), *args, timeout=timeout)


def wait_for(condition: Callable[[], Any], timeout: float, what: str | Callable[[], str],
             interval: float = 0.05) -> Any:
    """Poll `condition` until it returns something true; fail naming `what` (a callable:
    worked out at the failure, with what was seen by then)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, \
            f"timed out after {timeout} s waiting for {what() if callable(what) else what}"
        time.sleep(interval)


@contextmanager
def daemon_process(*args: str, sock: Path | None = None,
                   env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """`logwatch daemon ARGS`, once it answers on `sock` (default: the test's own default
    socket, in $RUNTIME_DIRECTORY); continued if stopped (SIGSTOP), then ended."""
    proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", *args], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})
    sock = sock or Path(os.environ["RUNTIME_DIRECTORY"]) / "logwatch.sock"
    try:
        asyncio.run(wait_ready(sock, 60, alive=lambda: proc.poll() is None))
        yield proc
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        proc.wait(timeout=60)


class Running:
    """A daemon process on its own socket; its stderr collected line by line."""

    def __init__(self, *args: str, sock: Path) -> None:
        self.sock = sock
        self.proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", *args,
                                      "--socket", str(sock)], cwd=ROOT,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._collect, daemon=True)
        self._reader.start()

    def _collect(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.lines.append(raw.decode(errors="replace"))

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_ready(self, timeout: float = 60) -> None:
        """Until the daemon says hello on its socket."""
        asyncio.run(wait_ready(self.sock, timeout, alive=lambda: self.proc.poll() is None))

    def ask(self, message: dict[str, Any], timeout: float = 5.0) -> dict[str, Any] | None:
        """The daemon's answer, or None while it is not listening (a restart, a kill)."""
        params = {k: v for k, v in message.items() if k != "op"}
        try:
            return asyncio.run(request(self.sock, message["op"], timeout=timeout, **params))
        except (OSError, TimeoutError, ValueError):
            return None

    def status(self) -> dict[str, Any] | None:
        answer = self.ask({"op": "status"})
        return answer["status"] if answer else None

    def sql(self, query: str) -> list[list[Any]]:
        answer = self.ask({"op": "sql", "query": query}, timeout=30)
        assert answer is not None and answer["ok"], answer
        rows: list[list[Any]] = answer["rows"]
        return rows

    def wait_status(self, condition: Callable[[dict[str, Any]], bool], timeout: float,
                    what: str) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            assert self.proc.poll() is None, f"the daemon exited: {self.stderr[-2000:]}"
            st = self.status()
            return st if st is not None and condition(st) else None

        began = time.monotonic()
        try:
            self.wait_ready(timeout)
        except OSError as exc:
            raise AssertionError(f"{exc}: {self.stderr[-2000:]}") from None
        result: dict[str, Any] = wait_for(check, timeout - (time.monotonic() - began), what)
        return result

    def stop(self, timeout: float = 30) -> int:
        self.proc.terminate()
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=10)
