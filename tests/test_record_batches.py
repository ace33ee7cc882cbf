"""`scan --db` holds findings a batch at a time (spooled to a temporary file between the scan
and the write), and stores exactly what a single batch would have stored.

The memory figures themselves are in benchmarks/record_memory.py: a timed or memory assertion
here would be slow or flaky."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.signatures.library import Library
from logwatch.scan.offline import resolve_inputs, scan_inputs
from logwatch.scan.triage import SnapshotOptions
from logwatch.store import record as record_module
from logwatch.store.db import Store, open_store, scan_settings
from logwatch.store.record import ScanRecorder
from tests.conftest import ROOT, SAMPLES

DEMO = SAMPLES / "demo_marlin_and_mtp.log"  # two launches: findings under two snapshots
UNCOVERED = str(ROOT / "samples" / "models" / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered")


def record(db: Path, library: Library, batch_size: int) -> tuple[ScanRecorder, dict[str, int]]:
    recorder = ScanRecorder(batch_size=batch_size)
    report = scan_inputs(resolve_inputs([str(DEMO)]), library, recorder=recorder,
                         snapshot_options=SnapshotOptions(model_dir=UNCOVERED,
                                                          gpu_capability=90))
    assert recorder.held < batch_size  # never more than a batch in memory
    with open_store(db) as store:
        return recorder, recorder.write(store, report)


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with open_store(db) as store:
        return store.query(sql)


@pytest.mark.slow
def test_small_batches_store_what_one_batch_stores(tmp_path: Path, library: Library) -> None:
    small, added = record(tmp_path / "small.duckdb", library, batch_size=5)
    _, added_whole = record(tmp_path / "whole.duckdb", library, batch_size=10_000)
    findings = added["findings"]
    assert findings == added_whole["findings"] == 32
    assert small.spooled == findings // 5  # full batches went to the spool file
    assert added == added_whole
    for sql in ("SELECT * FROM findings ORDER BY id",
                "SELECT hash, model, quant_scheme, body FROM snapshots ORDER BY hash",
                "SELECT * EXCLUDE (scan_id) FROM incidents ORDER BY id",
                "SELECT source_id, position FROM checkpoints"):
        assert rows(tmp_path / "small.duckdb", sql) == rows(tmp_path / "whole.duckdb", sql)
    by_snapshot = rows(tmp_path / "small.duckdb", "SELECT snapshot_hash, count(*) FROM findings "
                                                  "GROUP BY ALL ORDER BY ALL")
    assert len(by_snapshot) == 2 and None not in dict(by_snapshot)  # each launch's own


def test_the_spool_is_gone_after_the_write(tmp_path: Path, library: Library) -> None:
    recorder, _ = record(tmp_path / "h.duckdb", library, batch_size=4)
    assert recorder.spooled > 0
    assert list(recorder._batches()) == []  # written, then dropped


class _CountingStore(Store):
    """A real store that notes how many rows each findings INSERT carried."""

    def __init__(self, store: Store) -> None:
        super().__init__(store.con, store.path, store.config)
        self.statements: list[int] = []

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]],
               conflict: str = "IGNORE") -> int:
        if table == "findings":
            self.statements.append(len(rows))
        return super().insert(table, rows, conflict)


def test_findings_go_to_duckdb_a_bounded_number_of_rows_at_a_time(
        tmp_path: Path, library: Library, monkeypatch: pytest.MonkeyPatch) -> None:
    # each INSERT's memory grows with its rows (every value converted on its own)
    monkeypatch.setattr(record_module, "INSERT_ROWS", 3)
    recorder = ScanRecorder(batch_size=5)
    report = scan_inputs(resolve_inputs([str(DEMO)]), library, recorder=recorder)
    assert recorder.findings == 32
    with open_store(tmp_path / "h.duckdb", settings=scan_settings(recorder.findings)) as store:
        counting = _CountingStore(store)
        added = recorder.write(counting, report)
        stored = store.query("SELECT count(*) FROM findings")[0][0]
    assert added["findings"] == stored == sum(counting.statements) == 32
    assert max(counting.statements) == 3 and len(counting.statements) > 32 // 5
    assert recorder.findings == 0  # written, then dropped


def test_the_scan_connection_runs_one_thread_in_a_cache_that_grows_with_the_findings(
        tmp_path: Path) -> None:
    # DuckDB's defaults (a thread per core, 80% of RAM) grew `scan --db` by ~2 KiB a finding;
    # too small a cache fails the commit of the transaction's own index (~80 bytes a finding)
    few, many = scan_settings(0), scan_settings(1_000_000)
    assert few["threads"] == many["threads"] == 1
    with open_store(tmp_path / "h.duckdb", settings=few) as store:
        assert store.query("SELECT current_setting('threads'), "
                           "current_setting('memory_limit')")[0] == (1, "32.0 MiB")
    with open_store(tmp_path / "h.duckdb", settings=many) as store:
        limit = store.query("SELECT current_setting('memory_limit')")[0][0]
        assert limit.endswith("MiB") and float(limit.split()[0]) >= 96 + 32
    # incidents and diagnoses are wider rows: a crash loop's 34,000 incidents and 7,000
    # diagnoses with 40,000 findings failed at 52 MiB (and were recorded again without it)
    backlog = scan_settings(40_291, 33_935 + 7_335)["memory_limit"]
    assert int(backlog.removesuffix("MiB")) >= 64
    # the daemon keeps its own (store/db.py SERVICE_SETTINGS)
    with open_store(tmp_path / "h.duckdb", service=True) as store:
        assert store.query("SELECT current_setting('threads')")[0][0] == 2


def test_a_scan_that_records_loads_duckdb_only_to_write() -> None:
    # DuckDB is ~55 MiB resident once connected: loaded during the scan, it adds to the scan's
    # own peak instead of coming after the scan's blocks are given back
    code = ("import sys; import logwatch.cli.main, logwatch.scan.offline, "
            "logwatch.store.record; print('duckdb' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_a_write_that_outgrows_the_scan_limit_is_done_again_without_it(
        tmp_path: Path, library: Library) -> None:
    # scan_settings estimates what the transaction needs; an estimate too small must cost
    # memory, not the record (1 MB: the first INSERT of findings runs out)
    recorder = ScanRecorder(batch_size=5)
    report = scan_inputs(resolve_inputs([str(DEMO)]), library, recorder=recorder)
    with open_store(tmp_path / "h.duckdb", settings=scan_settings(recorder.findings)) as store:
        store.con.execute("SET memory_limit = '1MB'")
        added = recorder.write(store, report)
        limit = store.query("SELECT current_setting('memory_limit')")[0][0]
        stored = store.query("SELECT count(*) FROM findings")[0][0]
    assert added["findings"] == stored == 32 and added["incidents"] > 0
    assert limit != "976.5 KiB"  # done again without the limit
    assert recorder.findings == 0 and list(recorder._batches()) == []
