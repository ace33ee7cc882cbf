"""`logwatch plan`: the corrected launch for a failed launch in the history, as a diff of its
argv, environment and model directory. Nothing is started.

The launch's configuration is taken from its snapshot in the history and its model directory
read again as it is now (a plan is for the next start); the diagnoses are the ones recorded.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from logwatch.core.diagnosis import diagnosis_from_dict
from logwatch.core.plan import plan_relaunch, render_plan
from logwatch.core.snapshot import GpuFacts, Snapshot
from logwatch.core.visible import json_escaped, visible
from logwatch.host.capture import take_snapshot
from logwatch.host.variants import variant_candidates
from logwatch.host.vllm_cli_data import shipped_vocabulary
from logwatch.relaunch.planned import with_preflight
from logwatch.store.db import default_db_path
from logwatch.store.errors import DatabaseError
from logwatch.store.operator_sql import read_only_query

LAUNCH_QUERY = """
    SELECT l.id, l.source, l.number, s.body
    FROM launches l JOIN snapshots s ON s.hash = l.snapshot_hash
    WHERE l.outcome = 'failed' AND (CAST(? AS VARCHAR) IS NULL OR l.id = ?)
    ORDER BY l.updated DESC, l.number DESC LIMIT 1"""
DIAGNOSES_QUERY = "SELECT body FROM diagnoses WHERE launch_id = ? ORDER BY recorded, id"


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


def plan_command(db: Path | None, launch_id: str | None, as_json: bool) -> int:
    path = db or default_db_path()
    try:
        found = read_only_query(path, LAUNCH_QUERY, (launch_id, launch_id))
        if not found.rows:
            print("logwatch plan: no failed launch" + (f" {visible(launch_id)}" if launch_id
                                                      else "") + f" in {path}",
                  file=sys.stderr)
            return 1
        lid, source, number, body = found.rows[0]
        rows = read_only_query(path, DIAGNOSES_QUERY, (lid,)).rows
    except DatabaseError as exc:
        print(f"logwatch plan: {visible(str(exc))}", file=sys.stderr)
        return 2
    snapshot = retaken(json.loads(body) if isinstance(body, str) else body)
    diagnoses = [diagnosis_from_dict(json.loads(r[0]) if isinstance(r[0], str) else r[0])
                 for r in rows]
    model = snapshot.model
    plan = plan_relaunch(diagnoses, snapshot,
                         variant_candidates(model.path) if model is not None else {},
                         vocab=shipped_vocabulary())
    if plan is not None and plan.changes and not plan.refused:
        plan = with_preflight(plan, snapshot)
    if as_json:
        out = {"launch": lid, "source": source, "number": number,
               "plan": plan.to_dict() if plan else None}
        sys.stdout.write(json_escaped(json.dumps(out, indent=2, ensure_ascii=False)) + "\n")
    elif plan is None:
        print(f"launch #{number} of {visible(str(source))}: a relaunch fixes none of its "
              "causes (" + ", ".join(d.cause for d in diagnoses) + ")")
    else:
        print(f"launch #{number} of {visible(str(source))} ({lid})")
        sys.stdout.write(visible(render_plan(plan, snapshot), lines=True))
    return 0 if plan is not None and plan.startable else 1
