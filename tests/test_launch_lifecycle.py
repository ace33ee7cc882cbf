"""The launch lifecycle against a real daemon following a file and its DuckDB history: a new
start closes the launch before it (`crashed` when it served, `replaced` when it was still
starting), and everything that picks "the newest launch" picks it by launch number, never by
the time printed in the log (a clock step, DST or a timezone change sends it backwards)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import duckdb
import pytest

from logwatch.core.launches.lifecycle import (
    CRASHED,
    FAILED,
    REPLACED,
    SERVING,
    STARTING,
    STOPPED,
    TRANSITIONS,
    Launch,
)
from logwatch.core.signatures.library import Library
from logwatch.daemon.client import request
from logwatch.tui import queries
from tests.conftest import SAMPLES
from tests.following import daemon_process, wait_for

HEALTHY = (SAMPLES / "healthy_033_startup.log").read_bytes().splitlines(keepends=True)
SERVED = b"".join(HEALTHY[:43])  # up to `Application startup complete` and some traffic
LOADING = b"".join(HEALTHY[:20])  # the start lines, still loading the model
# a launch that fails on 11-27: two days *before* the healthy one's log time
FAILS_EARLIER = (SAMPLES / "mtp_tensor_mismatch_glm_033.log").read_bytes()


def _sql(sock: Path, query: str) -> list[dict[str, Any]]:
    answer = asyncio.run(request(sock, "sql", query=query))
    assert "error" not in answer, answer
    return [dict(zip(answer["columns"], row, strict=True)) for row in answer["rows"]]


def _outcomes(sock: Path) -> list[str]:
    return [r["outcome"] for r in _sql(sock, "SELECT outcome FROM launches ORDER BY number")]


def _follow(tmp_path: Path, content: bytes, want: list[str]) -> Path:
    """A daemon following a file holding `content` until its launches' outcomes are `want`,
    in order; the history's path."""
    log, db, sock = tmp_path / "vllm.log", tmp_path / "h.duckdb", tmp_path / "lw.sock"
    log.write_bytes(content)
    with daemon_process("--file", str(log), "--db", str(db), "--socket", str(sock),
                        sock=sock):
        wait_for(lambda: _outcomes(sock) == want, 60,
                 lambda: f"outcomes {want}, seen {_outcomes(sock)}")
    return db


@pytest.mark.slow
def test_a_served_launch_followed_by_a_new_start_is_crashed_not_serving_forever(
        tmp_path: Path) -> None:
    """What systemd does after an OOM kill of a serving vLLM: a new start, no shutdown line."""
    _follow(tmp_path, SERVED + SERVED, [CRASHED, SERVING])


@pytest.mark.slow
def test_a_launch_still_starting_followed_by_a_new_start_is_replaced(tmp_path: Path) -> None:
    _follow(tmp_path, LOADING + SERVED, [REPLACED, SERVING])


@pytest.mark.slow
def test_the_newest_launch_is_the_last_started_when_log_time_goes_backwards(
        tmp_path: Path) -> None:
    """A healthy launch logged on 11-29, then one failing on 11-27 (the clock stepped back):
    the dashboard's target, its open incidents and the launch history all name the failed
    one, the last started, with its root cause."""
    db = _follow(tmp_path, SERVED + FAILS_EARLIER, [CRASHED, FAILED])
    con = duckdb.connect(str(db), read_only=True)
    try:
        def rows(query: str) -> list[dict[str, Any]]:
            cursor = con.execute(query)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]

        [target] = rows(queries.TARGETS)
        assert (target["number"], target["outcome"]) == (2, FAILED)
        assert target["root_signature"] == "weights.tensor_size_mismatch"
        incidents = rows(queries.OPEN_INCIDENTS)
        assert incidents and incidents[0]["root_cause"]
        assert incidents[0]["signature"] == "weights.tensor_size_mismatch"
        history = rows("SELECT outcome FROM launch_history")
        assert [h["outcome"] for h in history] == [FAILED, CRASHED]  # newest first
    finally:
        con.close()


def test_the_lifecycle_allows_only_the_documented_moves() -> None:
    launch = Launch("s", 1, 1)
    assert not launch.move(CRASHED)  # a launch that never served did not crash
    assert launch.move(SERVING) and launch.superseded() and launch.outcome == CRASHED
    assert all(not TRANSITIONS[end] for end in (FAILED, CRASHED, REPLACED))
    assert TRANSITIONS[STOPPED] == {FAILED} and REPLACED in TRANSITIONS[STARTING]


def test_a_backlogs_report_counts_earlier_failures_per_problem(library: Library,
                                                               tmp_path: Path) -> None:
    """Launches failing of problems X, Y, X, X (oldest first): each counts the earlier
    launches that failed of its own problem (the report keeps them newest first). Counted in
    one pass since a backlog of thousands of launches made the pairwise count quadratic."""
    from logwatch.scan.offline import resolve_inputs, scan_inputs

    x = (SAMPLES / "real_032_no_tokenizer.log").read_bytes()
    y = (SAMPLES / "mtp_tensor_mismatch_glm_033.log").read_bytes()
    log = tmp_path / "loop.log"
    log.write_bytes(x + y + x + x)
    report = scan_inputs(resolve_inputs([str(log)]), library, mode="prefilter")
    failed = [(launch["root_cause"] is not None, launch["failed_before"])
              for launch in report["launches"]]
    problems = [report["incidents"][launch["root_cause"]]["signature"]
                for launch in report["launches"]]
    assert len(set(problems)) == 2 and all(cause for cause, _ in failed)
    assert [n for _, n in failed] == [2, 1, 0, 0]  # newest first: X, X, Y, X
