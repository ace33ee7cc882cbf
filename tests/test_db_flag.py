"""`--db X` means X: a daemon is asked only when it serves X, else X is read itself, or the
operator is told whose it is; a daemon that does not answer is busy, never "no daemon"
with numbers from another file. Real daemons on real sockets; one stopped with SIGSTOP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, SAMPLES
from tests.following import daemon_process


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "logwatch", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=120, check=False,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})})


def _daemon(log: Path, db: Path, sock: Path) -> Any:
    return daemon_process("--file", str(log), "--db", str(db), "--socket", str(sock),
                          sock=sock)


def _count(out: subprocess.CompletedProcess[str]) -> int:
    assert out.returncode == 0, out.stderr
    return int(out.stdout.splitlines()[1])


@pytest.mark.slow
def test_db_x_is_answered_from_x_not_from_the_daemon_on_the_socket(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    held, other = tmp_path / "held.duckdb", tmp_path / "other.duckdb"
    scan = _cli("scan", "--db", str(other), str(SAMPLES / "demo_marlin_and_mtp.log"))
    assert scan.returncode == 1, scan.stderr
    query = "SELECT count(*) AS n FROM findings"
    with _daemon(empty, held, tmp_path / "a.sock") as _:
        via = ("--socket", str(tmp_path / "a.sock"))
        assert _count(_cli("sql", "--csv", *via, query)) == 0  # the daemon's own (empty)
        from_x = _count(_cli("sql", "--csv", *via, "--db", str(other), query))
        assert from_x > 0  # answered from X, the daemon had none: before, 0
        status = json.loads(_cli("status", "--json", *via, "--db", str(other)).stdout)
        assert status["daemon"] is None and status["database"] == str(other)
        assert "holds another history" in status["note"]
        # X held by a second daemon: the first one's socket cannot answer for it, and the
        # file is locked; said so, with the way out
        log_b = tmp_path / "b.log"
        log_b.write_bytes(b"")
        with _daemon(log_b, other, tmp_path / "b.sock"):
            refused = _cli("sql", "--csv", *via, "--db", str(other), query)
            assert refused.returncode == 2
            assert "holds another history" in refused.stderr and "--socket" in refused.stderr
            assert _count(_cli("sql", "--csv", "--socket", str(tmp_path / "b.sock"), "--db",
                               str(other), query)) == from_x


@pytest.mark.slow
def test_a_daemon_that_does_not_answer_is_busy_not_absent(tmp_path: Path) -> None:
    """SIGSTOP: the socket accepts, nothing answers. Before, `status` said "no daemon
    running" (exit 3) and `sql` answered from the file."""
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    sock = tmp_path / "lw.sock"
    quick = {"LOGWATCH_ANSWER_SECONDS": "1"}
    with _daemon(empty, tmp_path / "h.duckdb", sock) as proc:
        proc.send_signal(signal.SIGSTOP)
        status = _cli("status", "--socket", str(sock), env=quick)
        assert status.returncode == 2, status.stdout
        assert "busy" in status.stderr and "no daemon" not in status.stdout
        as_json = json.loads(_cli("status", "--json", "--socket", str(sock), env=quick).stdout)
        assert "busy" in as_json["error"]
        sql = _cli("sql", "--socket", str(sock), "SELECT 1", env=quick)
        assert sql.returncode == 2 and "busy" in sql.stderr
        proc.send_signal(signal.SIGCONT)
        assert _cli("status", "--socket", str(sock)).returncode == 0  # awake: answers


@pytest.mark.slow
def test_a_time_is_written_the_same_whichever_path_answered(tmp_path: Path) -> None:
    """The same rows through the daemon's socket and from the file itself: every format
    writes their times alike (the socket wrote `2026-10-14T09:12:01`, the file
    `2026-10-14 09:12:01`)."""
    log, db, sock = tmp_path / "vllm.log", tmp_path / "h.duckdb", tmp_path / "lw.sock"
    log.write_bytes((SAMPLES / "demo_marlin_and_mtp.log").read_bytes())
    query = ("SELECT l.number, l.started, i.first_time, CAST(l.started AS DATE) AS day "
             "FROM launches l JOIN incidents i ON i.launch_id = l.id "
             "ORDER BY l.number, i.first_time, i.signature")
    formats = ("--json", "--csv", "--jsonl", "--table")

    def answers(*where: str) -> dict[str, str]:
        out = {}
        for fmt in formats:
            done = _cli("sql", *where, *([] if fmt == "--table" else [fmt]), query)
            assert done.returncode == 0, done.stderr
            out[fmt] = done.stdout
        return out

    with _daemon(log, db, sock) as _:
        from tests.following import wait_for

        def settled() -> bool:
            state = json.loads(_cli("status", "--json", "--socket", str(sock)).stdout)
            return bool(state["failed_launches"] == 2 and not state["pending"])

        wait_for(settled, 60, "both failed launches told and everything written")
        through_daemon = answers("--socket", str(sock), "--db", str(db))
    from_file = answers("--socket", str(sock), "--db", str(db))  # no daemon now: the file
    assert through_daemon == from_file
    row = json.loads(from_file["--jsonl"].splitlines()[0])
    assert row["started"][10] == " " and len(row["day"]) == 10
