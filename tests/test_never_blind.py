"""Nothing in a line stops ingestion (issue 35): a pid no column holds, a record the history
refuses for what it holds, 10,000 hostile lines; the daemon follows the file, never holds the
source, and records every real failure after them, across a restart, as `scan --db` does."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from logwatch.store.db import open_store
from tests.conftest import ROOT
from tests.following import Running
from tests.hostile_log import (
    MARLIN_SIGNATURE,
    OVERLONG_PID_LINE,
    hostile_log,
    marlin_failure,
)

START = b"INFO 12-04 10:00:00 [__init__.py:239] Automatically detected platform cuda."


def rows(db: Path, query: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def marlin_lines(db: Path) -> list[int]:
    return sorted(r[0] for r in rows(db, "SELECT line FROM findings WHERE signature = "
                                         f"'{MARLIN_SIGNATURE}'"))


def daemon_args(log: Path, db: Path) -> list[str]:
    return ["--file", str(log), "--db", str(db), "--config", os.devnull]


def until_idle(log: Path, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "logwatch", "daemon", *daemon_args(log, db),
                           "--no-socket", "--until-idle", "1"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)


def source_of(status: dict[str, Any]) -> dict[str, Any]:
    [source] = status["sources"]
    return source  # type: ignore[no-any-return]


@pytest.mark.slow
def test_an_overlong_pid_does_not_blind_the_daemon(tmp_path: Path) -> None:
    """The issue's line: a pid of 23 digits. The line is recorded (its pid none: no process
    has it; the line keeps it as written), the Marlin failure after it is recorded, the
    source is never held, and a restart and `scan --db` record the same."""
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes(START + b"\n" + OVERLONG_PID_LINE + b"\n")
    daemon = Running(*daemon_args(log, db), sock=tmp_path / "lw.sock")
    try:
        daemon.wait_status(lambda s: s["findings_recorded"] >= 1, 60, "the pid line recorded")
        with open(log, "ab") as out:
            out.write(b"\n".join(marlin_failure()) + b"\n")
        st = daemon.wait_status(lambda s: s["findings_recorded"] >= 2 and not s["pending"],
                                60, lambda: f"the Marlin failure recorded: {daemon.status()}")
        assert st["database"]["writable"] is True, st["database"]
        assert source_of(st)["state"] != "held", source_of(st)
        assert "quarantined" not in source_of(st)
        assert daemon.stop() == 0
    finally:
        if daemon.proc.poll() is None:
            daemon.kill()
    assert marlin_lines(db) == [9]
    assert rows(db, "SELECT line, pid, text FROM findings WHERE line = 2") == [
        (2, None, OVERLONG_PID_LINE.decode())]
    # a restart reads on from where it stopped, and records what is written next
    with open(log, "ab") as out:
        out.write(OVERLONG_PID_LINE + b"\n" + b"\n".join(marlin_failure(pid=2451)) + b"\n")
    again = until_idle(log, db)
    assert again.returncode == 0, again.stderr
    assert "unwritable" not in again.stderr
    assert marlin_lines(db) == [9, 17]
    scanned = tmp_path / "scan.duckdb"
    done = subprocess.run([sys.executable, "-m", "logwatch", "scan", str(log), "--db",
                           str(scanned)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 1, done.stderr  # 1: failures found
    assert marlin_lines(scanned) == [9, 17]


def refusing_history(db: Path) -> None:
    """A history whose findings table refuses one line's content: a site's own CHECK (a real
    DuckDB constraint error on one record, as a value no column holds would be)."""
    with open_store(db) as store:
        columns = store.query("SELECT column_name, data_type FROM information_schema.columns "
                              "WHERE table_name = 'findings' ORDER BY ordinal_position")
        store.con.execute("DROP TABLE findings")
        body = ", ".join(f"{name} {kind}" + (" PRIMARY KEY" if name == "id" else "")
                         for name, kind in columns)
        store.con.execute(f"CREATE TABLE findings ({body}, CHECK (pid IS NULL OR pid <> 666))")


@pytest.mark.slow
def test_a_record_the_history_refuses_is_quarantined_and_reading_goes_on(
        tmp_path: Path) -> None:
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    refusing_history(db)
    refused = (b"(EngineCore pid=666) ERROR 12-04 10:00:05 [core.py:700] EngineCore failed "
               b"to start. token=hf_" + b"S" * 34)
    log.write_bytes(START + b"\n" + refused + b"\n")
    daemon = Running(*daemon_args(log, db), sock=tmp_path / "lw.sock")
    try:
        st = daemon.wait_status(lambda s: "quarantined" in source_of(s), 60,
                                lambda: f"the refused record quarantined: {daemon.status()}")
        source = source_of(st)
        assert source["quarantined"]["records"] == 1 and source["quarantined"]["last_line"] == 2
        assert "1 record quarantined, at line 2" in source["detail"], source
        assert source["state"] != "held" and st["database"]["writable"] is True
        assert any("line 2 quarantined" in e for e in st["events"]), st["events"]
        with open(log, "ab") as out:
            out.write(b"\n".join(marlin_failure()) + b"\n")
        st = daemon.wait_status(lambda s: s["findings_recorded"] >= 1 and not s["pending"],
                                60, lambda: f"the Marlin failure recorded: {daemon.status()}")
        assert source_of(st)["state"] != "held"
        assert daemon.stop() == 0
    finally:
        if daemon.proc.poll() is None:
            daemon.kill()
    said = [line for line in daemon.lines if "record_quarantined" in line]
    assert len(said) == 1 and '"line": 2' in said[0], said
    assert marlin_lines(db) == [9]
    [(line, kind, signature, text, error)] = rows(
        db, "SELECT line, kind, signature, text, error FROM quarantined")
    assert (line, kind, signature) == (2, "finding", "engine.core_failed_to_start")
    assert "EngineCore failed to start" in text and "S" * 34 not in text  # secrets masked
    assert "Constraint" in error
    # a restart does not meet it again: the position moved past it
    with open(log, "ab") as out:
        out.write(b"\n".join(marlin_failure(pid=2451)) + b"\n")
    again = until_idle(log, db)
    assert again.returncode == 0, again.stderr
    assert "quarantined" not in again.stderr and "unwritable" not in again.stderr
    assert marlin_lines(db) == [9, 16]


@pytest.mark.slow
def test_ten_thousand_hostile_lines_never_hold_the_source(tmp_path: Path) -> None:
    """The fuzz of the live path: overlong pids, ranks and numbers, invalid UTF-8, NULs,
    1 MiB lines, escapes, SQL, month 99, control characters; every real failure planted
    among them is recorded at its line, and the source is never held."""
    seed = int(os.environ.get("LOGWATCH_FUZZ_SEED", random.randrange(1 << 32)))
    print(f"hostile log seed: {seed} (LOGWATCH_FUZZ_SEED={seed} repeats it)")
    data, planted = hostile_log(seed)
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes(data)
    daemon = Running(*daemon_args(log, db), sock=tmp_path / "lw.sock")
    states: set[str] = set()
    size = len(data)
    try:
        def caught_up(st: dict[str, Any]) -> bool:
            source = source_of(st)
            states.add(source["state"])
            assert st["database"]["writable"] is True, (seed, st["database"])
            return (source["state"] in ("following", "crash_loop")
                    and source.get("behind_bytes") == 0
                    and not st["pending"] and st["findings_recorded"] > 0)

        began = time.monotonic()
        daemon.wait_status(caught_up, 50, lambda: f"seed {seed}: {daemon.status()}")
        assert daemon.stop() == 0, daemon.stderr[-3000:]
    finally:
        if daemon.proc.poll() is None:
            daemon.kill()
    assert "held" not in states, (seed, states)
    assert "database_unwritable" not in daemon.stderr, (seed, daemon.stderr[-3000:])
    got = set(rows(db, "SELECT signature, line FROM findings"))
    missing = [p for p in planted if p not in got]
    assert not missing, (seed, missing)
    assert rows(db, "SELECT max(position) FROM checkpoints")[0][0] == size
    print(f"{len(planted)} planted failures recorded, {len(got)} findings in "
          f"{time.monotonic() - began:.1f} s")


POISON = b"a line this test makes the scan fail on"


def test_a_slice_the_scan_fails_on_is_said_counted_and_passed_over(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a line does to the scan (a fault of logwatch's that no input is known to cause
    any more, injected here), the reader goes on: the slice is said with its source and byte
    range, counted in status, and a Marlin failure written after it is recorded. Before, the
    reader task died and the daemon stopped, exit 0, blind to everything after."""
    from logwatch.daemon.scan_streams import ScanStreams
    from tests.inprocess import caught_up, daemon_until

    handle = ScanStreams.handle

    def failing(self: ScanStreams, chunk: Any) -> None:
        if POISON in chunk.data:
            raise ValueError("the scan broke on this slice")
        handle(self, chunk)

    monkeypatch.setattr(ScanStreams, "handle", failing)
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes(START + b"\n" + POISON + b"\n")
    seen: dict[str, Any] = {}

    def poisoned_then_marlin(daemon: Any) -> bool:
        status = daemon.status()
        if status["scan_failures"] and not log.read_bytes().endswith(b"64\n"):
            log.write_bytes(log.read_bytes() + b"\n".join(marlin_failure()) + b"\n")
        seen.update(status)
        return bool(status["scan_failures"]) and caught_up(1)(daemon)

    done = daemon_until(poisoned_then_marlin, *daemon_args(log, db), "--no-socket")
    assert done.returncode == 0, done.stderr
    assert seen["scan_failures"] == {f"file:{log}": 1}
    assert "scan_failed" in done.stderr and "the scan broke on this slice" in done.stderr
    assert marlin_lines(db) != []


def test_a_reader_that_dies_is_said_and_the_exit_status_says_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader stopped by a fault outside the scan (the source itself) is named in the log
    and the daemon exits 70 (EX_SOFTWARE), not 0 as if all had been read."""
    from logwatch.daemon.reading import Readers

    async def broken(self: Readers, source: Any) -> None:
        raise RuntimeError("the source broke")

    monkeypatch.setattr(Readers, "read", broken)
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes(START + b"\n")
    from tests.inprocess import logwatch_text
    done = logwatch_text("daemon", *daemon_args(log, db), "--no-socket", "--until-idle", "1")
    assert done.returncode == 70, done.stderr
    assert "reader_failed" in done.stderr and "the source broke" in done.stderr


LONG_MODEL_ARGS = ("(APIServer pid=101) INFO 12-04 10:00:01 [startup.py:75] non-default args: "
                   "{'model_tag': '/models/" + "Q" * 4200 + "', 'tensor_parallel_size': 2}")
RAY_REPEATED = ("(EngineCore_DP0 pid=12) ERROR 12-04 10:00:02 [core.py:700] EngineCore failed "
                "to start. [repeated " + "9" * 5000 + "x across cluster]")


@pytest.mark.slow
@pytest.mark.parametrize("line", [LONG_MODEL_ARGS, RAY_REPEATED], ids=["model-path", "repeated"])
def test_what_a_start_line_names_never_blinds_the_daemon_or_the_scan(
        tmp_path: Path, line: str) -> None:
    """A model path no file system takes (vLLM logs it in every start's non-default args;
    analysing the launch looked it up, and the error read as the history being unwritable,
    holding the source for good) and a Ray repeat count of 5,000 digits (`int` refused it
    inside the scan, and the slice's Marlin failures were passed over): the daemon records
    the Marlin failure after each, and `logwatch scan` reports it."""
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes(b"\n".join([START, line.encode(), *marlin_failure()]) + b"\n")
    done = until_idle(log, db)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "database_unwritable" not in done.stderr and "scan_failed" not in done.stderr
    assert marlin_lines(db) == [9]
    scan = subprocess.run([sys.executable, "-m", "logwatch", "--no-pager", "scan", str(log)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert scan.returncode == 1 and "size_n is not divisible" in scan.stdout, scan.stderr


def test_a_run_whose_watching_failed_does_not_exit_0(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`logwatch run` of a child that fails and exits 0 while no commit of what it printed
    ever landed (the history unwritable all along): the run's status says so (75, as the
    daemon's), not the child's 0."""
    from logwatch.store.live import LiveWriter
    from tests.inprocess import logwatch_text

    def unwritable(self: LiveWriter, *args: Any, **kwargs: Any) -> int:
        raise duckdb.IOException("IO Error: could not write file: No space left on device")

    monkeypatch.setattr(LiveWriter, "commit", unwritable)
    printed = "\n".join(line.decode() for line in marlin_failure())
    done = logwatch_text("run", "--db", str(tmp_path / "h.duckdb"), "--", sys.executable,
                         "-c", f"print({printed!r})")
    assert done.returncode == 75, done.stderr
    assert "not all recorded" in done.stderr


def test_a_record_the_scan_fails_on_costs_that_record_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault of the scan's on one record (injected: no known line causes one now) passes
    over that record alone: the Marlin failure in the same slice is still found, by the
    daemon and by `logwatch scan`, and both say the record they passed over. Before, the
    daemon passed over the whole 256 KiB slice, and the scan stopped with a traceback."""
    from logwatch.core.signatures.block_scan import BlockScanner
    from tests.inprocess import caught_up, daemon_until, logwatch_text

    match = BlockScanner._match

    def failing(self: BlockScanner, records: Any, literal_ids: Any = None,
                head_floor: int = 0) -> Any:
        if any(POISON.decode() in line.message for r in records for line in r.lines):
            raise ValueError("the scan broke on this record")
        return match(self, records, literal_ids, head_floor)

    monkeypatch.setattr(BlockScanner, "_match", failing)
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    poisoned = b"(EngineCore_DP0 pid=7) ERROR 12-04 10:00:02 [core.py:700] RuntimeError: " + POISON
    log.write_bytes(b"\n".join([START, poisoned, *marlin_failure()]) + b"\n")
    seen: dict[str, Any] = {}

    def recorded(daemon: Any) -> bool:
        seen.update(daemon.status())
        return caught_up(1)(daemon)

    done = daemon_until(recorded, *daemon_args(log, db), "--no-socket")
    assert done.returncode == 0, done.stderr
    assert marlin_lines(db) == [9]
    assert seen["scan_failures"] == {f"file:{log}": 1}
    assert "scan_failed" in done.stderr and "line 2" in done.stderr
    scan = logwatch_text("--no-pager", "scan", str(log))
    assert scan.returncode == 1 and "size_n is not divisible" in scan.stdout, scan.stderr
    assert f"{log}:2: the scan failed on this record and passed over it" in scan.stderr


def test_a_launch_the_history_cannot_take_yet_does_not_hold_back_its_findings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Findings are committed before the launches they changed, in a commit of their own (a
    watcher waits for theirs; a launch's row and diagnoses take as long again): while the
    launch's commit fails, its findings are in the history, and the launch lands after."""
    from logwatch.store.live import LiveWriter
    from tests.inprocess import daemon_until

    commit = LiveWriter.commit
    refusing = {"on": True, "refused": 0}

    def launches_refused(self: LiveWriter, found: Any, checkpoints: Any,
                         analyses: Any = ()) -> int:
        if analyses and refusing["on"]:
            refusing["refused"] += 1
            raise duckdb.IOException("IO Error: could not write file: No space left on device")
        return commit(self, found, checkpoints, analyses)

    monkeypatch.setattr(LiveWriter, "commit", launches_refused)
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes(b"\n".join([START, *marlin_failure()]) + b"\n")

    def findings_in_while_launches_refused(daemon: Any) -> bool:
        if refusing["refused"] and daemon.committed >= 1:
            refusing["on"] = False  # the launch goes in with the last commit
            return True
        return False

    done = daemon_until(findings_in_while_launches_refused, *daemon_args(log, db),
                        "--no-socket", timeout=30)
    assert done.returncode == 0, done.stderr[-3000:]
    assert marlin_lines(db) == [8]
    assert rows(db, "SELECT outcome FROM launches") == [("failed",)]


def test_findings_committed_before_their_launch_lose_nothing_across_a_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon stops (a kill, a history that took the findings but never the launch)
    between the findings' commit and their launch's: the position was not moved past them,
    so the next start reads those lines again and writes the launch; every finding has its
    launch's snapshot, and the operator's log names the source of each fatal incident
    (reviewed: the findings' commit moved the position on, lost the launch for good, left
    the findings without a snapshot and the incidents' events without a source)."""
    from logwatch.store.live import LiveWriter
    from tests.inprocess import daemon_until

    commit = LiveWriter.commit
    refused: list[int] = []

    def launches_refused(self: LiveWriter, found: Any, checkpoints: Any,
                         analyses: Any = ()) -> int:
        if analyses:
            refused.append(1)
            raise duckdb.IOException("IO Error: could not write file: No space left on device")
        return commit(self, found, checkpoints, analyses)

    monkeypatch.setattr(LiveWriter, "commit", launches_refused)
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes(b"\n".join([START, *marlin_failure()]) + b"\n")
    first = daemon_until(lambda daemon: bool(refused) and daemon.committed >= 1,
                         *daemon_args(log, db), "--no-socket", timeout=30)
    assert marlin_lines(db) == [8] and rows(db, "SELECT count(*) FROM launches") == [(0,)]
    assert rows(db, "SELECT count(*) FROM checkpoints") == [(0,)], first.stderr[-2000:]
    monkeypatch.setattr(LiveWriter, "commit", commit)
    again = until_idle(log, db)
    assert again.returncode == 0, again.stderr[-3000:]
    assert marlin_lines(db) == [8]  # once
    assert rows(db, "SELECT outcome FROM launches") == [("failed",)]
    assert rows(db, "SELECT count(*) FROM findings WHERE snapshot_hash IS NULL") == [(0,)]
    assert rows(db, "SELECT count(*) FROM findings f JOIN launches l ON f.snapshot_hash = "
                    "l.snapshot_hash") == rows(db, "SELECT count(*) FROM findings")
    import json

    fatal = [json.loads(line) for line in first.stderr.splitlines()
             if '"fatal_incident"' in line]
    assert fatal and all(event["source"] == f"file:{log}" for event in fatal), fatal
