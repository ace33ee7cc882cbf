"""Findings of a review of the changes since 2b3a637 (paths, status, the daemon's export,
`logwatch run` reading the configuration): each test shows one problem, fixed with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.following import daemon_process


def _cli(*args: str, env: dict[str, str] | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "logwatch", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout, check=False,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})})


def _daemon(*args: str, env: dict[str, str] | None = None) -> Any:
    """A daemon on the default socket and history ($RUNTIME_DIRECTORY, $STATE_DIRECTORY)."""
    return daemon_process(*args, env=env)


# -- 1. `logwatch run` while the daemon holds the history it now defaults to ---------------

def test_run_still_starts_its_child_while_the_daemon_holds_the_default_history(
        tmp_path: Path) -> None:
    """Since `logwatch run` writes the configured/default history (the daemon's), a host
    whose daemon runs could no longer `logwatch run -- vllm serve ...`: exit 2, vLLM never
    started ("in use by another process"). Before 434a92a, root's run wrote
    ~/.local/share and the unit's daemon /var/lib/logwatch: both worked side by side."""
    log = tmp_path / "vllm.log"
    log.write_text("INFO 10-14 09:12:01 [api_server.py:1] hello\n")
    (tmp_path / "empty.toml").write_text("")
    env = {"LOGWATCH_CONFIG": str(tmp_path / "empty.toml")}
    with _daemon("--file", str(log), env=env):
        done = _cli("run", "--target", "t", "--", sys.executable, "-c",
                    "print('the child ran')", env=env)
        held = Path(os.environ["STATE_DIRECTORY"]) / "logwatch.duckdb"
        again = _cli("sql", "--db", str(held), "SELECT 1", env=env)  # the daemon answers
    assert "the child ran" in done.stdout, done.stderr
    assert done.returncode == 0, done.stderr
    assert "held by" in done.stderr and "run-t.duckdb" in done.stderr  # said where it went
    assert again.returncode == 0, again.stderr


def test_run_with_an_explicit_db_held_by_the_daemon_still_refuses(tmp_path: Path) -> None:
    """--db X is X: no other file is chosen behind the operator's back."""
    log = tmp_path / "vllm.log"
    log.write_text("hello\n")
    (tmp_path / "empty.toml").write_text("")
    env = {"LOGWATCH_CONFIG": str(tmp_path / "empty.toml")}
    held = Path(os.environ["STATE_DIRECTORY"]) / "logwatch.duckdb"
    with _daemon("--file", str(log), env=env):
        done = _cli("run", "--target", "t", "--db", str(held), "--", sys.executable, "-c",
                    "print('the child ran')", env=env)
    assert done.returncode == 2 and "in use" in done.stderr
    assert "the child ran" not in done.stdout


# -- 2. `logwatch status` against a daemon of the previous release (same protocol 1) -------

OLD_STATUS: dict[str, Any] = {  # what 2b3a637's daemon answers (protocol 1 too)
    "library": "0.2.0", "reloading": False, "lines": 12, "findings_recorded": 0,
    "pending": 0, "uptime_s": 3.0, "database": {"path": "/x.duckdb", "writable": True},
    "sources": [{"name": "file:/var/log/vllm.log", "generation": "1:2:ab/10",
                 "next_line": 13, "idle_s": 1.0, "behind_bytes": 0, "vllm_output": True}],
    "launches": [], "failed_launches": 0, "last_failure": None, "events": []}


def test_status_reads_a_daemon_of_the_previous_release(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The protocol version was not bumped when a source's status gained `state` and
    `detail`: after a package upgrade, before the daemon restarts, `logwatch status`
    died with KeyError: 'state' (a traceback) instead of saying what the daemon does."""
    from logwatch.cli import history

    monkeypatch.setattr(history, "_ask_daemon",
                        lambda *a, **k: {"ok": True, "status": OLD_STATUS})
    assert history.status(None, None, False) == 0
    out = capsys.readouterr().out
    assert "file:/var/log/vllm.log" in out and "line 13" in out


# -- 3. the daemon's [export] -------------------------------------------------------------

def _history(path: Path) -> Any:
    from logwatch.store.db import open_store

    return open_store(path, service=True)


def test_a_failed_export_copy_leaves_no_copy_beside_the_history(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy that fails part way (a full disk: ENOSPC, a timeout) left its partial file,
    up to the history's size, beside the history, on the disk the daemon's commits need;
    each later cycle wrote it again."""
    from logwatch.store import export

    db, scratch = tmp_path / "h.duckdb", tmp_path / "h.duckdb.export"
    monkeypatch.setattr(export, "_COPY", "import sys; open(sys.argv[2], 'wb').write("
                                         "b'x' * 100000); sys.exit('No space left on device')")
    with _history(db) as store, pytest.raises(OSError, match="No space left"):
        export.copy_for_export(store, scratch)
    assert not scratch.exists()


def test_the_export_copy_is_not_written_through_a_link_at_its_path(tmp_path: Path) -> None:
    """The copy's path is fixed (<history>.export): a symlink placed there (a history under
    a shared directory, database.path) made the daemon write the whole history through it,
    over the file it names, with the daemon's rights."""
    from logwatch.store.export import copy_for_export, export_copy

    db, scratch = tmp_path / "h.duckdb", tmp_path / "h.duckdb.export"
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    scratch.symlink_to(victim)
    with _history(db) as store:
        copy_for_export(store, scratch)
    assert victim.read_text() == "precious\n"
    assert not scratch.is_symlink() and scratch.stat().st_size > 0
    assert export_copy(scratch, tmp_path / "fleet", "h", None)  # the copy is a history
    assert not scratch.exists()


def test_an_incremental_export_rewrites_the_day_of_a_launch_that_changed(
        tmp_path: Path) -> None:
    """After its first export the daemon rewrote only the days from yesterday on, by each
    table's own day (launches: started): a launch that started days ago and failed today
    (a server that ran for a week) stayed 'serving' in the fleet's dataset for ever."""
    from datetime import date, datetime, timedelta

    import duckdb

    from logwatch.store.export import export_parquet

    db, out = tmp_path / "h.duckdb", tmp_path / "fleet"
    days_ago = datetime.now() - timedelta(days=3)
    with _history(db) as store:
        store.con.execute("INSERT INTO launches (id, source, number, started, outcome, "
                          "updated) VALUES ('L', 'file:x', 1, ?, 'serving', ?)",
                          [days_ago, days_ago])
    export_parquet(db, out, "h")  # the daemon's first export: everything
    exported = datetime.now()
    with _history(db) as store:
        store.con.execute("UPDATE launches SET outcome = 'failed', updated = ? WHERE id = 'L'",
                          [datetime.now()])
    export_parquet(db, out, "h", date.today() - timedelta(days=1), changed_after=exported)
    rows = duckdb.sql(f"SELECT outcome FROM read_parquet('{out}/launches/**/*.parquet', "
                      "hive_partitioning = true)").fetchall()
    assert rows == [("failed",)]


# -- 4. $LOGWATCH_CONFIG ----------------------------------------------------------------

def test_a_logwatch_config_that_names_no_file_is_a_problem_not_the_defaults(
        tmp_path: Path) -> None:
    """$LOGWATCH_CONFIG names the file the operator chose, as --config does: a typo in it
    was taken for "no configuration" (check-config: "configuration OK: 0 target(s)", the
    daemon and every reader on the defaults' paths), unlike the same typo in --config."""
    typo = tmp_path / "logwach.toml"
    done = _cli("check-config", env={"LOGWATCH_CONFIG": str(typo)})
    assert done.returncode == 1, done.stdout
    assert "config file not found" in done.stdout + done.stderr


# -- 5. source states ---------------------------------------------------------------------

def test_a_reader_still_in_a_rotated_generation_is_not_up_to_date() -> None:
    """read_to is the offset in the generation being read, which after a rotation (or from
    a checkpoint: the rotated files not read yet are read first) is not the file at the
    path: 400 MB into vllm.log.1 with a 10 kB new vllm.log judged 'behind 0 bytes', so
    status said 'following (up to date)' during a backlog of hundreds of MB."""
    from logwatch.daemon.source_states import Observed, judge

    reading = Observed("file:/v.log", "file", "/v.log", exists=True, size=10_000,
                       read_to=400_000_000, idle_s=0.1)
    assert judge(reading, held=False)["state"] == "catching_up"
