"""The relaunch guardrails: each one blocks, and lets through again at the right time."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest

from logwatch.core.launches.lifecycle import FAILED, SERVING, STARTING, STOPPED
from logwatch.core.remedy import actions as A
from logwatch.core.remedy import policy as P
from logwatch.core.remedy.actions import Action, propose, transition
from logwatch.core.remedy.policy import (
    CurrentLaunch,
    Decision,
    OperatorEvent,
    RelaunchPolicy,
    Request,
    TargetPolicy,
    Thresholds,
    decide,
    recheck,
)
from logwatch.core.settings.config import TargetConfig

T0 = datetime(2026, 12, 1, 9, 0)
MIN = timedelta(minutes=1)
SIG = "marlin.tile_size"
# breaker far away unless a test is about it, so backoff and budget are seen alone
LOOSE = Thresholds(breaker_failures=100, attempts_per_failure=100)


def policy(mode: str = "auto", max_per_hour: int = 100,
           thresholds: Thresholds = LOOSE) -> RelaunchPolicy:
    return RelaunchPolicy({"qwen": TargetPolicy(mode, max_per_hour)}, thresholds)


def attempt(name: str, start: datetime, outcome: str, config: str = "", source: str = "cfg0",
            signature: str = SIG, target: str = "qwen") -> Action:
    """A past action that reached `applying` at `start` and then `outcome`: running (still
    in flight), succeeded, or failed (rolled back, ended 4 minutes after it started)."""
    a = propose(name, target, f"plan-{name}", config or f"cfg-{name}", source, signature,
                "fp", start, "diagnosis")
    a = transition(a, A.APPROVED, start, "policy", "auto")
    a = transition(a, A.APPLYING, start, "policy", "allowed")
    if outcome == "running":
        return a
    a = transition(a, A.RESTARTING, start + MIN, "executor", "restart")
    a = transition(a, A.VERIFYING, start + 2 * MIN, "executor", "started")
    if outcome == "succeeded":
        return transition(a, A.SUCCEEDED, start + 3 * MIN, "executor", "healthy")
    a = transition(a, A.VERIFY_FAILED, start + 3 * MIN, "executor", "marlin repack seen")
    a = transition(a, A.ROLLING_BACK, start + 3 * MIN, "executor", "undo")
    return transition(a, A.ROLLED_BACK, start + 4 * MIN, "executor", "undone")


def request(name: str = "new", config: str = "cfg-new", source: str = "cfg0",
            signature: str = SIG, status: str = "stable", confidence: float = 0.95,
            approved_by: str | None = "policy", launch_started: datetime | None = None,
            running: bool = False, target: str = "qwen") -> Request:
    a = propose(name, target, "plan-new", config, source, signature, "fp", T0, "diagnosis")
    if approved_by:
        a = transition(a, A.APPROVED, T0, approved_by, "approved")
    return Request(a, status, confidence, launch_started, running)


def reset(at: datetime) -> OperatorEvent:
    return OperatorEvent(P.BREAKER_RESET, "qwen", at, "operator:ann", "checked the GPU")


def verdict(d: Decision) -> tuple[str, str]:
    return d.verdict, d.reason


@pytest.mark.parametrize(("pol", "req", "reason"), [
    (RelaunchPolicy({}), request(), P.NO_TARGETS),
    (policy(), request(target="other"), P.UNKNOWN_TARGET),
    (policy("off"), request(), P.POLICY_OFF),
    (policy("sometimes"), request(), P.POLICY_OFF),
    (policy(max_per_hour=0), request(), P.POLICY_OFF),
    (policy(), request(status="experimental"), P.SIGNATURE_NOT_STABLE),
    (policy(), request(status="deprecated"), P.SIGNATURE_NOT_STABLE),
    (policy(), request(confidence=0.8), P.LOW_CONFIDENCE),  # above, not equal
    (policy(), request(confidence=0.5), P.LOW_CONFIDENCE),
])
def test_what_may_never_start(pol: RelaunchPolicy, req: Request, reason: str) -> None:
    decision = decide([], T0, pol, req)
    assert verdict(decision) == (P.BLOCK, reason)
    assert decision.text and not decision.retryable
    assert verdict(decide([], T0 + timedelta(days=365), pol, req)) == (P.BLOCK, reason)


def test_a_clean_request_is_allowed() -> None:
    assert decide([], T0, policy(), request(confidence=0.81)) == P.allow()


def test_an_empty_target_list_never_means_all() -> None:
    decision = decide([], T0, RelaunchPolicy({}), request())
    assert "never means all" in decision.text
    configured = P.policy_from_config([])
    assert verdict(decide([], T0, configured, request())) == (P.BLOCK, P.NO_TARGETS)


def test_ask_waits_for_an_operator_not_the_policy() -> None:
    for who in (None, "policy"):
        decision = decide([], T0, policy("ask"), request(approved_by=who))
        assert verdict(decision) == (P.NEEDS_APPROVAL, P.APPROVAL)
        assert "logwatch approve new" in decision.text
    assert decide([], T0, policy("ask"), request(approved_by="operator:ann")) == P.allow()


def test_a_configuration_that_failed_is_refused_forever() -> None:
    history = [attempt("a", T0, "failed", config="cfg-bad")]
    for later in (timedelta(hours=1), timedelta(days=400)):
        history_now = [*history, reset(T0 + later - MIN)]
        decision = decide(history_now, T0 + later, policy(), request(config="cfg-bad"))
        assert verdict(decision) == (P.BLOCK, P.FAILED_CONFIG)
        assert "action a" in decision.text
    # another configuration is fine once the backoff is over
    assert decide(history, T0 + timedelta(hours=1), policy(),
                  request(config="cfg-other")) == P.allow()
    # a configuration that succeeded is not "failed"
    ok = [attempt("b", T0, "succeeded", config="cfg-good")]
    assert decide(ok, T0 + timedelta(hours=1), policy(), request(config="cfg-good")) == P.allow()


def test_the_attempt_budget_counts_per_signature_and_configuration_in_force() -> None:
    limits = Thresholds(attempts_per_failure=2, breaker_failures=100)
    history = [attempt("a", T0, "succeeded"), attempt("b", T0 + 10 * MIN, "succeeded")]
    now = T0 + timedelta(days=1)
    decision = decide(history, now, policy(thresholds=limits), request())
    assert verdict(decision) == (P.BLOCK, P.BUDGET_EXHAUSTED)
    assert decide(history, now, policy(thresholds=limits), request(source="cfg1")) == P.allow()
    assert decide(history, now, policy(thresholds=limits),
                  request(signature="mtp.size_mismatch")) == P.allow()
    # reserved from `applying`: an attempt still running counts already
    running = [attempt("a", T0, "succeeded"), attempt("b", T0 + 10 * MIN, "running")]
    assert verdict(decide(running, now, policy(thresholds=limits), request())) == (
        P.BLOCK, P.BUDGET_EXHAUSTED)
    # a proposal that never reached applying costs nothing
    proposed_only = [request(name="c").action, attempt("a", T0, "succeeded")]
    assert decide(proposed_only, now, policy(thresholds=limits), request()) == P.allow()


def test_max_per_hour_waits_until_the_oldest_attempt_leaves_the_window() -> None:
    history = [attempt("a", T0, "succeeded", source="x"),
               attempt("b", T0 + 10 * MIN, "succeeded", source="y"),
               attempt("c", T0 + 20 * MIN, "succeeded", source="z")]
    pol = policy(max_per_hour=2)
    decision = decide(history, T0 + 30 * MIN, pol, request())
    assert verdict(decision) == (P.WAIT, P.MAX_PER_HOUR)
    # three in the window, two allowed: two must leave, the second one leaves at 10:10
    assert decision.until == T0 + 70 * MIN
    assert verdict(decide(history, decision.until - timedelta(seconds=1), pol, request())) == (
        P.WAIT, P.MAX_PER_HOUR)
    assert decide(history, decision.until, pol, request()) == P.allow()


@pytest.mark.parametrize("failures", range(1, 8))
def test_backoff_doubles_after_each_failure_and_is_capped(failures: int) -> None:
    limits = Thresholds(backoff_base=MIN, backoff_max=16 * MIN, breaker_failures=100,
                        attempts_per_failure=100)
    history = [attempt(f"a{i}", T0 + i * timedelta(hours=2), "failed") for i in range(failures)]
    last_end = history[-1].updated
    expected = min(MIN * 2 ** (failures - 1), 16 * MIN)
    decision = decide(history, last_end, policy(thresholds=limits), request())
    assert verdict(decision) == (P.WAIT, P.BACKOFF)
    assert decision.until == last_end + expected
    assert decide(history, last_end + expected, policy(thresholds=limits),
                  request()) == P.allow()
    # a success ends the streak: no backoff after it
    ok = [*history, attempt("ok", last_end + timedelta(hours=1), "succeeded")]
    assert decide(ok, ok[-1].updated, policy(thresholds=limits), request()) == P.allow()


def test_the_breaker_opens_after_n_failures_and_only_an_operator_closes_it() -> None:
    limits = Thresholds(breaker_failures=3, attempts_per_failure=100)
    history: list[P.HistoryItem] = [
        attempt(f"a{i}", T0 + i * timedelta(hours=2), "failed") for i in range(3)]
    assert not P.breaker_open(history[:2], "qwen", limits)
    assert P.breaker_open(history, "qwen", limits)
    for later in (timedelta(hours=8), timedelta(days=30)):
        decision = decide(history, T0 + later, policy(thresholds=limits), request())
        assert verdict(decision) == (P.BLOCK, P.BREAKER_OPEN)
        assert decision.retryable
    # a reset from before the failures does not count
    early = [reset(T0 - MIN), *history]
    assert P.breaker_open(early, "qwen", limits)
    closed = [*history, reset(T0 + timedelta(hours=7))]
    assert not P.breaker_open(closed, "qwen", limits)
    assert decide(closed, T0 + timedelta(hours=7), policy(thresholds=limits),
                  request()) == P.allow()
    # a success in between breaks the streak: three failures, but not in a row
    broken = [*history[:2], attempt("ok", T0 + timedelta(hours=3), "succeeded"),
              attempt("a3", T0 + timedelta(hours=5), "failed")]
    assert not P.breaker_open(broken, "qwen", limits)
    assert [a.id for a in P.failure_streak(broken, "qwen")] == ["a3"]
    # another target's reset does not close this one
    other = OperatorEvent(P.BREAKER_RESET, "llama", T0 + timedelta(hours=7), "operator:ann", "")
    assert P.breaker_open([*history, other], "qwen", limits)


def test_the_lock_is_held_while_in_flight_and_released_at_the_end() -> None:
    a = attempt("a", T0, "running")
    steps = [(A.RESTARTING, "restart"), (A.VERIFYING, "started"),
             (A.VERIFY_FAILED, "no"), (A.ROLLING_BACK, "undo")]
    for step, why in [(None, ""), *steps]:
        if step is not None:
            a = transition(a, step, a.updated + MIN, "executor", why)
        decision = decide([a], a.updated, policy(), request())
        assert verdict(decision) == (P.BLOCK, P.LOCK) and decision.retryable
        assert "action a is" in decision.text
    a = transition(a, A.ROLLED_BACK, a.updated + MIN, "executor", "undone")
    a = transition(a, A.ESCALATED, a.updated, "policy", "a person decides")
    assert A.is_terminal(a)
    assert verdict(decide([a], a.updated, policy(), request())) == (P.WAIT, P.BACKOFF)
    # an action that has not started does not hold the lock; the asker is in the history
    pending = request(name="other").action
    assert decide([pending, request().action], T0, policy(), request()) == P.allow()


@pytest.mark.parametrize("outcome", ["running", "succeeded", "failed"])
def test_only_an_action_that_has_not_started_is_decided(outcome: str) -> None:
    started = attempt("new", T0, outcome)
    decision = decide([started], T0, policy(), Request(started, "stable", 0.95))
    assert verdict(decision) == (P.BLOCK, P.NOT_PENDING)
    assert f"is {started.state}" in decision.text


def test_no_health_judgement_during_the_grace_period() -> None:
    started = T0
    req = request(launch_started=started, running=True)
    decision = decide([], started + 5 * MIN, policy(), req)
    assert verdict(decision) == (P.WAIT, P.GRACE_PERIOD)
    assert decision.until == started + 10 * MIN
    assert decide([], started + 10 * MIN, policy(), req) == P.allow()
    # a crash is not a health judgement: no grace for a launch that ended
    crashed = request(launch_started=started, running=False)
    assert decide([], started + MIN, policy(), crashed) == P.allow()


def test_of_several_waits_the_latest_wins() -> None:
    history = [attempt("a", T0, "failed", source="x")]
    req = request(launch_started=T0 + 4 * MIN, running=True)
    decision = decide(history, T0 + 4 * MIN, policy(max_per_hour=1), req)
    assert verdict(decision) == (P.WAIT, P.MAX_PER_HOUR)
    assert decision.until == T0 + 60 * MIN


def test_ask_is_asked_before_waiting_and_blocks_come_before_asking() -> None:
    history = [attempt("a", T0, "running")]
    assert verdict(decide(history, T0, policy("ask"), request(approved_by=None))) == (
        P.NEEDS_APPROVAL, P.APPROVAL)
    failed = [attempt("a", T0, "failed", config="cfg-new")]
    assert verdict(decide(failed, T0, policy("ask"), request(approved_by=None))) == (
        P.BLOCK, P.FAILED_CONFIG)


def _random_history(rng: random.Random) -> list[P.HistoryItem]:
    history: list[P.HistoryItem] = []
    for i in range(rng.randint(0, 8)):
        start = T0 + timedelta(minutes=rng.randint(0, 600))
        history.append(attempt(f"h{i}", start, rng.choice(["running", "succeeded", "failed"]),
                               config=rng.choice(["cfg-new", "cfg-a", "cfg-b", ""]),
                               source=rng.choice(["cfg0", "cfg1"]),
                               target=rng.choice(["qwen", "qwen", "llama"])))
    if rng.random() < 0.3:
        history.append(reset(T0 + timedelta(minutes=rng.randint(0, 600))))
    return history


@pytest.mark.parametrize("seed", range(200))
def test_random_histories_obey_every_guardrail(seed: int) -> None:
    rng = random.Random(seed)
    history = _random_history(rng)
    now = T0 + timedelta(minutes=rng.randint(0, 900))
    limits = Thresholds(breaker_failures=3, attempts_per_failure=2)
    pol = policy(max_per_hour=2, thresholds=limits)
    req = request()
    decision = decide(history, now, pol, req)
    shuffled = list(history)
    rng.shuffle(shuffled)
    assert decide(shuffled, now, pol, req) == decision  # order does not matter
    mine = P.actions_of(history, "qwen")
    if decision.verdict == P.ALLOW:
        assert not any(A.in_flight(a) for a in mine)
        assert not any(A.failed(a) and a.config_hash == "cfg-new" for a in mine)
        assert sum(A.attempted(a) and a.from_config == "cfg0" for a in mine) < 2
        assert sum(1 for a in mine if (t := a.entered(A.APPLYING)) is not None
                   and now - timedelta(hours=1) < t <= now) < 2
        assert not P.breaker_open(history, "qwen", limits)
    if decision.verdict == P.WAIT:
        assert decision.until is not None and decision.until > now
        assert decide(history, decision.until, pol, req).until != decision.until


@pytest.mark.parametrize(("current", "reason"), [
    (None, P.NOT_CURRENT),
    (CurrentLaunch("l2", "cfg-other", FAILED, frozenset({"fp"})), P.CONFIG_CHANGED),
    (CurrentLaunch("l2", "cfg0", SERVING, frozenset({"fp"})), P.NOT_CURRENT),
    (CurrentLaunch("l2", "cfg0", FAILED, frozenset({"fp-other"})), P.NOT_CURRENT),
])
def test_the_failure_is_rechecked_before_applying(current: CurrentLaunch | None,
                                                 reason: str) -> None:
    decision = recheck(request().action, current)
    assert verdict(decision) == (P.BLOCK, reason) and decision.text


def test_a_launch_its_manager_restarted_from_the_same_configuration_passes() -> None:
    """Restart=on-failure started the unit again before the plan was ready: the new launch
    has shown nothing yet and will meet the same failure, so the relaunch goes ahead; once
    it shows a different failure, or was stopped, it does not."""
    action = request().action
    assert recheck(action, CurrentLaunch("l2", "cfg0", STARTING, frozenset())) == P.allow()
    for current in (CurrentLaunch("l2", "cfg0", STARTING, frozenset({"fp-other"})),
                    CurrentLaunch("l2", "cfg0", STOPPED, frozenset())):
        assert verdict(recheck(action, current)) == (P.BLOCK, P.NOT_CURRENT)
    assert verdict(recheck(action, CurrentLaunch("l2", "cfg-new", STARTING, frozenset()))
                   ) == (P.BLOCK, P.CONFIG_CHANGED)


def test_a_failure_still_current_passes_the_recheck() -> None:
    for config in ("cfg0", None):
        current = CurrentLaunch("l1", config, FAILED, frozenset({"fp", "other"}))
        assert recheck(request().action, current) == P.allow()


def test_approval_expires_after_the_timeout() -> None:
    a = propose("x", "qwen", "p", "c", "f", SIG, "fp", T0, "diagnosis")
    assert not P.approval_expired(a, T0 + timedelta(days=9))
    a = transition(a, A.AWAITING_APPROVAL, T0, "policy", "ask")
    assert not P.approval_expired(a, T0 + timedelta(minutes=59))
    assert P.approval_expired(a, T0 + timedelta(hours=1))


def test_the_policy_comes_from_the_targets_configuration() -> None:
    targets = [TargetConfig("qwen", {"kind": "file"}, relaunch={"policy": "ask",
                                                                 "max_per_hour": 3}),
               TargetConfig("llama", {"kind": "file"}),
               TargetConfig("odd", {"kind": "file"}, relaunch={"policy": "yes"})]
    pol = P.policy_from_config(targets)
    assert pol.targets == {"qwen": TargetPolicy("ask", 3), "llama": TargetPolicy("off", 2),
                           "odd": TargetPolicy("off", 2)}


@pytest.mark.parametrize(("kind", "actor", "message"), [
    ("breaker_open", "operator:ann", "not one of breaker_reset"),
    (P.BREAKER_RESET, "policy", "needs an operator"),
    (P.BREAKER_RESET, "operator:", "needs an operator"),
])
def test_operator_events_are_checked(kind: str, actor: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OperatorEvent(kind, "qwen", T0, actor, "")
