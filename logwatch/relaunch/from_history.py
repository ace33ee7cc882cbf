"""The corrected launch for a failed launch in the history: its snapshot (the model directory
read again now, as a plan is for the next start), its recorded diagnoses, the plan and its
pre-flight. Used by `logwatch plan`, the demo and the daemon's relaunches."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from logwatch.core.diagnosis.model import Diagnosis, diagnosis_from_dict
from logwatch.core.remedy.plan import Plan
from logwatch.core.snapshot.model import GpuFacts, Snapshot
from logwatch.host.capture import take_snapshot
from logwatch.relaunch.planned import checked_plan
from logwatch.store.operator_sql import read_only_query

LAUNCH_QUERY = """
    SELECT l.id, l.source, l.number, s.body, l.snapshot_hash
    FROM launches l JOIN snapshots s ON s.hash = l.snapshot_hash
    WHERE l.outcome = 'failed' AND (CAST(? AS VARCHAR) IS NULL OR l.id = ?)
    ORDER BY l.seq DESC NULLS LAST, l.number DESC LIMIT 1"""
DIAGNOSES_QUERY = "SELECT body FROM diagnoses WHERE launch_id = ? ORDER BY recorded, id"


@dataclass(frozen=True, slots=True)
class FailedLaunch:
    id: str
    source: str
    number: int
    snapshot: Snapshot
    diagnoses: list[Diagnosis]
    plan: Plan | None
    snapshot_hash: str = ""  # the configuration the launch ran with, as recorded


def retaken(body: dict[str, Any]) -> Snapshot:
    """The snapshot a launch recorded, with its model directory read again now."""
    model = (body.get("model") or {}).get("path")
    gpu = {k: v for k, v in (body.get("gpu") or {}).items()
           if k in ("name", "count", "driver", "capability")}
    snapshot = take_snapshot(argv=list(body.get("argv") or []) or None,
                             env=dict(body.get("env") or {}), model_dir=model,
                             gpu=GpuFacts(**gpu, source="the history"))
    return replace(snapshot, launch=dict(body.get("launch") or {}),
                   vllm_version=body.get("vllm_version"))


# runs one parameterised query on the history and returns its rows
Query = Callable[[str, Sequence[Any]], Sequence[Sequence[Any]]]


def failed_launch(path: Path, launch_id: str | None = None) -> FailedLaunch | None:
    """The newest failed launch (or `launch_id`) with its plan, read from the history file;
    None when there is none. Raises DatabaseError for a history that cannot be read."""
    return failed_launch_in(lambda sql, params: read_only_query(path, sql, params).rows,
                            launch_id)


def failed_launch_in(query: Query, launch_id: str | None = None) -> FailedLaunch | None:
    """The same through `query` (the daemon asks its own connection)."""
    found = query(LAUNCH_QUERY, (launch_id, launch_id))
    if not found:
        return None
    lid, source, number, body, recorded = found[0]
    rows = query(DIAGNOSES_QUERY, (lid,))
    snapshot = retaken(json.loads(body) if isinstance(body, str) else body)
    diagnoses = [diagnosis_from_dict(json.loads(r[0]) if isinstance(r[0], str) else r[0])
                 for r in rows]
    plan = checked_plan(diagnoses, snapshot)
    return FailedLaunch(str(lid), str(source), int(number), snapshot, diagnoses, plan,
                        str(recorded or ""))
