"""The action state machine: every legal and illegal move, the audit trail, random walks."""

from __future__ import annotations

import itertools
import random
from collections import deque
from datetime import datetime, timedelta

import pytest

from logwatch.core.remedy import actions as A
from logwatch.core.remedy.actions import (
    ALLOWED_MOVES,
    IN_FLIGHT,
    STATES,
    TERMINAL,
    Action,
    IllegalTransition,
    propose,
    transition,
)

T0 = datetime(2026, 12, 1, 9, 0)
ACTORS = ("policy", "executor", "operator:ann")


def fresh() -> Action:
    return propose("act1", "qwen", "plan1", "cfg-new", "cfg-old", "marlin.tile_size",
                   "fp1", T0, "diagnosis: weight-only Marlin path")


def path_to(state: str) -> list[str]:
    """The shortest list of moves from `proposed` to `state` (breadth first)."""
    seen = {A.PROPOSED: [A.PROPOSED]}
    queue = deque([A.PROPOSED])
    while queue:
        here = queue.popleft()
        for nxt in sorted(ALLOWED_MOVES[here]):
            if nxt not in seen:
                seen[nxt] = [*seen[here], nxt]
                queue.append(nxt)
    return seen[state]


def reach(state: str) -> Action:
    action = fresh()
    for i, step in enumerate(path_to(state)[1:], start=1):
        action = transition(action, step, T0 + timedelta(minutes=i), "executor", f"to {step}")
    return action


def test_the_states_are_the_issues_and_all_reachable() -> None:
    assert set(STATES) == {
        "proposed", "awaiting_approval", "approved", "rejected", "expired", "blocked",
        "applying", "restarting", "verifying", "succeeded", "verify_failed", "rolling_back",
        "rolled_back", "rollback_failed", "escalated"}
    for state in STATES:
        assert reach(state).state == state
    assert set(TERMINAL) == {"succeeded", "rejected", "expired", "escalated"}


@pytest.mark.parametrize("start", STATES)
@pytest.mark.parametrize("to", STATES)
def test_every_move_is_allowed_exactly_when_the_table_says(start: str, to: str) -> None:
    action = reach(start)
    later = action.updated + timedelta(seconds=1)
    if to in ALLOWED_MOVES[start]:
        moved = transition(action, to, later, "policy", "why")
        assert moved.state == to
        assert moved.transitions[-1] == A.Transition(start, to, later, "policy", "why")
        assert action.state == start  # the original is untouched
    else:
        with pytest.raises(IllegalTransition, match=f"act1: cannot move from {start} to {to}"):
            transition(action, to, later, "policy", "why")


@pytest.mark.parametrize("state", sorted(TERMINAL))
def test_a_final_state_has_no_way_out(state: str) -> None:
    with pytest.raises(IllegalTransition, match="none: it is final"):
        transition(reach(state), A.PROPOSED, T0 + timedelta(days=1), "policy", "again")


@pytest.mark.parametrize(("to", "actor", "when", "message"), [
    ("dancing", "policy", T0, "'dancing' is not a state"),
    (A.APPROVED, "root", T0, "actor 'root' is not policy"),
    (A.APPROVED, "operator:", T0, "actor 'operator:' is not policy"),
    (A.APPROVED, "policy", T0 - timedelta(seconds=1), "earlier than its last one"),
])
def test_bad_moves_say_what_is_wrong(to: str, actor: str, when: datetime,
                                     message: str) -> None:
    with pytest.raises(IllegalTransition, match=message):
        transition(fresh(), to, when, actor, "why")


def test_a_proposal_needs_a_known_actor() -> None:
    with pytest.raises(IllegalTransition, match="actor"):
        propose("x", "t", "p", "c", "f", "s", "fp", T0, "why", actor="someone")


def _reachable(start: str, without: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in ALLOWED_MOVES[todo.pop()] - {without}:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_nothing_succeeds_without_verifying_and_nothing_fails_without_a_person() -> None:
    assert A.SUCCEEDED not in _reachable(A.PROPOSED, without=A.VERIFYING)
    # a failure ends with a person: the only final state after it is escalated
    after_failure = _reachable(A.VERIFY_FAILED, without="")
    assert after_failure & TERMINAL == {A.ESCALATED}


def test_nothing_is_applied_without_approval() -> None:
    assert A.APPLYING not in _reachable(A.PROPOSED, without=A.APPROVED)


def test_helpers_follow_the_trail() -> None:
    action = fresh()
    assert (A.is_pending(action), A.in_flight(action), A.attempted(action)) == (
        True, False, False)
    action = transition(action, A.AWAITING_APPROVAL, T0, "policy", "ask")
    action = transition(action, A.APPROVED, T0 + timedelta(minutes=1), "operator:ann", "ok")
    assert A.approved_by(action) == "operator:ann"
    action = transition(action, A.APPLYING, T0 + timedelta(minutes=2), "policy", "go")
    assert A.in_flight(action) and A.attempted(action) and not A.finished(action)
    assert action.entered(A.APPLYING) == T0 + timedelta(minutes=2)
    for step in (A.RESTARTING, A.VERIFY_FAILED, A.ROLLING_BACK):
        action = transition(action, step, action.updated, "executor", step)
        assert A.in_flight(action)
    action = transition(action, A.ROLLED_BACK, action.updated, "executor", "undone")
    assert A.failed(action) and A.finished(action) and not A.in_flight(action)
    assert not A.is_terminal(action)
    action = transition(action, A.ESCALATED, action.updated, "policy", "a person decides")
    assert A.is_terminal(action) and not A.succeeded(action)
    assert [t.to_state for t in action.transitions] == [
        "proposed", "awaiting_approval", "approved", "applying", "restarting",
        "verify_failed", "rolling_back", "rolled_back", "escalated"]


@pytest.mark.parametrize("seed", range(40))
def test_random_walks_keep_a_consistent_audit_trail(seed: int) -> None:
    rng = random.Random(seed)
    action, now = fresh(), T0
    for _ in range(50):  # the longest path is far shorter: every walk ends
        if A.is_terminal(action):
            break
        legal = sorted(ALLOWED_MOVES[action.state])
        illegal = sorted(set(STATES) - set(legal))
        bad = rng.choice(illegal)
        with pytest.raises(IllegalTransition):
            transition(action, bad, now, rng.choice(ACTORS), "never")
        now += timedelta(seconds=rng.randint(0, 600))
        before = action
        action = transition(action, rng.choice(legal), now, rng.choice(ACTORS), "step")
        assert len(action.transitions) == len(before.transitions) + 1
    assert A.is_terminal(action)
    trail = action.transitions
    assert trail[0].from_state is None and trail[0].to_state == A.PROPOSED
    for prev, step in itertools.pairwise(trail):
        assert step.from_state == prev.to_state
        assert step.to_state in ALLOWED_MOVES[prev.to_state]
        assert step.time >= prev.time
    assert A.in_flight(action) == (action.state in IN_FLIGHT)
    assert A.failed(action) == any(t.to_state in A.FAILURE_STATES for t in trail)
    if A.succeeded(action):
        assert not A.failed(action) and action.entered(A.VERIFYING) is not None
