"""`logwatch demo`: the whole loop on this machine, with the vLLM stand-in in a scratch
workspace: a Qwen3.6 NVFP4A16 checkpoint whose MTP modules the ignore list misses (its W4A4
variant beside it), launched on a simulated GPU; the failure scanned into a DuckDB history and
diagnosed; the plan, its pre-flight and the policy's decision recorded as an action; the
corrected launch started and verified on more than /health; the history queried with SQL.

On a B200 (compute capability 10.0) the launch fails on the MTP draft's tensor-size mismatch
and the plan merges the ignore list in an overlay; on an H200 (`--gpu h200`) it fails on the
Marlin tile error and the plan is refused (no native FP4 on 9.0), with what else may work.
The relaunch goes through the child executor of `logwatch run`: stop, start the corrected
command line. Exit 0 only when the loop ends healthy.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from logwatch.core.remedy.actions import (
    APPROVED,
    POLICY,
    SUCCEEDED,
    Action,
    action_id_for,
    propose,
)
from logwatch.core.remedy.plan import Launch, render_plan
from logwatch.core.remedy.policy import RelaunchPolicy, Request, TargetPolicy, decide
from logwatch.core.remedy.verify import Verdict
from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.findings import Finding
from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from logwatch.core.snapshot.argv import LaunchSpec
from logwatch.demo.standin_outcome import GPUS
from logwatch.relaunch.child import Child, ChildExecutor
from logwatch.relaunch.from_history import FailedLaunch, failed_launch
from logwatch.relaunch.runner import carry_out, file_recorder, record_move
from logwatch.relaunch.verify import endpoint, verify_launch
from logwatch.scan.offline import resolve_inputs, scan_inputs
from logwatch.scan.triage import SnapshotOptions
from logwatch.store.actions import load_history, record_action
from logwatch.store.db import open_store
from logwatch.store.operator_sql import read_only_query
from logwatch.store.record import ScanRecorder

SAMPLE_MODELS = Path(__file__).resolve().parent.parent.parent / "samples" / "models"
A16_SAMPLE, W4A4_SAMPLE = "qwen3.6-35b-a3b-nvfp4a16", "qwen3.6-35b-a3b-nvfp4-mtp-covered"
MODEL, VARIANT = "Qwen3.6-35B-A3B-NVFP4A16", "Qwen3.6-35B-A3B-NVFP4"
TARGET = "demo"
SPEC = '{"method": "mtp", "num_speculative_tokens": 1}'
FAIL_DEADLINE_S = 30.0
HEALTH_DEADLINE_S = 30.0
SOAK_DEADLINE_S = 15.0
HISTORY_SQL = ("SELECT a.state, a.signature, count(t.to_state) AS moves FROM actions a "
               "JOIN action_transitions t ON t.action_id = a.id GROUP BY ALL ORDER BY 1")


class DemoError(Exception):
    """The demo could not run here (no sample models, a workspace not writable)."""


@dataclass
class Timeline:
    """What happened, with the seconds since the start; printed as it goes, or kept quiet
    for --json."""

    started: float = field(default_factory=time.monotonic)
    lines: list[tuple[float, str]] = field(default_factory=list)
    echo: Callable[[str], None] | None = None

    def say(self, text: str) -> None:
        at = time.monotonic() - self.started
        self.lines.append((at, text))
        if self.echo is not None:
            self.echo(f"[{at:5.1f} s] {text}")


def standin_entry(directory: Path) -> Path:
    """A `vllm` executable in `directory` that runs the stand-in: named as vLLM's entry point
    is, so a launch of it reads as `vllm serve ...`."""
    directory.mkdir(parents=True, exist_ok=True)
    vllm = directory / "vllm"
    vllm.write_text(f"#!{sys.executable}\nimport sys\nfrom logwatch.demo.standin import main\n"
                    "sys.exit(main())\n")
    vllm.chmod(0o755)
    return vllm


def workspace(root: Path) -> dict[str, Path]:
    """The scratch workspace: the checkpoint (its MTP entry taken out of the ignore list, as
    the seed's was), its W4A4 variant beside it, a `vllm` that runs the stand-in, the state
    directory and the history."""
    if not (SAMPLE_MODELS / A16_SAMPLE).is_dir():
        raise DemoError(f"{SAMPLE_MODELS}: the sample models are not here (a checkout of "
                        "logwatch has them)")
    models = root / "models"
    shutil.copytree(SAMPLE_MODELS / A16_SAMPLE, models / MODEL)
    shutil.copytree(SAMPLE_MODELS / W4A4_SAMPLE, models / VARIANT)
    config_path = models / MODEL / "config.json"
    config = json.loads(config_path.read_text())
    quant = config["quantization_config"]
    quant["ignore"] = [e for e in quant["ignore"] if "mtp" not in e]
    config_path.write_text(json.dumps(config, indent=2))
    return {"root": root, "model": models / MODEL, "vllm": standin_entry(root / "bin"),
            "state": root / "state", "db": root / "history.duckdb", "logs": root / "logs"}


def run_demo(library: Library, gpu: str = "b200", as_json: bool = False,
             keep: Path | None = None, executor: str = "child") -> tuple[bool, dict[str, Any]]:
    """The loop; (healthy, the summary --json prints). `executor` "systemd": through the
    user's systemd manager and the real daemon (demo/systemd_loop.py)."""
    timeline = Timeline(echo=None if as_json else print)
    root = Path(tempfile.mkdtemp(prefix="logwatch-demo-")) if keep is None else keep
    children: list[Child] = []
    try:
        if executor == "systemd":
            from logwatch.demo.systemd_loop import systemd_loop

            summary: dict[str, Any] = {"healthy": False, "gpu": GPUS[gpu].name,
                                       "workspace": str(root), "executor": "systemd",
                                       "incidents": [], "actions": []}
            summary["healthy"] = systemd_loop(workspace(root), gpu, timeline, summary)
            timeline.say("healthy: the corrected launch serves" if summary["healthy"]
                         else "the loop did not end healthy")
            return bool(summary["healthy"]), _finish(summary, timeline)
        return _loop(library, gpu, workspace(root), timeline, children)
    finally:
        for child in children:
            child.stop()
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


def _loop(library: Library, gpu: str, ws: dict[str, Path], timeline: Timeline,
          children: list[Child]) -> tuple[bool, dict[str, Any]]:
    simulated = GPUS[gpu]
    env = {**os.environ, "LOGWATCH_STANDIN_GPU": gpu, "LOGWATCH_STANDIN_GPU_COUNT": "4",
           "LOGWATCH_STANDIN_PACE": "0.05", "VLLM_LOG_STATS_INTERVAL": "1"}
    argv = [str(ws["vllm"]), "serve", str(ws["model"]), "-tp", "4", "--speculative-config",
            SPEC, "--port", "0"]
    summary: dict[str, Any] = {"healthy": False, "gpu": simulated.name, "workspace":
                               str(ws["root"]), "incidents": [], "actions": []}
    timeline.say(f"launch 1 on a simulated {simulated.name} (compute capability "
                 f"{simulated.capability / 10:.1f}): {shlex.join(argv[1:])}")
    first = Child(argv, env, ws["logs"] / "launch-1.log")
    children.append(first)
    first.start()
    code = first.wait(time.monotonic() + FAIL_DEADLINE_S)
    if code is None:
        timeline.say("launch 1 is still running: nothing to fix")
        return False, _finish(summary, timeline)
    timeline.say(f"launch 1 exited with status {code}")

    report = _scan(library, first, argv, simulated.capability, ws["db"])
    summary["incidents"] = [{"signature": i["signature"], "title": i["title"],
                             "fatal": i["fatal"]} for i in report["incidents"]]
    index = report.get("root_cause")
    root_cause = report["incidents"][index] if index is not None else None
    timeline.say("scanned into the history: " + (
        f"root cause {root_cause['signature']}: {root_cause['title']}" if root_cause
        else "no root cause found"))
    found = failed_launch(ws["db"])
    if found is None or found.plan is None:
        timeline.say("no plan: a relaunch fixes none of the causes found")
        return False, _finish(summary, timeline)
    plan = found.plan
    for diagnosis in found.diagnoses:
        timeline.say(f"diagnosis: {diagnosis.title}")
    timeline.say("plan " + plan.digest + ":\n" + render_plan(plan, found.snapshot).rstrip())
    summary["plan"] = plan.to_dict()
    action = _propose(found, report)
    if not plan.startable:
        timeline.say("the plan is not startable: it is shown, never started")
        return False, _finish(summary, timeline)
    action, allowed = _decide(ws["db"], action, found)
    summary["actions"] = [{"id": action.id, "state": action.state}]
    if not allowed:
        timeline.say(f"the policy did not allow it: {action.transitions[-1].reason}")
        return False, _finish(summary, timeline)
    timeline.say(f"action {action.id}: approved by the policy (auto)")

    executor = ChildExecutor(first, ws["logs"])
    result = carry_out(file_recorder(ws["db"]), action, plan, executor,
                       lambda launch: verify_child(library, executor.current, launch, timeline),
                       ws["state"], on_move=lambda moved: timeline.say(
                           f"action: {moved.state} ({moved.transitions[-1].reason})"))
    children.extend(executor.children)
    action = result.action
    if result.verdict is not None:
        for check in result.verdict.checks:
            timeline.say(f"  [{'ok' if check.holds else 'NO'}] {check.name}: {check.why}")
    if action.state == SUCCEEDED:
        summary["healthy"] = True
        timeline.say("healthy: the corrected launch serves")
    else:
        timeline.say(f"the corrected launch did not pass: the action ended {action.state}")
    summary["actions"] = [{"id": action.id, "state": action.state,
                           "moves": [t.to_state for t in action.transitions]}]
    executor.current.stop()
    rows = read_only_query(ws["db"], HISTORY_SQL).rows
    timeline.say("the history, asked with SQL (" + HISTORY_SQL + "):\n" + "\n".join(
        "  " + " | ".join(str(v) for v in row) for row in rows))
    summary["history"] = [list(map(str, row)) for row in rows]
    return bool(summary["healthy"]), _finish(summary, timeline)


def _finish(summary: dict[str, Any], timeline: Timeline) -> dict[str, Any]:
    summary["seconds"] = round(time.monotonic() - timeline.started, 1)
    summary["timeline"] = [{"at": round(at, 2), "text": text} for at, text in timeline.lines]
    return summary


def _scan(library: Library, child: Child, argv: list[str], capability: int, db: Path
          ) -> dict[str, Any]:
    recorder = ScanRecorder()
    options = SnapshotOptions(cmdline=shlex.join(argv), model_dir=argv[2],
                              gpu_capability=capability)
    report = scan_inputs(resolve_inputs([str(child.log)]), library, snapshot_options=options,
                         recorder=recorder, jobs=1)
    with open_store(db) as store:
        recorder.write(store, report)
    return report


def _propose(found: FailedLaunch, report: dict[str, Any]) -> Action:
    plan = found.plan
    assert plan is not None
    root = next((d for d in found.diagnoses if d.signature), None)
    now = datetime.now()
    return propose(action_id_for(TARGET, found.number, plan.digest), TARGET, plan.digest,
                   plan.digest, found.snapshot.content_hash(),
                   root.signature if root and root.signature else "", found.id, now,
                   f"the plan for launch #{found.number} passed pre-flight")


def _decide(db: Path, action: Action, found: FailedLaunch) -> tuple[Action, bool]:
    """The policy's decision (`auto` for the demo's target), recorded either way."""
    root = next((d for d in found.diagnoses if d.signature), None)
    policy = RelaunchPolicy({TARGET: TargetPolicy("auto")})
    with open_store(db) as store:
        history = load_history(store, TARGET)
    decision = decide(history, datetime.now(), policy,
                      Request(action, "stable", root.confidence if root else 0.0))
    if decision.verdict == "allow":
        return record_move(file_recorder(db), action, APPROVED, POLICY,
                           "policy auto: every guardrail passed", datetime.now()), True
    with open_store(db) as store:
        record_action(store, action)
    return action, False


def verify_child(library: Library, child: Child, launch: Launch, timeline: Timeline) -> Verdict:
    """Every check over the child's findings (its log scanned again at each look) and its
    server's answers, with a short soak for a speculative-decoding reading."""
    base = _bound_endpoint(child, launch.spec)
    timeline.say(f"the corrected launch serves on {base}" if base
                 else "the corrected launch never named its port")
    matcher = Matcher(library.signatures, vocabulary=library.vocabulary)
    return verify_launch(launch.spec, lambda: _findings(matcher, child),
                         lambda: child.running,
                         HEALTH_DEADLINE_S, SOAK_DEADLINE_S, base)


def _bound_endpoint(child: Child, spec: LaunchSpec) -> str | None:
    """With `--port 0` the stand-in names its port in its start line."""
    deadline = time.monotonic() + HEALTH_DEADLINE_S
    while time.monotonic() < deadline:
        text = child.log.read_text(errors="replace") if child.log.exists() else ""
        for line in text.splitlines():
            if "on http://" in line:
                return line.rsplit("on ", 1)[1].strip().rstrip("/")
        if child.process is not None and child.process.poll() is not None:
            return None
        time.sleep(0.1)  # waiting for the start line, within the deadline
    return endpoint(spec)


def _findings(matcher: Matcher, child: Child) -> list[Finding]:
    scanner = BlockScanner(matcher, str(child.log), datetime.now())
    data = child.log.read_bytes() if child.log.exists() else b""
    return scanner.feed(data) + scanner.finish()
