"""The action state machine: one execution of a plan, every move between states audited.

An action starts `proposed`; the policy (or an operator) lets it through, it is applied,
vLLM restarts, the relaunch is verified, and on failure the change is rolled back and a
person is called. The moves allowed are one table (ALLOWED_MOVES); `transition` refuses
anything else, so an executor bug can never skip verification or leave a rollback unrecorded.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

PROPOSED = "proposed"
AWAITING_APPROVAL = "awaiting_approval"
APPROVED = "approved"
REJECTED = "rejected"
EXPIRED = "expired"
BLOCKED = "blocked"
APPLYING = "applying"
RESTARTING = "restarting"
VERIFYING = "verifying"
SUCCEEDED = "succeeded"
VERIFY_FAILED = "verify_failed"
ROLLING_BACK = "rolling_back"
ROLLED_BACK = "rolled_back"
ROLLBACK_FAILED = "rollback_failed"
ESCALATED = "escalated"

# Every legal move. Only an approved action (by the policy or an operator) is blocked or
# applied; `blocked` waits (backoff, hour window, lock, breaker) and leaves for `applying`
# when the wait is over. A proposal the policy refuses outright is `rejected` by it; an
# action whose failure is no longer current at execution time is `expired`. After a
# rollback the runner stops and hands the target to a person (`escalated`), whatever the
# rollback's outcome. An action the daemon was carrying out when it stopped is handed to a
# person at its next start (`escalated` from where it was): nobody knows how far it got.
ALLOWED_MOVES: dict[str, frozenset[str]] = {
    PROPOSED: frozenset({AWAITING_APPROVAL, APPROVED, REJECTED, EXPIRED, ESCALATED}),
    AWAITING_APPROVAL: frozenset({APPROVED, REJECTED, EXPIRED}),
    APPROVED: frozenset({BLOCKED, APPLYING, REJECTED, EXPIRED, ESCALATED}),
    BLOCKED: frozenset({APPLYING, REJECTED, EXPIRED, ESCALATED}),
    APPLYING: frozenset({RESTARTING, ROLLING_BACK, ESCALATED}),
    RESTARTING: frozenset({VERIFYING, VERIFY_FAILED, ESCALATED}),
    VERIFYING: frozenset({SUCCEEDED, VERIFY_FAILED, ESCALATED}),
    VERIFY_FAILED: frozenset({ROLLING_BACK, ESCALATED}),
    ROLLING_BACK: frozenset({ROLLED_BACK, ROLLBACK_FAILED, ESCALATED}),
    ROLLED_BACK: frozenset({ESCALATED}),
    ROLLBACK_FAILED: frozenset({ESCALATED}),
    SUCCEEDED: frozenset(),
    REJECTED: frozenset(),
    EXPIRED: frozenset(),
    ESCALATED: frozenset(),
}
STATES = tuple(ALLOWED_MOVES)
TERMINAL = frozenset(s for s, moves in ALLOWED_MOVES.items() if not moves)
# The executor is touching the target: these hold the target's lock.
IN_FLIGHT = frozenset({APPLYING, RESTARTING, VERIFYING, VERIFY_FAILED, ROLLING_BACK})
# Not started yet: the policy still decides whether and when it runs.
PENDING = frozenset({PROPOSED, AWAITING_APPROVAL, APPROVED, BLOCKED})
# Visiting any of these makes the action a failed attempt (breaker, backoff, failed configs).
FAILURE_STATES = frozenset({VERIFY_FAILED, ROLLING_BACK, ROLLED_BACK, ROLLBACK_FAILED})

POLICY = "policy"
EXECUTOR = "executor"
OPERATOR_PREFIX = "operator:"


class IllegalTransition(ValueError):
    """A move the state machine does not allow; the message names the action and both states."""


def is_actor(actor: str) -> bool:
    """`policy`, `executor` or `operator:<name>` (a name is required)."""
    return actor in (POLICY, EXECUTOR) or (actor.startswith(OPERATOR_PREFIX)
                                           and len(actor) > len(OPERATOR_PREFIX))


@dataclass(frozen=True, slots=True)
class Transition:
    """One audited move. `from_state` is None for the proposal that creates the action."""
    from_state: str | None
    to_state: str
    time: datetime
    actor: str
    reason: str


@dataclass(frozen=True, slots=True)
class Action:
    """One execution of a plan for one target. `config_hash`: the configuration the plan
    results in; `from_config`: the one in force when the failure happened (the snapshot
    hash). `transitions` is the full audit trail, the proposal first."""
    id: str
    target: str
    plan_hash: str
    config_hash: str
    from_config: str
    signature: str
    fingerprint: str  # the incident's fingerprint (signature and key captures)
    created: datetime
    transitions: tuple[Transition, ...]

    @property
    def state(self) -> str:
        return self.transitions[-1].to_state

    @property
    def updated(self) -> datetime:
        return self.transitions[-1].time

    def entered(self, state: str) -> datetime | None:
        """When the action first entered `state`, or None if it never did."""
        return next((t.time for t in self.transitions if t.to_state == state), None)


def action_id_for(target: str, launch_number: int, plan_digest: str) -> str:
    """An action's id: the target, the number of the launch whose failure it fixes, and
    the plan (readers find a launch's actions by the `TARGET-NUMBER-` prefix)."""
    return f"{target}-{launch_number}-{plan_digest[:8]}"


def propose(action_id: str, target: str, plan_hash: str, config_hash: str, from_config: str,
            signature: str, fingerprint: str, time: datetime, reason: str,
            actor: str = POLICY) -> Action:
    """A new action in `proposed`, its proposal the first transition of its audit trail."""
    _check_actor(action_id, actor)
    return Action(action_id, target, plan_hash, config_hash, from_config, signature,
                  fingerprint, time, (Transition(None, PROPOSED, time, actor, reason),))


def transition(action: Action, to: str, time: datetime, actor: str, reason: str) -> Action:
    """The action moved to `to`, the move appended to its trail; IllegalTransition when the
    table does not allow it, the actor is unknown, or time runs backwards."""
    if to not in ALLOWED_MOVES:
        raise IllegalTransition(f"action {action.id}: {to!r} is not a state "
                                f"(one of {', '.join(STATES)})")
    if to not in ALLOWED_MOVES[action.state]:
        allowed = ", ".join(sorted(ALLOWED_MOVES[action.state])) or "none: it is final"
        raise IllegalTransition(f"action {action.id}: cannot move from {action.state} to "
                                f"{to} (allowed: {allowed})")
    _check_actor(action.id, actor)
    if time < action.updated:
        raise IllegalTransition(f"action {action.id}: a move at {time} is earlier than its "
                                f"last one at {action.updated}")
    step = Transition(action.state, to, time, actor, reason)
    return replace(action, transitions=(*action.transitions, step))


def _check_actor(action_id: str, actor: str) -> None:
    if not is_actor(actor):
        raise IllegalTransition(f"action {action_id}: actor {actor!r} is not policy, executor "
                                "or operator:<name>")


def is_terminal(action: Action) -> bool:
    return action.state in TERMINAL


def in_flight(action: Action) -> bool:
    """The executor is at work on the target (the target's lock is held)."""
    return action.state in IN_FLIGHT


def is_pending(action: Action) -> bool:
    return action.state in PENDING


def attempted(action: Action) -> bool:
    """It reached `applying`: an attempt counted against the budget and the hour's limit."""
    return action.entered(APPLYING) is not None


def failed(action: Action) -> bool:
    """An attempt whose relaunch did not verify (whatever the rollback did after)."""
    return any(t.to_state in FAILURE_STATES for t in action.transitions)


def succeeded(action: Action) -> bool:
    return action.state == SUCCEEDED


def finished(action: Action) -> bool:
    """An attempt that is over: succeeded, or failed with the executor done."""
    return attempted(action) and not in_flight(action)


def approved_by(action: Action) -> str | None:
    """Who approved it (`policy` or `operator:<name>`), or None if nobody did."""
    return next((t.actor for t in action.transitions if t.to_state == APPROVED), None)
