"""The daemon records a launch's latent problems as the scan does: a target configured with its
model directory, followed live, ends with the same diagnoses (latent ones included) as a scan
of the same log with --model-dir."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from logwatch.cli import history as history_cmds
from logwatch.core.diagnosis.latent import LATENT_FP4, LATENT_MTP
from logwatch.core.signatures.library import Library
from logwatch.core.snapshot.model import GpuFacts
from logwatch.host.capture import take_snapshot
from logwatch.host.launch_snapshot import LaunchSnapshots
from logwatch.scan.offline import resolve_inputs, scan_inputs
from logwatch.scan.triage import SnapshotOptions
from logwatch.store.db import open_store
from logwatch.store.operator_sql import read_only_query
from logwatch.store.record import ScanRecorder
from tests.following import wait_for
from tests.test_latent import MARLIN_LAUNCH, TP2_START, UNCOVERED, UNCOVERED_MTP
from tests.test_live_model import InProcessDaemon, _summary, settled

HOPPER = GpuFacts(capability=90, source="--gpu-capability")


def _latent_rows(db: Path) -> list[tuple[Any, ...]]:
    """Each launch's latent diagnoses and the MTP modules they name, and what the root
    cause's diagnosis says is ahead."""
    rows = read_only_query(db, """
        SELECT l.number, d.cause, d.body, d.snapshot_hash = l.snapshot_hash
        FROM diagnoses d JOIN launches l ON l.id = d.launch_id ORDER BY ALL""").rows
    out = []
    for number, cause, body, same_snapshot in rows:
        assert same_snapshot, f"{cause}: not recorded with its launch's snapshot"
        data = json.loads(body)
        out.append((number, cause, data["latent"],
                    tuple(data["config"].get("uncovered_bf16", ())),
                    tuple(data["config"].get("latent", ()))))
    return out


def _follow_and_scan(tmp_path: Path, library: Library, lines: list[str], failed: int
                     ) -> tuple[Path, Path, dict[str, Any]]:
    """The log followed by a daemon and scanned: both histories, and the daemon's status."""
    log = tmp_path / "vllm.log"
    log.write_text("".join(lines))
    recorder = ScanRecorder()
    report = scan_inputs(resolve_inputs([str(log)]), library, recorder=recorder,
                         snapshot_options=SnapshotOptions(model_dir=UNCOVERED,
                                                          gpu_capability=90))
    with open_store(tmp_path / "scan.duckdb") as store:
        recorder.write(store, report)
    snapshots = LaunchSnapshots(gpu=HOPPER)  # the target: its model directory, no argv
    snapshots.configure(f"file:{log.resolve()}", take_snapshot(model_dir=UNCOVERED, gpu=HOPPER))
    running = InProcessDaemon(tmp_path, log, library, launch_snapshots=snapshots)
    try:
        settled(running, launches=1, failed=failed)
        status = wait_for(lambda: (st := running.status())["launches"][0]["latent"] and st,
                          30, "the launch's latent problems in the status")
        history_cmds.status(None, running.sock, as_json=False)  # `logwatch status`
    finally:
        running.stop()
    return tmp_path / "h.duckdb", tmp_path / "scan.duckdb", status


@pytest.mark.slow
def test_the_daemon_records_the_marlin_launchs_latent_mtp_problem_as_the_scan_does(
        tmp_path: Path, library: Library) -> None:
    live, scan, _ = _follow_and_scan(tmp_path, library, MARLIN_LAUNCH, failed=1)
    assert _summary(live) == _summary(scan)
    assert _latent_rows(live) == _latent_rows(scan)
    rows = {cause: row for _, cause, *row in _latent_rows(live)}
    assert rows[LATENT_MTP] == [True, UNCOVERED_MTP, ()]
    assert rows["marlin_weight_only_tile"][2] == (LATENT_MTP,)


@pytest.mark.slow
def test_the_daemon_records_a_healthy_so_far_launchs_latent_problems_as_the_scan_does(
        tmp_path: Path, library: Library, capsys: pytest.CaptureFixture[str]) -> None:
    live, scan, status = _follow_and_scan(tmp_path, library, TP2_START, failed=0)
    assert _summary(live) == _summary(scan)
    assert _latent_rows(live) == _latent_rows(scan)
    assert {cause for _, cause, *_ in _latent_rows(live)} == {LATENT_MTP, LATENT_FP4}
    launch = status["launches"][0]  # not failed, and the status says what is ahead
    assert launch["outcome"] == "starting" and launch["root_cause"] is None
    assert set(launch["latent"]) == {"MTP draft modules the ignore list does not cover",
                                     "FP4 checkpoint on a GPU without native FP4"}
    assert "launch #1 (starting) has latent problems: MTP draft modules the ignore list does " \
        "not cover" in capsys.readouterr().out
