"""`logwatch plan`: the corrected launch for a failed launch in the history, as a diff of its
argv, environment and model directory. Nothing is started (relaunch/from_history.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from logwatch.core.remedy.plan import render_plan
from logwatch.core.safe_text.visible import json_escaped, visible
from logwatch.relaunch.from_history import failed_launch
from logwatch.store.db import default_db_path
from logwatch.store.errors import DatabaseError


def plan_command(db: Path | None, launch_id: str | None, as_json: bool) -> int:
    path = db or default_db_path()
    try:
        found = failed_launch(path, launch_id)
    except DatabaseError as exc:
        print(f"logwatch plan: {visible(str(exc))}", file=sys.stderr)
        return 2
    if found is None:
        print("logwatch plan: no failed launch" + (f" {visible(launch_id)}" if launch_id
                                                  else "") + f" in {path}", file=sys.stderr)
        return 1
    plan = found.plan
    if as_json:
        out = {"launch": found.id, "source": found.source, "number": found.number,
               "plan": plan.to_dict() if plan else None}
        sys.stdout.write(json_escaped(json.dumps(out, indent=2, ensure_ascii=False)) + "\n")
    elif plan is None:
        print(f"launch #{found.number} of {visible(found.source)}: a relaunch fixes none of "
              "its causes (" + ", ".join(d.cause for d in found.diagnoses) + ")")
    else:
        print(f"launch #{found.number} of {visible(found.source)} ({found.id})")
        sys.stdout.write(visible(render_plan(plan, found.snapshot), lines=True))
    return 0 if plan is not None and plan.startable else 1
