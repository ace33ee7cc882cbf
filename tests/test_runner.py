"""The runner carries an approved action out with a real child (the vLLM stand-in): a launch
that fails its verification is rolled back and handed to a person, every move recorded, and
the guardrails then refuse the configuration that failed."""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timedelta
from pathlib import Path

from logwatch.core.remedy.actions import APPROVED, POLICY, propose, transition
from logwatch.core.remedy.plan import Change, Plan
from logwatch.core.remedy.policy import FAILED_CONFIG, RelaunchPolicy, Request, TargetPolicy, decide
from logwatch.core.signatures.library import Library
from logwatch.demo.scenario import SPEC, Timeline, standin_entry, verify_child
from logwatch.relaunch.child import Child, ChildExecutor
from logwatch.relaunch.runner import carry_out, file_recorder
from logwatch.store.actions import load_history
from logwatch.store.db import open_store
from tests.test_plan import A16, MODELS, W4A4_UNCOVERED


def test_a_relaunch_that_fails_verification_is_rolled_back_and_escalated(
        library: Library, tmp_path: Path) -> None:
    for name in (A16, W4A4_UNCOVERED):
        shutil.copytree(MODELS / name, tmp_path / "models" / name)
    vllm = standin_entry(tmp_path / "bin")
    env = {**os.environ, "LOGWATCH_STANDIN_GPU": "b200", "LOGWATCH_STANDIN_GPU_COUNT": "4",
           "LOGWATCH_STANDIN_PACE": "0"}
    first = Child([str(vllm), "serve", str(tmp_path / "models" / A16), "-tp", "4",
                   "--speculative-config", SPEC, "--port", "0"], env, tmp_path / "launch-1.log")
    # the variant alone: its MTP draft is not covered, so the corrected launch crashes too
    plan = Plan(("marlin_weight_only_tile",), changes=(Change(
        "model", "model", str(tmp_path / "models" / W4A4_UNCOVERED), "the variant alone"),))
    now = datetime(2026, 12, 1, 10)
    action = transition(propose("a1", "demo", plan.digest, plan.digest, "cfg-before",
                                "weights.tensor_size_mismatch", "launch-1", now, "test"),
                        APPROVED, now, POLICY, "auto")
    db = tmp_path / "history.duckdb"
    executor = ChildExecutor(first, tmp_path)
    try:
        outcome = carry_out(file_recorder(db), action, plan, executor,
                            lambda launch: verify_child(library, executor.current, launch,
                                                        Timeline()),
                            tmp_path / "state", now=lambda: now)
    finally:
        for child in executor.children:
            child.stop()
    moves = [t.to_state for t in outcome.action.transitions]
    assert moves == ["proposed", "approved", "applying", "restarting", "verifying",
                     "verify_failed", "rolling_back", "rolled_back", "escalated"]
    assert outcome.verdict is not None and not outcome.verdict.passed
    assert {c.name for c in outcome.verdict.failed} >= {"health", "no_fatal_finding"}
    assert not executor.current.running  # stopped, and the failed launch not put back
    with open_store(db) as store:
        history = load_history(store, "demo")
    assert [a.state for a in history] == ["escalated"]
    again = propose("a2", "demo", plan.digest, plan.digest, "cfg-before",
                    "weights.tensor_size_mismatch", "launch-3", now + timedelta(hours=2),
                    "test")
    decision = decide(history, now + timedelta(hours=2),
                      RelaunchPolicy({"demo": TargetPolicy("auto")}),
                      Request(again, "stable", 0.95))
    assert decision.verdict == "block" and decision.reason == FAILED_CONFIG
