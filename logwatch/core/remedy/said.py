"""An action's latest move as one line an operator reads: `relaunch refused: diagnosis
confidence 0.70 is not above 0.80`. Pure; what `logwatch run` and the daemon on a terminal
print for every move (the JSON log keeps the fields)."""

from __future__ import annotations

from logwatch.core.remedy.actions import (
    APPLYING,
    APPROVED,
    AWAITING_APPROVAL,
    BLOCKED,
    ESCALATED,
    EXPIRED,
    POLICY,
    PROPOSED,
    REJECTED,
    RESTARTING,
    ROLLBACK_FAILED,
    ROLLED_BACK,
    ROLLING_BACK,
    SUCCEEDED,
    VERIFY_FAILED,
    VERIFYING,
    Action,
)
from logwatch.core.remedy.policy import REASON_CODES

MAX_REASON = 300  # a reason longer than this is cut (the history keeps it whole)

_SAID = {
    PROPOSED: "relaunch {id} proposed for {target}: {reason}",
    AWAITING_APPROVAL: "relaunch {id} awaits approval: {reason}",
    APPROVED: "relaunch {id} approved by {actor}: {reason}",
    BLOCKED: "relaunch {id} waits: {reason}",
    APPLYING: "relaunch {id}: applying the plan: {reason}",
    RESTARTING: "relaunch {id}: restarting vLLM: {reason}",
    VERIFYING: "relaunch {id}: verifying: {reason}",
    SUCCEEDED: "relaunch {id} succeeded: {reason}",
    VERIFY_FAILED: "relaunch {id} failed verification: {reason}",
    ROLLING_BACK: "relaunch {id}: rolling back: {reason}",
    ROLLED_BACK: "relaunch {id} rolled back: {reason}",
    ROLLBACK_FAILED: "relaunch {id}: the rollback failed: {reason}",
    EXPIRED: "relaunch {id} expired: {reason}",
    ESCALATED: "relaunch {id} escalated to a person: {reason}",
}


def move_line(action: Action) -> str:
    """The action's latest move in words, on one line."""
    last = action.transitions[-1]
    reason = " ".join(last.reason.split())
    code, colon, words = reason.partition(": ")
    if colon and code in REASON_CODES:  # `low_confidence: diagnosis confidence ...`: the words
        reason = words
    if len(reason) > MAX_REASON:
        reason = reason[:MAX_REASON - 1] + "…"
    actor = "the policy" if last.actor == POLICY else last.actor
    if last.to_state == REJECTED:
        if last.actor == POLICY:
            return f"relaunch refused: {reason}"
        return f"relaunch {action.id} rejected by {actor}" + (f": {reason}" if reason else "")
    template = _SAID.get(last.to_state, "relaunch {id} is {state}: {reason}")
    return template.format(id=action.id, target=action.target, actor=actor, reason=reason,
                           state=last.to_state).removesuffix(": ")
