"""The in-process runner's own promises: commands see their own streams and environment, and
a daemon run until caught up stops where a file's last complete line ends."""

from __future__ import annotations

import os
from pathlib import Path

from tests.following import accepted_rows, run_daemon, spec_line
from tests.inprocess import last_line_end, logwatch


def test_a_command_gets_its_stdin_environment_and_umask_and_gives_them_back() -> None:
    umask = os.umask(0o022)
    os.umask(umask)
    done = logwatch("scan", "--json", "-", stdin=b"hello\n", env={"LOGWATCH_PROGRESS_AFTER": "0"})
    # "hello" is no vLLM output: exit 3, not the all-clear
    assert done.returncode == 3 and b'"lines": 1' in done.stdout, done.stderr
    assert "LOGWATCH_PROGRESS_AFTER" not in os.environ
    assert os.umask(umask) == umask


def test_the_end_of_a_file_is_its_last_complete_line(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_bytes(b"")
    assert last_line_end(log) == 0
    log.write_bytes(b"a\n" + b"x" * 100_000)  # a line still being written, past one block
    assert last_line_end(log) == 2


def test_a_daemon_caught_up_on_a_file_that_ends_mid_line_stops(tmp_path: Path) -> None:
    """What the daemon holds back (no newline yet) is not "behind": found in a kill -9 run
    where the writer stopped after a line without its newline."""
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes(spec_line(1) + spec_line(2) + spec_line(3)[:40])
    done = run_daemon("--file", str(log), "--db", str(db), "--no-socket", findings=2,
                      timeout=30)
    assert done.returncode == 0, done.stderr
    assert [n for n, _ in accepted_rows(db)] == [1, 2]
