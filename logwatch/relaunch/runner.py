"""Carry an approved action out: apply the plan through an executor, restart, verify, and on
a failed verification roll back and hand the target to a person. Every move is recorded in
the history before the step it names is taken (so an attempt is reserved, and a crash leaves
the truth behind).

The executor is anything that can start a plan's launch and put the previous one back (the
systemd drop-in, a site's command, a supervised child); verification is a function of the
launch started (relaunch/verify.py and core/remedy/verify.py make one).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from logwatch.core.remedy.actions import (
    APPLYING,
    ESCALATED,
    EXECUTOR,
    POLICY,
    RESTARTING,
    ROLLBACK_FAILED,
    ROLLED_BACK,
    ROLLING_BACK,
    SUCCEEDED,
    VERIFY_FAILED,
    VERIFYING,
    Action,
    transition,
)
from logwatch.core.remedy.plan import Launch, Plan
from logwatch.core.remedy.verify import Verdict
from logwatch.host.overlay import OverlayError, make_overlay, overlay_path, remove_overlay
from logwatch.store.actions import record_action
from logwatch.store.db import open_store


class Executor(Protocol):
    def start(self, plan: Plan, overlay_dir: str | None) -> Launch:
        """Put the plan's launch in place and start it (raise on failure)."""

    def roll_back(self) -> None:
        """Put the launch from before back and start it (raise on failure)."""

    def done(self) -> None:
        """The relaunch verified: give back what was held while it ran (a unit's own
        Restart=), before the action is called succeeded."""


@dataclass(frozen=True, slots=True)
class Outcome:
    action: Action
    launch: Launch | None  # the launch started, when one was
    verdict: Verdict | None


# writes an action (its row and the moves not stored yet) to the history
Recorder = Callable[[Action], None]


def file_recorder(db: Path) -> Recorder:
    """A recorder that opens the history file for each write (no daemon holds it)."""
    def record(action: Action) -> None:
        with open_store(db) as store:
            record_action(store, action)
    return record


def record_move(record: Recorder, action: Action, to: str, actor: str, reason: str,
                time: datetime) -> Action:
    """The action moved to `to`, written to the history (before the step it names)."""
    moved = transition(action, to, time, actor, reason)
    record(moved)
    return moved


def carry_out(record: Recorder, action: Action, plan: Plan, executor: Executor,
              verify: Callable[[Launch], Verdict], state_dir: Path,
              on_move: Callable[[Action], None] | None = None,
              now: Callable[[], datetime] = datetime.now) -> Outcome:
    """From `approved` (or `blocked` once its wait is over) to `succeeded`, or to
    `escalated` after a rollback. `record` writes each move before its step."""

    def move(current: Action, to: str, actor: str, reason: str) -> Action:
        moved = record_move(record, current, to, actor, reason, now())
        if on_move is not None:
            on_move(moved)
        return moved

    action = move(action, APPLYING, EXECUTOR, "putting the plan's launch in place"
                  + (" (an overlay of the model directory)" if plan.overlay else ""))
    # an overlay made for this action (not one an earlier launch serves) goes with a rollback
    made = plan.overlay is not None and not overlay_path(state_dir, plan).is_dir()
    try:
        overlay = str(make_overlay(state_dir, plan)) if plan.overlay else None
        launch = executor.start(plan, overlay)
    except (OSError, OverlayError, ValueError, RuntimeError) as exc:
        action = move(action, ROLLING_BACK, EXECUTOR, f"could not apply: {exc}")
        return Outcome(_roll_back(action, executor, move, state_dir, plan, made), None, None)
    action = move(action, RESTARTING, EXECUTOR, "the corrected launch is starting")
    action = move(action, VERIFYING, EXECUTOR, "checking more than /health")
    verdict = verify(launch)
    if verdict.passed:
        executor.done()
        return Outcome(move(action, SUCCEEDED, EXECUTOR, "every check passed"), launch,
                       verdict)
    action = move(action, VERIFY_FAILED, EXECUTOR, "; ".join(
        f"{c.name}: {c.why}" for c in verdict.failed))
    action = move(action, ROLLING_BACK, EXECUTOR, "putting the previous launch back")
    return Outcome(_roll_back(action, executor, move, state_dir, plan, made), launch, verdict)


def _roll_back(action: Action, executor: Executor,
               move: Callable[[Action, str, str, str], Action], state_dir: Path, plan: Plan,
               made_overlay: bool) -> Action:
    try:
        executor.roll_back()
    except (OSError, ValueError, RuntimeError) as exc:
        action = move(action, ROLLBACK_FAILED, EXECUTOR, f"the rollback failed: {exc}")
    else:
        action = move(action, ROLLED_BACK, EXECUTOR, "the previous launch is back")
        if made_overlay:  # nothing serves it now
            with contextlib.suppress(OSError, OverlayError):
                remove_overlay(state_dir, plan)
    return move(action, ESCALATED, POLICY, "stopped after a rollback: a person must look")
