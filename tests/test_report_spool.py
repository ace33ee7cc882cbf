"""`scan --json` keeps each launch on disk once it has ended (scan.report_spool): only a
summary of it stays in memory. The report written is the same text as the one made in
memory, whatever the launches' order: several files, the streams of one run, a scan split
between two processes, and log lines that quote the spool's own placeholder."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from logwatch.cli.scan_command import write_json
from logwatch.core.launches.lifecycle import Launch, LaunchBook
from logwatch.core.signatures.library import Library
from logwatch.scan import report_spool
from logwatch.scan.offline import resolve_inputs, scan_inputs
from tests.conftest import SAMPLES


def _written(report: dict[str, Any]) -> str:
    report["stats"].pop("seconds")
    report["stats"].pop("mb_per_s")
    out = io.StringIO()
    with redirect_stdout(out):
        write_json(report)
    return out.getvalue()


def _same_text(library: Library, paths: list[Path], **options: Any) -> dict[str, Any]:
    inputs = resolve_inputs([str(p) for p in paths])
    spooled = scan_inputs(inputs, library, lazy_report=True, **options)
    text = _written(spooled)
    assert text == _written(scan_inputs(inputs, library, **options))
    report: dict[str, Any] = json.loads(text)
    return report


def _failures(count: int, start: int = 0) -> bytes:
    failures = [p for p in sorted(SAMPLES.glob("*.log"))
                if not p.name.startswith("healthy") and "hard_wrapped" not in p.name]
    return b"".join(p.read_bytes().rstrip(b"\n") + b"\n"
                    for p in failures[start:start + count])


def test_two_files_and_one_run(library: Library, tmp_path: Path) -> None:
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_bytes(_failures(6))
    second.write_bytes(_failures(6, start=6))
    report = _same_text(library, [first, second], jobs=1)
    assert {launch["source"] for launch in report["launches"]} == {str(first), str(second)}
    assert report["root_cause"] is not None and report["diagnoses"]
    assert report["launches"][0]["source"] == str(second)  # the later file is newer
    one_run = _same_text(library, [first, second], jobs=1, one_run=True)
    assert {launch["source"] for launch in one_run["launches"]} == {str(first)}


def test_a_scan_split_between_two_processes(library: Library, tmp_path: Path) -> None:
    log = tmp_path / "loop.log"
    log.write_bytes(_failures(40) * 6)
    report = _same_text(library, [log], jobs=2)
    assert len(report["launches"]) > 100
    assert [launch["failed_before"] for launch in report["launches"]][-1] == 0


def test_a_line_that_quotes_the_placeholder_stays_as_written(library: Library,
                                                            tmp_path: Path) -> None:
    """The spool marks a diagnosis's incident index with a number no launch reaches; a log
    line holding that text, in evidence, is escaped JSON and never taken for it."""
    placeholder = report_spool._INCIDENT_TEXT
    log = tmp_path / "hostile.log"
    marlin = (SAMPLES / "demo_marlin_and_mtp.log").read_bytes()
    log.write_bytes(marlin.replace(b"must match", f"must match {placeholder}".encode()))
    report = _same_text(library, [log], jobs=1)
    assert any(placeholder in e["text"] for d in report["diagnoses"] for e in d["evidence"])
    assert all(d["incident"] is None or 0 <= d["incident"] < len(report["incidents"])
               for d in report["diagnoses"])


def test_a_launch_is_spooled_as_soon_as_the_next_one_begins(
        library: Library, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each launch leaves memory when its source's next one begins: at most the current one
    is kept while a crash loop is read."""
    held: list[int] = []
    take_ended = LaunchBook.take_ended

    def taking(self: LaunchBook, source: str) -> list[Launch]:
        ended = take_ended(self, source)
        held.append(sum(len(launches) for launches in self.by_source.values()))
        return ended

    monkeypatch.setattr(LaunchBook, "take_ended", taking)
    log = tmp_path / "loop.log"
    log.write_bytes(_failures(30))
    report = scan_inputs(resolve_inputs([str(log)]), library, jobs=1, lazy_report=True)
    assert len(report["launches"]) > 20 and len(held) >= len(report["launches"]) - 1
    assert max(held) == 1


def test_take_ended_leaves_the_current_launch() -> None:
    book = LaunchBook()
    first = book.begin("s", 1)
    second = book.begin("s", 10)
    third = book.begin("s", 20)
    assert book.take_ended("s") == [first, second]
    assert book.by_source["s"] == [third] and book.take_ended("s") == []
    assert book.take_ended("other") == []


def test_a_spooled_report_records_the_same_history(library: Library, tmp_path: Path) -> None:
    """`scan --db --json` records from the spooled report (its items read back as text, each
    finding's snapshot from the launches' summaries): the same rows as `scan --db`, which
    records from the report made in memory."""
    import duckdb

    from logwatch.store.db import open_store
    from logwatch.store.record import ScanRecorder

    log = tmp_path / "loop.log"
    log.write_bytes(_failures(30))
    tables = {
        "findings": "SELECT id, incident_id, snapshot_hash, line, signature, text FROM findings",
        "incidents": "SELECT id, snapshot_hash, root_cause, count, first_line, last_line, "
                     "problem, launch_id, processes, ranks, captures FROM incidents",
        "launches": "SELECT id, seq, root_cause, root_problem, failed_before, outcome, "
                    "snapshot_hash FROM launches",
        "diagnoses": "SELECT id, incident_id, launch_id, snapshot_hash, body FROM diagnoses",
        "snapshots": "SELECT hash, body FROM snapshots"}
    histories = []
    for lazy in (True, False):
        db, recorder = tmp_path / f"{lazy}.duckdb", ScanRecorder()
        report = scan_inputs(resolve_inputs([str(log)]), library, jobs=1, recorder=recorder,
                             lazy_report=lazy)
        with open_store(db) as store:
            recorder.write(store, report)
        con = duckdb.connect(str(db), read_only=True)
        try:
            histories.append({t: sorted(con.execute(q).fetchall()) for t, q in tables.items()})
        finally:
            con.close()
    spooled, in_memory = histories
    assert len(spooled["launches"]) > 20 and spooled["diagnoses"]
    assert all(row[1] is not None for row in spooled["findings"])  # each in its incident
    assert spooled == in_memory


def test_a_report_too_big_for_memory_goes_to_a_file_and_one_that_cannot_is_said(
        library: Library, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past IN_MEMORY_BYTES the report's text goes to an unnamed temporary file (the same
    report); a temporary directory that cannot take it is an error that says where and what
    to do, exit 2, not a traceback nor "cannot read" the log."""
    from tests.inprocess import logwatch_text

    log = tmp_path / "loop.log"
    log.write_bytes(_failures(30))
    monkeypatch.setattr(report_spool, "IN_MEMORY_BYTES", 1000)
    report = _same_text(library, [log], jobs=1)
    assert len(report["launches"]) > 20
    spools = tmp_path / "spools"
    spools.mkdir()
    monkeypatch.setenv("TMPDIR", str(spools))
    monkeypatch.setattr(report_spool.tempfile, "tempdir", None)  # TMPDIR read again
    real = report_spool.tempfile.SpooledTemporaryFile

    class Full(real):  # type: ignore[misc,valid-type]
        def rollover(self) -> None:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(report_spool.tempfile, "SpooledTemporaryFile", Full)
    done = logwatch_text("scan", "--json", "--jobs", "1", str(log))
    assert done.returncode == 2, done.stderr
    assert "cannot keep the report in a temporary file in " in done.stderr
    assert str(spools) in done.stderr and "No space left on device" in done.stderr
    assert "cannot read" not in done.stderr and "Traceback" not in done.stderr


def test_a_file_name_that_is_not_utf8(library: Library, tmp_path: Path) -> None:
    """A log whose name holds a byte that is not UTF-8 (a lone surrogate in its label, in
    every finding's source): the same report, not a traceback from the spool (reviewed)."""
    import os

    log = Path(os.fsdecode(os.fsencode(str(tmp_path)) + b"/bad\xff.log"))
    log.write_bytes((SAMPLES / "demo_marlin_and_mtp.log").read_bytes())
    report = _same_text(library, [log], jobs=1)
    assert report["launches"] and report["incidents"]
