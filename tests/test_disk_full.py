"""A database that cannot be written (a full disk, for real: a small tmpfs) loses nothing:
findings wait, positions do not move past them, files stop being read, the operator is told
(status, sd_notify STATUS=, the log), writing resumes by itself when space comes back, and a
stop with findings still unwritten exits non-zero and reads them again at the next start."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from logwatch.daemon.client import request, wait_ready
from tests.conftest import ROOT
from tests.following import Running
from tests.test_daemon import accepted_counts, spec_line

EXIT_UNWRITTEN = 75


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs of our own (root only; skipped where mounting is not allowed)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def fill(disk: Path) -> Path:
    """Fill the disk to the last byte."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 16, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_full_disk_loses_nothing_and_writing_resumes_by_itself(small_disk: Path,
                                                                 tmp_path: Path) -> None:
    db, log, sock = small_disk / "h.duckdb", tmp_path / "vllm.log", tmp_path / "lw.sock"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # systemd's side of sd_notify
    notify.bind(str(tmp_path / "notify"))
    notify.settimeout(0.2)
    log.write_bytes(b"".join(spec_line(n) for n in range(100)))
    args = [sys.executable, "-m", "logwatch", "daemon", "--file", str(log), "--db", str(db),
            "--socket", str(sock), "--config", str(tmp_path / "none.toml")]
    (tmp_path / "none.toml").write_text("")
    env = {**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify")}
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)

    def status() -> dict[str, object]:
        return asyncio.run(request(sock, "status"))["status"]  # type: ignore[no-any-return]

    def recorded() -> int:
        return int(status().get("findings_recorded", -1))  # type: ignore[call-overload]

    def database() -> dict[str, object]:
        return status().get("database", {})  # type: ignore[return-value]

    try:
        asyncio.run(wait_ready(sock, 60, alive=lambda: proc.poll() is None))
        wait_for("the first 100 findings", lambda: recorded() == 100)
        filler = fill(small_disk)
        with open(log, "ab") as out:
            out.write(b"".join(spec_line(n) for n in range(100, 200)))
        wait_for("the failed commit to be reported", lambda: database().get("writable") is False)
        state = database()
        assert "No space left on device" in str(state["error"])
        assert recorded() == 100 and status()["pending"] == 100
        [source] = status()["sources"]  # type: ignore[misc]
        assert source["state"] == "held" and "not writable" in source["detail"], source
        statuses = []
        while True:
            try:
                statuses.append(notify.recv(4096).decode())
            except TimeoutError:
                break
        assert any("DATABASE UNWRITABLE" in s and "100 findings waiting" in s
                   for s in statuses), statuses
        filler.unlink()  # space again: nothing to do but wait
        wait_for("writing to resume", lambda: database().get("writable") is True
                 and recorded() == 200, timeout=90)

        fill(small_disk)  # full again, and the daemon is stopped before space comes back
        with open(log, "ab") as out:
            out.write(b"".join(spec_line(n) for n in range(200, 250)))
        wait_for("the second failure", lambda: database().get("writable") is False)
        proc.terminate()
        assert proc.wait(timeout=30) == EXIT_UNWRITTEN
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        assert "stopped with 50 finding(s) the database never took" in stderr
        (small_disk / "filler").unlink()
        again = subprocess.run([*args, "--until-idle", "2"], cwd=ROOT, capture_output=True,
                               timeout=120, check=False)
        assert again.returncode == 0, again.stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        notify.close()
    assert accepted_counts(db) == list(range(250))  # every finding, each once


@pytest.mark.slow
def test_a_copytruncate_while_reading_is_paused_loses_nothing(small_disk: Path,
                                                              tmp_path: Path) -> None:
    """Reading stops while the database cannot be written; logrotate copies and truncates
    the log meanwhile, and vLLM writes more than the old offset into it before space comes
    back. The size never drops below the offset, so only the first bytes show it is another
    generation: the old one's rest comes from the copy, the new one is read from its start."""
    logs = tmp_path / "logs"
    logs.mkdir()
    log, db = logs / "vllm.log", small_disk / "h.duckdb"
    log.write_bytes(b"".join(spec_line(n) for n in range(100)))
    (tmp_path / "none.toml").write_text("")
    daemon = Running("--file", str(log), "--db", str(db), "--config",
                     str(tmp_path / "none.toml"), sock=tmp_path / "lw.sock")
    try:
        daemon.wait_status(lambda st: st["findings_recorded"] == 100, 60, "100 findings")
        filler = fill(small_disk)
        with open(log, "ab") as out:
            out.write(b"".join(spec_line(n) for n in range(100, 110)))
        daemon.wait_status(lambda st: st["database"]["writable"] is False, 60,
                           "the failed commit")
        shutil.copy(log, logs / "vllm.log.1")  # copytruncate: copy, then truncate
        with open(log, "r+b") as out:
            out.truncate(0)
        with open(log, "ab") as out:  # vLLM goes on: a new generation, longer than the old
            out.write(b"".join(spec_line(n) for n in range(1000, 1300)))
        filler.unlink()
        daemon.wait_status(lambda st: st["findings_recorded"] == 410 and not st["pending"],
                           90, "every finding of both generations")
    finally:
        assert daemon.stop() == 0
    assert accepted_counts(db) == list(range(110)) + list(range(1000, 1300))
