"""A history with the same contents on every machine, for pictures of the TUI: the demo's
sample log and model scanned for real into a DuckDB file under relative paths (so ids and
labels do not depend on where the checkout lives), the times the scan stamped with the
clock set to one fixed moment, and the plan `logwatch plan` makes for its newest failed
launch recorded as an action awaiting an operator, as the daemon records it under
`--relaunch ask`. Everything the screens show comes from this file through the same
queries a daemon answers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from logwatch.core.remedy.actions import action_id_for, propose, transition
from logwatch.store.actions import record_action
from logwatch.store.db import open_store
from tests.conftest import ROOT, SAMPLES

SAMPLE_LOG = SAMPLES / "demo_marlin_and_mtp.log"
SAMPLE_MODEL = SAMPLES.parent / "models" / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered"
SCANNED = datetime(2026, 10, 14, 9, 31, 30)  # what the scan's own stamps are set to
NOW = datetime(2026, 10, 14, 9, 45, 0)  # the TUI's clock
DB = "history.duckdb"  # relative: the connection bar names it


def build(workspace: Path) -> Path:
    """The history in `workspace` (a new directory); returns the database's path."""
    (workspace / "logs").mkdir(parents=True)
    shutil.copy(SAMPLE_LOG, workspace / "logs" / "vllm.log")
    shutil.copytree(SAMPLE_MODEL, workspace / "model")
    logwatch = [sys.executable, "-m", "logwatch"]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    subprocess.run([*logwatch, "scan", "--db", DB, "logs/vllm.log", "--model-dir", "model",
                    "--gpu-capability", "10.0"], cwd=workspace, env=env, check=False,
                   capture_output=True)  # exit 1: it found the failures it is meant to
    planned = json.loads(subprocess.run([*logwatch, "plan", "--db", DB, "--json"],
                                        cwd=workspace, env=env, check=True,
                                        capture_output=True, text=True).stdout)
    db = workspace / DB
    _stamp(db)
    plan = {**planned["plan"], "target": "vllm.log"}
    with open_store(db) as store:
        (launch,) = store.query(
            "SELECT snapshot_hash, root_signature, root_problem, number FROM launches "
            f"WHERE id = '{planned['launch']}'")
        snapshot, signature, problem, number = launch
        at = SCANNED - timedelta(seconds=20)
        action = propose(action_id_for("vllm.log", number, plan["id"]), "vllm.log", plan["id"],
                         plan["id"], snapshot, signature, problem, at,
                         f"the plan for launch #{number} passed pre-flight")
        action = transition(action, "awaiting_approval", at + timedelta(seconds=1), "policy",
                            "policy ask: an operator approves every relaunch")
        record_action(store, action, json.dumps(plan, sort_keys=True))
    return db


def _stamp(db: Path) -> None:
    """Every time the scan took from the clock (not from the log) set to SCANNED."""
    with duckdb.connect(str(db)) as con:
        columns = con.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE data_type LIKE 'TIMESTAMP%' AND table_schema = 'main' AND table_name IN "
            "(SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE')"
        ).fetchall()
        for table, column in columns:
            con.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE "{column}" > ?',
                        [SCANNED, datetime(2026, 11, 1)])
