"""The live daemon with real parts: a stdin pipe, files followed through inotify, logrotate
(create and copytruncate) with a live writer, and kill -9 at random points."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from tests.conftest import ROOT, SAMPLES
from tests.following import Running, accepted_rows, run_daemon, wait_for
from tests.inprocess import logwatch_text

LOGROTATE = shutil.which("logrotate") or ("/usr/sbin/logrotate"
                                          if Path("/usr/sbin/logrotate").exists() else None)


def daemon(*args: str, stdin: bytes | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "logwatch", "daemon", *args], input=stdin,
                          capture_output=True, cwd=ROOT, timeout=timeout, check=False)


def recorded(db: Path) -> list[tuple[str, int, str]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT signature, line, source_id FROM findings").fetchall()
    finally:
        con.close()


def expected(library: Library, data: bytes) -> set[tuple[str, int]]:
    scanner = BlockScanner(Matcher(library.signatures), "x", datetime.now())
    return {(f.signature.id, f.lineno) for f in scanner.feed(data) + scanner.finish()}


def spec_line(n: int) -> bytes:
    """A SpecDecoding line whose `Accepted:` count identifies it."""
    return (f"(APIServer pid=7) INFO 11-29 10:00:00 [metrics.py:101] SpecDecoding metrics: Mean "
            f"acceptance length: 2.50, Accepted throughput: 1.00 tokens/s, Drafted throughput: "
            f"1.00 tokens/s, Accepted: {n} tokens, Drafted: {n + 1000} tokens, Per-position "
            f"acceptance rate: 0.800, Avg Draft acceptance rate: 80.0%\n").encode()


def accepted_counts(db: Path) -> list[int]:
    return sorted(n for n, _ in accepted_rows(db))


@pytest.mark.slow
def test_stdin_mode_exits_0_at_end_of_input(tmp_path: Path, library: Library) -> None:
    db = tmp_path / "h.duckdb"
    data = (SAMPLES / "demo_marlin_and_mtp.log").read_bytes()
    result = daemon("--stdin", "--db", str(db), stdin=data)
    assert result.returncode == 0, result.stderr
    assert {(s, line) for s, line, _ in recorded(db)} == expected(library, data)
    assert b"118 lines read" in result.stderr


@pytest.mark.slow
def test_each_stdin_run_is_a_generation_of_its_own(tmp_path: Path, library: Library) -> None:
    """The same failure on another day (other times and pids, the same line numbers) piped
    into the same history: its findings are recorded, not taken for the first run's. A file
    redirected in (`< vllm.log`) is its file generation: fed again, nothing is recorded twice."""
    db = tmp_path / "h.duckdb"
    monday = (SAMPLES / "mtp_tensor_mismatch_glm_033.log").read_bytes()
    tuesday = monday.replace(b"11-27 16:0", b"11-28 09:1").replace(b"pid=41", b"pid=52")
    assert tuesday != monday and expected(library, tuesday) == expected(library, monday)
    once = len(expected(library, monday))
    for data in (monday, tuesday):
        result = daemon("--stdin", "--db", str(db), "--no-socket", stdin=data)
        assert result.returncode == 0, result.stderr
        assert f"{once} new findings recorded".encode() in result.stderr
    rows = recorded(db)
    assert len(rows) == 2 * once and len({source for _, _, source in rows}) == 2

    log = tmp_path / "vllm.log"
    log.write_bytes(monday)
    for new in (once, 0):
        with open(log, "rb") as fh:
            fed = subprocess.run([sys.executable, "-m", "logwatch", "daemon", "--stdin", "--db",
                                  str(db), "--no-socket"], stdin=fh, capture_output=True,
                                 cwd=ROOT, timeout=120, check=False)
        assert fed.returncode == 0, fed.stderr
        assert f"{new} new findings recorded".encode() in fed.stderr
    assert len(recorded(db)) == 3 * once
    con = duckdb.connect(str(db), read_only=True)
    try:  # a pipe is never resumed: one position row, not one per run
        assert con.execute("SELECT source_id FROM checkpoints").fetchall() == [("stdin",)]
    finally:
        con.close()


@pytest.mark.slow
def test_follows_a_file_that_does_not_exist_yet(tmp_path: Path, library: Library) -> None:
    db, log = tmp_path / "h.duckdb", tmp_path / "logs" / "vllm.log"
    log.parent.mkdir()
    data = (SAMPLES / "demo_marlin_and_mtp.log").read_bytes()
    want = expected(library, data)
    daemon = Running("--file", str(log), "--db", str(db), "--poll-interval", "30",
                     sock=tmp_path / "lw.sock")
    try:
        daemon.wait_status(lambda st: True, 60, "the daemon to listen (it watches by then)")
        with open(log, "wb") as out:
            for piece in (data[i:i + 997] for i in range(0, len(data), 997)):
                out.write(piece)  # arbitrary cuts: lines arrive in halves
                out.flush()
                time.sleep(0.02)  # the writer's pace
        daemon.wait_status(lambda st: st["findings_recorded"] >= len(want)
                           and not st["pending"], 60, "every finding")
    finally:
        assert daemon.stop() == 0, daemon.stderr
    assert {(s, line) for s, line, _ in recorded(db)} == want


@pytest.mark.slow
def test_a_glob_follows_every_match_now_and_later_and_resumes_per_file(tmp_path: Path
                                                                       ) -> None:
    db, logs = tmp_path / "h.duckdb", tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_bytes(b"".join(spec_line(n) for n in range(0, 50)))
    (logs / "b.log").write_bytes(b"".join(spec_line(n) for n in range(50, 100)))
    (logs / "ignored.txt").write_bytes(spec_line(999))
    args = ("--file", str(logs / "*.log"), "--db", str(db), "--poll-interval", "0.2")
    daemon = Running(*args, sock=tmp_path / "lw.sock")
    try:
        daemon.wait_status(lambda st: st["findings_recorded"] == 100, 60, "a.log and b.log")
        (logs / "c.log").write_bytes(b"".join(spec_line(n) for n in range(100, 150)))
        daemon.wait_status(lambda st: st["findings_recorded"] >= 150 and not st["pending"],
                           60, "c.log, which appeared later")
    finally:
        assert daemon.stop() == 0, daemon.stderr
    assert accepted_counts(db) == list(range(150))
    con = duckdb.connect(str(db), read_only=True)
    try:
        followed = {r[0] for r in con.execute("SELECT source_id FROM checkpoints").fetchall()}
    finally:
        con.close()
    assert followed == {f"file:{logs / n}" for n in ("a.log", "b.log", "c.log")}

    with open(logs / "b.log", "ab") as out:  # a restart resumes each file where it stopped
        out.write(b"".join(spec_line(n) for n in range(150, 160)))
    again = run_daemon(*args, "--no-socket", findings=10)
    assert again.returncode == 0, again.stderr
    assert accepted_counts(db) == list(range(160))


class Writer(threading.Thread):
    """Appends `count` identifiable lines, keeping its fd like `vllm serve > log` does; when
    `reopen` is set it reopens the path (a writer restarted after rotation). `written` says
    how far it got, so a test waits for the writer, not for a time."""

    def __init__(self, path: Path, count: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.path, self.count, self.interval = path, count, interval
        self.reopen = threading.Event()
        self.written = 0
        self.start()

    def run(self) -> None:
        out = open(self.path, "ab", buffering=0)  # noqa: SIM115
        try:
            for n in range(self.count):
                if self.reopen.is_set():
                    out.close()
                    out = open(self.path, "ab", buffering=0)  # noqa: SIM115
                    self.reopen.clear()
                out.write(spec_line(n))
                self.written = n + 1
                time.sleep(self.interval)  # the writer's pace
        finally:
            out.close()


def _logrotate(tmp_path: Path, log: Path, directive: str) -> None:
    assert LOGROTATE is not None
    conf = tmp_path / "logrotate.conf"
    conf.write_text(f"{log} {{\n    {directive}\n    rotate 3\n    missingok\n}}\n")
    conf.chmod(0o644)
    subprocess.run([LOGROTATE, "-f", "-s", str(tmp_path / "logrotate.state"), str(conf)],
                   check=True, capture_output=True, timeout=30)


def _followed_log(tmp_path: Path) -> tuple[Path, Path, Running]:
    """An empty logs/vllm.log (directory mode logrotate accepts) and a daemon following it
    (its socket answers once the file is open)."""
    db, logs = tmp_path / "h.duckdb", tmp_path / "logs"
    logs.mkdir(mode=0o755)
    log = logs / "vllm.log"
    log.touch()
    daemon = Running("--file", str(log), "--db", str(db), sock=tmp_path / "lw.sock")
    daemon.wait_status(lambda st: True, 60, "the daemon to listen")
    return db, log, daemon


def _read_to_the_end(daemon: Running, findings: int) -> None:
    """Until the daemon has read the file to its end (past a rotation: the new file) and
    committed at least `findings`; then stopped. Stopping when idle (--until-idle 3) raced
    the rotation grace: the old file is drained until 2 s after its last data, looked at
    once a second when the writer is quiet, so the new file was opened up to ~3 s after the
    last read, and under load after the idle stop: its lines were never read."""
    try:
        daemon.wait_status(lambda st: st["findings_recorded"] >= findings
                           and not st["pending"] and len(st["sources"]) == 1
                           and st["sources"][0].get("behind_bytes") == 0, 60,
                           f"{findings} findings, the file read to its end")
    finally:
        assert daemon.stop() == 0, daemon.stderr
def wait_for_socket(sock: Path, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Until the daemon answers on its socket: its sources are open by then."""
    import asyncio

    from logwatch.daemon.client import wait_ready

    asyncio.run(wait_ready(sock, timeout, alive=lambda: proc.poll() is None))


@pytest.mark.slow
@pytest.mark.skipif(LOGROTATE is None, reason="logrotate is not installed")
def test_logrotate_create_with_a_writer_that_keeps_its_fd(tmp_path: Path) -> None:
    db, log, daemon = _followed_log(tmp_path)
    writer = Writer(log, 400, 0.004)
    daemon.wait_status(lambda st: st["findings_recorded"] >= 50, 60, "50 lines followed")
    _logrotate(tmp_path, log, "create 0644")
    rotated_at = writer.written
    # the writer goes on writing into vllm.log.1 through its old fd ...
    wait_for(lambda: writer.written >= min(rotated_at + 50, 400), 60, "50 lines into .1")
    writer.reopen.set()  # ... then reopens vllm.log, like a restarted vLLM
    writer.join(timeout=60)
    _read_to_the_end(daemon, 400)
    assert log.with_name("vllm.log.1").stat().st_size > 0 and log.stat().st_size > 0
    assert accepted_counts(db) == list(range(400))  # every line exactly once


@pytest.mark.slow
@pytest.mark.skipif(LOGROTATE is None, reason="logrotate is not installed")
def test_logrotate_copytruncate_loses_only_the_copy_window(tmp_path: Path) -> None:
    db, log, daemon = _followed_log(tmp_path)
    writer = Writer(log, 400, 0.004)
    daemon.wait_status(lambda st: st["findings_recorded"] >= 50, 60, "50 lines followed")
    _logrotate(tmp_path, log, "copytruncate")
    writer.join(timeout=60)
    on_disk = set()
    for path in (log.with_name("vllm.log.1"), log):
        for line in path.read_bytes().splitlines():
            on_disk.add(int(line.split(b"Accepted: ")[1].split(b" ")[0]))
    try:  # until everything that survived rotation on disk is recorded
        wait_for(lambda: on_disk <= {n for (n,) in daemon.sql(ACCEPTED)}, 60,
                 "every line on disk to be recorded")
    finally:
        assert daemon.stop() == 0, daemon.stderr
    found = set(accepted_counts(db))
    lost = set(range(400)) - found
    window = set(range(400)) - on_disk  # written between copy and truncate: gone from disk
    print(f"copytruncate: {len(window)} line(s) fell in the copy window; the daemon missed "
          f"{len(lost)} of them")
    assert lost <= window  # nothing lost beyond the copy window


ACCEPTED = ("SELECT CAST(captures->>'accepted' AS INTEGER) FROM findings "
            "WHERE signature = 'spec_decode.acceptance'")


@pytest.mark.slow
def test_kill_9_at_random_points_loses_nothing_and_doubles_nothing(tmp_path: Path,
                                                                   library: Library) -> None:
    db, log = tmp_path / "h.duckdb", tmp_path / "vllm.log"
    log.touch()
    rng = random.Random(9)
    demo = (SAMPLES / "demo_marlin_and_mtp.log").read_bytes().splitlines(keepends=True)
    stop = threading.Event()

    def write() -> None:
        with open(log, "ab", buffering=0) as out:
            n = 0
            while not stop.is_set():
                out.write(spec_line(n) if n % 3 else demo[(n // 3) % len(demo)])
                n += 1
                time.sleep(0.0015)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        for run in range(20):
            running = Running("--file", str(log), "--db", str(db),
                              sock=tmp_path / f"lw{run}.sock")
            running.wait_status(lambda st: True, 60, "the daemon to listen")
            time.sleep(rng.uniform(0, 0.8))  # kill -9 at a random point of its work
            running.kill()
    finally:
        stop.set()
        writer.join(timeout=10)
    want = expected(library, log.read_bytes())
    final = run_daemon("--file", str(log), "--db", str(db), "--no-socket",
                       findings=len(want) - len(set(recorded(db))))
    assert final.returncode == 0, final.stderr
    rows = recorded(db)
    assert len(rows) == len(set(rows))  # no finding twice
    assert {(s, line) for s, line, _ in rows} == want


@pytest.mark.slow
def test_bad_input_on_stdin_loses_nothing(tmp_path: Path, library: Library) -> None:
    """Binary junk, invalid UTF-8 and a 10 MB line among real failures."""
    db = tmp_path / "h.duckdb"
    demo = (SAMPLES / "demo_marlin_and_mtp.log").read_bytes()
    data = (os.urandom(100_000).replace(b"\n", b"") + b"\n" + b"\xff\xfe\xc3\x28 half\n"
            + b"A" * (10 << 20) + b" size_n = 1 is not divisible by tile_n_size = 64\n"
            + demo)
    result = daemon("--stdin", "--db", str(db), stdin=data)
    assert result.returncode == 0, result.stderr
    found = {(s, line) for s, line, _ in recorded(db)}
    offset = 3  # the demo starts on line 4
    assert {(s, line - offset) for s, line in found} >= expected(library, demo)


@pytest.mark.slow
def test_a_held_hit_is_reported_while_the_log_keeps_flowing(tmp_path: Path,
                                                            library: Library) -> None:
    """A finding whose record might go on (nothing after it proves the traceback ended) is
    not kept until the log goes quiet: it is committed while unrelated lines keep arriving."""
    import asyncio

    from logwatch.daemon.service import Daemon
    from logwatch.sources.base import MemorySource
    from logwatch.store.db import open_store

    head = b"(EngineCore_DP0 pid=5) ERROR 11-29 10:00:00 [core.py:1] "
    burst = [head + b"Traceback (most recent call last):\n",
             head + b'  File "/x/core.py", line 1, in run\n',
             head + b"RuntimeError: CUDA error: an illegal memory access was encountered\n"]
    access = b'INFO:     10.0.0.1:4000 - "POST /v1/completions HTTP/1.1" 200 OK\n'
    parts = burst + [access] * 150  # a part every 20 ms: three seconds, never quiet

    async def main(hold: float) -> tuple[int, list[tuple[int, int]]]:
        """(lines read when the finding was committed, or all of them; what was recorded)"""
        with open_store(tmp_path / f"hold-{hold}.duckdb") as store:
            daemon = Daemon([MemorySource("mem", parts, delay=0.02)], library, store,
                            hold=hold)
            runner = asyncio.create_task(daemon.run())
            while not daemon.committed and not runner.done():
                await asyncio.sleep(0.005)
            lines_read = daemon.lines
            await runner
            lines = store.query("SELECT line FROM findings "
                                "WHERE signature = 'distributed.cuda_error'")
            return lines_read, lines

    lines_read, lines = asyncio.run(main(hold=0.05))
    assert lines_read < len(parts) and lines == [(3,)]  # committed while the log flowed
    lines_read, lines = asyncio.run(main(hold=60))  # without the bound: held to the end
    assert lines_read == len(parts) and lines == [(3,)]


@pytest.mark.slow
def test_a_glob_that_matches_nothing_is_reported(tmp_path: Path) -> None:
    result = logwatch_text("daemon", "--file", str(tmp_path / "nope" / "*.log"), "--db",
                           str(tmp_path / "h.duckdb"), "--until-idle", "0.5", "--no-socket")
    assert result.returncode == 0
    assert "no file matches yet" in result.stderr
