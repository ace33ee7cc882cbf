"""`logwatch status` names every configured source with its state: the judgement on its own
(every state), then real daemons: a missing file that appears, a FIFO that is not read, a
glob that matches nothing, a backlog caught up with its progress, and the sources still
listed after a restart (before, a source that gave no new data was not listed at all)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.signatures.library import Library
from logwatch.daemon.source_states import Observed, judge
from tests.conftest import ROOT, SAMPLES
from tests.following import Running


@pytest.mark.parametrize(("observed", "held", "state", "words"), [
    (Observed("a", "file", "/l", exists=False), False, "missing", "waiting for /l"),
    (Observed("a", "file", "/l", exists=True, refused="/l: a FIFO"), False, "unreadable",
     "FIFO"),
    (Observed("a", "file", "/l", exists=True, size=100, read_to=100, idle_s=9), False,
     "following", "up to date"),
    (Observed("a", "file", "/l", exists=True, size=100, read_to=60, idle_s=9), False,
     "following", "up to date"),  # a line still being written
    (Observed("a", "file", "/l", exists=True, size=4 << 20, read_to=1 << 20, idle_s=0.1),
     False, "catching_up", "25% of 4.0 MiB read, 3.0 MiB to go"),
    (Observed("a", "file", "/l", exists=True, size=4 << 20, read_to=1 << 20, idle_s=30),
     False, "lagging", "3.0 MiB behind its writer"),
    (Observed("a", "file", "/l", exists=True, size=4 << 20, read_to=1 << 20, idle_s=30,
              writes_behind=True), False, "catching_up", "waiting for the history's writes"),
    (Observed("a", "file", "/l", exists=True, size=100, read_to=None, idle_s=None), False,
     "lagging", "100 bytes behind"),  # nothing read yet of what is there
    (Observed("a", "file", "/l", exists=True, size=4 << 20, read_to=1 << 20, idle_s=0.1),
     True, "held", "not writable"),
    (Observed("g", "glob", "/l/*.log", matched=0), False, "missing", "no file matches"),
    (Observed("g", "glob", "/l/*.log", matched=2), False, "following", "2 file(s)"),
    (Observed("j", "journal"), False, "following", "up to date"),
    (Observed("r", "run", running=True), False, "running", "running"),
    (Observed("r", "run", running=False, returncode=1), False, "exited", "exited with 1"),
])
def test_each_state_in_the_operators_words(observed: Observed, held: bool, state: str,
                                           words: str) -> None:
    judged = judge(observed, held)
    assert judged["state"] == state and words in judged["detail"], judged
    if state == "catching_up":
        assert judged["progress"] == 0.25 and judged["behind_bytes"] == 3 << 20


def _by_name(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in status["sources"]}


@pytest.mark.slow
def test_a_daemons_sources_each_with_its_state_and_after_a_restart(tmp_path: Path) -> None:
    log, later, fifo = tmp_path / "vllm.log", tmp_path / "later.log", tmp_path / "fifo.log"
    log.write_bytes((SAMPLES / "healthy_033_startup.log").read_bytes())
    os.mkfifo(fifo)
    args = ("--file", str(log), "--file", str(later), "--file", str(fifo),
            "--file", str(tmp_path / "bench-*.log"), "--db", str(tmp_path / "h.duckdb"))
    names = {f"file:{p}" for p in (log, later, fifo)} | {f"glob:{tmp_path}/bench-*.log"}
    daemon = Running(*args, sock=tmp_path / "lw.sock")
    try:
        st = daemon.wait_status(lambda st: _by_name(st)[f"file:{log}"]["state"] == "following"
                                and _by_name(st)[f"file:{log}"]["next_line"] > 0, 60,
                                "the log read")
        assert st["protocol"] == 1 and st["version"]
        sources = _by_name(st)
        assert set(sources) == names
        assert sources[f"file:{later}"]["state"] == "missing"
        assert '"waiting_for_file"' in daemon.stderr  # said in its log too: a typo shows
        assert sources[f"file:{fifo}"]["state"] == "unreadable"
        assert sources[f"glob:{tmp_path}/bench-*.log"]["state"] == "missing"
        later.write_bytes((SAMPLES / "healthy_033_startup.log").read_bytes())
        (tmp_path / "bench-1.log").write_bytes(b"")
        st = daemon.wait_status(
            lambda st: _by_name(st)[f"file:{later}"]["state"] == "following"
            and _by_name(st)[f"glob:{tmp_path}/bench-*.log"]["state"] == "following", 60,
            "the file that appeared and the glob's match")
        assert f"file:{(tmp_path / 'bench-1.log').resolve()}" in _by_name(st)
        shown = subprocess.run([sys.executable, "-m", "logwatch", "status", "--socket",
                                str(daemon.sock)], cwd=ROOT, capture_output=True, text=True,
                               timeout=60, check=False)
        assert f"file:{fifo}: unreadable (" in shown.stdout, shown.stdout
        assert f"file:{later}: following (up to date), line " in shown.stdout
    finally:
        assert daemon.stop() == 0, daemon.stderr
    again = Running(*args, sock=tmp_path / "lw.sock")
    try:  # nothing new to read: each source is still there, followed, from its checkpoint
        st = again.wait_status(lambda st: _by_name(st)[f"file:{log}"]["state"] == "following"
                               and _by_name(st)[f"file:{later}"]["state"] == "following", 60,
                               "the sources after the restart")
        assert names <= set(_by_name(st))
        assert _by_name(st)[f"file:{log}"]["idle_s"] is None  # nothing read this time
    finally:
        assert again.stop() == 0, again.stderr


def test_a_backlog_half_read_is_catching_up_with_its_progress(tmp_path: Path,
                                                             library: Library) -> None:
    """The daemon's own view of a file it has read half of, then all of (fed by hand: a
    real daemon reads a backlog faster than a status request can watch it)."""
    from logwatch.daemon.service import Daemon
    from logwatch.sources.base import Chunk
    from logwatch.sources.files import FileSource
    from logwatch.store.db import open_store

    log = tmp_path / "vllm.log"
    healthy = (SAMPLES / "healthy_033_startup.log").read_bytes()
    log.write_bytes(healthy * 400)
    size, half = log.stat().st_size, len(healthy) * 200
    source = FileSource(log, name="vllm")
    with open_store(tmp_path / "h.duckdb", service=True) as store:
        daemon = Daemon([source], library, store)
        assert daemon.source_states()[0]["state"] == "lagging"  # nothing read of it yet
        daemon.handle(Chunk("vllm", "g1", healthy * 200, 0, True, path=str(log)))
        [state] = daemon.source_states()
        assert state["state"] == "catching_up" and state["progress"] == round(half / size, 4)
        assert state["behind_bytes"] == size - half and state["next_line"] > 0
        daemon.handle(Chunk("vllm", "g1", healthy * 200, half, path=str(log)))
        assert daemon.source_states()[0]["state"] == "following"


@pytest.mark.slow
def test_status_judges_only_what_the_daemon_follows(tmp_path: Path) -> None:
    """A history that also holds a scan of other logs (failed ones): status lists and
    judges the daemon's own sources; before, each scanned file was listed as a target that
    failed, and status exited 1 with the followed vLLM healthy (it served, then stopped)."""
    db, log = tmp_path / "h.duckdb", tmp_path / "vllm.log"
    scanned = subprocess.run([sys.executable, "-m", "logwatch", "scan", "--db", str(db),
                              str(SAMPLES / "demo_marlin_and_mtp.log")], cwd=ROOT,
                             capture_output=True, timeout=120, check=False)
    assert scanned.returncode == 1  # failed launches, recorded
    log.write_bytes((SAMPLES / "healthy_033_startup.log").read_bytes())
    daemon = Running("--file", str(log), "--db", str(db), sock=tmp_path / "lw.sock")
    try:
        st = daemon.wait_status(lambda st: st["lines"] > 0 and not st["pending"]
                                and any(launch["outcome"] == "stopped"
                                        for launch in st["launches"]), 60,
                                "the followed launch served and stopped")
        assert [launch["source"] for launch in st["launches"]] == [f"file:{log}"]
        shown = subprocess.run([sys.executable, "-m", "logwatch", "status", "--socket",
                                str(daemon.sock)], cwd=ROOT, capture_output=True, text=True,
                               timeout=60, check=False)
        assert shown.returncode == 0, shown.stdout
        assert "demo_marlin_and_mtp" not in shown.stdout
    finally:
        assert daemon.stop() == 0, daemon.stderr


def test_a_crash_loop_still_says_how_far_the_source_is_read() -> None:
    """A crash loop is the program's state; whether its log is read to the end stays said
    (`behind_bytes`, `reading`): a monitor waiting for "caught up" saw neither, and waited
    for good (the hostile-lines fuzz, whose planted failures make a loop, did)."""
    loop = {"failed": 4, "minutes": 10.0}
    up_to_date = judge(Observed("a", "file", "/l", exists=True, size=100, read_to=100,
                                idle_s=9, crash_loop=loop), False)
    assert up_to_date["state"] == "crash_loop" and up_to_date["reading"] == "following"
    assert up_to_date["behind_bytes"] == 0
    assert up_to_date["detail"] == ("4 launches failed in the last 10 min, none serving "
                                    "since; up to date")
    behind = judge(Observed("a", "file", "/l", exists=True, size=4 << 20, read_to=1 << 20,
                            idle_s=0.1, crash_loop=loop), False)
    assert behind["reading"] == "catching_up" and behind["behind_bytes"] == 3 << 20
