"""`scan --db` holds findings a batch at a time (spooled to a temporary file between the scan
and the write), and stores exactly what a single batch would have stored.

The memory figures themselves are in benchmarks/record_memory.py: a timed or memory assertion
here would be slow or flaky."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from logwatch.core.library import Library
from logwatch.scan.offline import resolve_inputs, scan_inputs
from logwatch.scan.triage import SnapshotOptions
from logwatch.store.db import open_store
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
