"""The relaunch guardrails: may this action run now, later, only with approval, or never?

`decide(history, now, policy, request)` is pure: `history` is the target's past actions (with
their audited transitions) and operator events, as plain data, so every guardrail is tested
with literals and the daemon, the CLI and a replay from the database all get the same answer.
Blocks come first (nothing to wait for), then approval, then the lock, then the waits; of
several waits the latest is returned, so the runner sleeps once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from logwatch.core.launches.lifecycle import SERVING, STARTING, STOPPED
from logwatch.core.remedy.actions import (
    APPLYING,
    AWAITING_APPROVAL,
    Action,
    approved_by,
    attempted,
    failed,
    finished,
    in_flight,
    is_actor,
    is_pending,
    succeeded,
)
from logwatch.core.settings.config import RELAUNCH_POLICIES, TargetConfig

ALLOW, WAIT, BLOCK, NEEDS_APPROVAL = "allow", "wait", "block", "needs_approval"

# Reason codes (a contract for the CLI, the TUI and metrics: extend, never rename).
NO_TARGETS = "no_targets"  # no target is configured: an empty list never means "all"
UNKNOWN_TARGET = "unknown_target"
POLICY_OFF = "policy_off"
SIGNATURE_NOT_STABLE = "signature_not_stable"
LOW_CONFIDENCE = "low_confidence"
FAILED_CONFIG = "failed_config"  # the plan's configuration already failed: refused forever
BUDGET_EXHAUSTED = "budget_exhausted"
BREAKER_OPEN = "breaker_open"
LOCK = "lock"
GRACE_PERIOD = "grace_period"
MAX_PER_HOUR = "max_per_hour"
BACKOFF = "backoff"
APPROVAL = "approval"
NOT_CURRENT = "not_current"  # the failure is gone at execution time
CONFIG_CHANGED = "config_changed"
NOT_PENDING = "not_pending"  # asked about an action that has started or ended already
REASON_CODES = frozenset({
    NO_TARGETS, UNKNOWN_TARGET, POLICY_OFF, SIGNATURE_NOT_STABLE, LOW_CONFIDENCE, FAILED_CONFIG,
    BUDGET_EXHAUSTED, BREAKER_OPEN, LOCK, GRACE_PERIOD, MAX_PER_HOUR, BACKOFF, APPROVAL,
    NOT_CURRENT, CONFIG_CHANGED, NOT_PENDING})
# Blocks that lift by themselves or by an operator event, without a new plan: the runner
# keeps the action `blocked` on these and escalates or expires it on the others.
RETRYABLE_BLOCKS = frozenset({LOCK, BREAKER_OPEN})

BREAKER_RESET = "breaker_reset"
OPERATOR_EVENTS = (BREAKER_RESET,)
DEFAULT_MAX_PER_HOUR = 2


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The guardrails' numbers. Defaults are deliberately cautious: a relaunch reloads
    weights for minutes, so trying less often costs little and a loop costs a lot."""
    # a diagnosis must be strictly above this: diagnose gives 0.95 when the log or the
    # snapshot proves the path, 0.7 when it is inferred, 0.5 when it is a guess
    min_confidence: float = 0.8
    # attempts for one signature from one configuration in force, counted from `applying`
    attempts_per_failure: int = 2
    # the wait after the k-th failed attempt in a row: backoff_base * 2**(k-1), capped
    backoff_base: timedelta = timedelta(minutes=1)
    backoff_max: timedelta = timedelta(hours=1)
    # consecutive failed attempts on a target that open its breaker (an operator closes it)
    breaker_failures: int = 3
    # a launch still running is not judged unhealthy until it has had this long to load
    grace_period: timedelta = timedelta(minutes=10)
    # how long an action waits for `logwatch approve` before it expires
    approval_timeout: timedelta = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class TargetPolicy:
    """One target's `[targets.relaunch]`: `off` | `ask` | `auto`, and its hourly limit."""
    mode: str = "off"
    max_per_hour: int = DEFAULT_MAX_PER_HOUR


@dataclass(frozen=True, slots=True)
class RelaunchPolicy:
    """The configured targets by name (only those may be relaunched) and the thresholds."""
    targets: Mapping[str, TargetPolicy] = field(default_factory=dict)
    thresholds: Thresholds = Thresholds()


def policy_from_config(targets: Iterable[TargetConfig],
                       thresholds: Thresholds = Thresholds()) -> RelaunchPolicy:
    """The policy of the configured targets (config.py checked the values already; an
    unknown mode is read as `off`, never as permission)."""
    out: dict[str, TargetPolicy] = {}
    for target in targets:
        mode = target.relaunch.get("policy", "off")
        limit = target.relaunch.get("max_per_hour", DEFAULT_MAX_PER_HOUR)
        out[target.name] = TargetPolicy(mode if mode in RELAUNCH_POLICIES else "off",
                                        limit if isinstance(limit, int) else 0)
    return RelaunchPolicy(out, thresholds)


@dataclass(frozen=True, slots=True)
class OperatorEvent:
    """Something an operator did to a target outside an action: a breaker reset."""
    kind: str
    target: str
    time: datetime
    actor: str  # operator:<name>
    reason: str

    def __post_init__(self) -> None:
        if self.kind not in OPERATOR_EVENTS:
            raise ValueError(f"operator event {self.kind!r} is not one of "
                             f"{', '.join(OPERATOR_EVENTS)}")
        if not (is_actor(self.actor) and self.actor.startswith("operator:")):
            raise ValueError(f"an operator event needs an operator:<name> actor, "
                             f"not {self.actor!r}")


HistoryItem = Action | OperatorEvent


@dataclass(frozen=True, slots=True)
class Request:
    """The action asking to run and what the policy needs to know about its failure."""
    action: Action
    signature_status: str  # the signature's status in the library
    confidence: float  # the diagnosis's
    launch_started: datetime | None = None  # the failing launch's start, when known
    launch_running: bool = False  # its process still runs: a health judgement, not a crash


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: str  # allow | wait | block | needs_approval
    reason: str = ""  # a reason code above ("" for allow)
    text: str = ""  # for an operator
    until: datetime | None = None  # wait: not before this time

    @property
    def retryable(self) -> bool:
        return self.verdict != BLOCK or self.reason in RETRYABLE_BLOCKS


def allow() -> Decision:
    return Decision(ALLOW)


def block(reason: str, text: str) -> Decision:
    return Decision(BLOCK, reason, text)


def wait(until: datetime, reason: str, text: str) -> Decision:
    return Decision(WAIT, reason, text, until)


def decide(history: Sequence[HistoryItem], now: datetime, policy: RelaunchPolicy,
           request: Request) -> Decision:
    """Whether `request.action` may start now; `history` may or may not hold it."""
    action, limits = request.action, policy.thresholds
    if not is_pending(action):
        return block(NOT_PENDING, f"action {action.id} is {action.state}: only an action "
                     "that has not started is decided")
    if not policy.targets:
        return block(NO_TARGETS, "no target is configured; an empty target list never "
                                 "means all targets")
    target = policy.targets.get(action.target)
    if target is None:
        return block(UNKNOWN_TARGET, f"{action.target!r} is not a configured target")
    if target.mode not in ("ask", "auto"):
        return block(POLICY_OFF, f"relaunch policy of {action.target!r} is {target.mode}")
    if target.max_per_hour <= 0:
        return block(POLICY_OFF, f"max_per_hour of {action.target!r} is "
                     f"{target.max_per_hour}: no relaunch may start")
    if not action.signature:
        return block(SIGNATURE_NOT_STABLE, "no signature recognised the failure; only a "
                     "stable signature starts an action")
    if request.signature_status != "stable":
        return block(SIGNATURE_NOT_STABLE, f"signature {action.signature} is "
                     f"{request.signature_status}; only stable signatures start an action")
    if not request.confidence > limits.min_confidence:
        return block(LOW_CONFIDENCE, f"diagnosis confidence {request.confidence:.2f} is not "
                     f"above {limits.min_confidence:.2f}")
    past = [a for a in actions_of(history, action.target) if a.id != action.id]
    bad = next((a for a in past if failed(a) and a.config_hash == action.config_hash), None)
    if bad is not None:
        return block(FAILED_CONFIG, f"configuration {action.config_hash} already failed "
                     f"(action {bad.id}); logwatch never relaunches into it again (if what "
                     "failed it is gone, start it by hand: the decision stays a person's)")
    tries = [a for a in past if attempted(a) and a.signature == action.signature
             and a.from_config == action.from_config]
    if len(tries) >= limits.attempts_per_failure:
        return block(BUDGET_EXHAUSTED, f"{len(tries)} attempts already for {action.signature} "
                     f"from configuration {action.from_config}")
    streak = failure_streak(history, action.target)
    if len(streak) >= limits.breaker_failures:
        return block(BREAKER_OPEN, f"{len(streak)} failed actions in a row on "
                     f"{action.target!r}; an operator must reset the breaker")
    if target.mode == "ask" and not (approved_by(action) or "").startswith("operator:"):
        return Decision(NEEDS_APPROVAL, APPROVAL,
                        f"policy of {action.target!r} is ask: `logwatch approve {action.id}`")
    holder = next((a for a in past if in_flight(a)), None)
    if holder is not None:
        return block(LOCK, f"action {holder.id} is {holder.state} on {action.target!r}")
    waits = [w for w in (_grace(request, now, limits), _hourly(past, now, target),
                         _backoff(streak, now, limits)) if w is not None]
    return max(waits, key=lambda w: w.until or now) if waits else allow()


def actions_of(history: Iterable[HistoryItem], target: str) -> list[Action]:
    """The target's actions, oldest first (so a decision never depends on history's order)."""
    return sorted((a for a in history if isinstance(a, Action) and a.target == target),
                  key=lambda a: (a.created, a.id))


def failure_streak(history: Sequence[HistoryItem], target: str) -> list[Action]:
    """The target's failed attempts since its last success and its last breaker reset,
    newest first."""
    resets = [e.time for e in history if isinstance(e, OperatorEvent)
              and e.target == target and e.kind == BREAKER_RESET]
    since = max(resets, default=None)
    done = sorted((a for a in actions_of(history, target) if finished(a)),
                  key=lambda a: (a.entered(APPLYING) or a.created, a.id), reverse=True)
    streak: list[Action] = []
    for a in done:
        if succeeded(a) or (since is not None and (a.entered(APPLYING) or a.created) < since):
            break
        if failed(a):
            streak.append(a)
    return streak


def breaker_open(history: Sequence[HistoryItem], target: str,
                 thresholds: Thresholds = Thresholds()) -> bool:
    """For metrics and the TUI: the target's breaker state."""
    return len(failure_streak(history, target)) >= thresholds.breaker_failures


def _grace(request: Request, now: datetime, limits: Thresholds) -> Decision | None:
    if not request.launch_running or request.launch_started is None:
        return None
    end = request.launch_started + limits.grace_period
    return wait(end, GRACE_PERIOD, "the launch is still within its start-up grace "
                "period") if now < end else None


def _hourly(past: list[Action], now: datetime, target: TargetPolicy) -> Decision | None:
    starts = sorted(t for a in past if (t := a.entered(APPLYING)) is not None
                    and now - timedelta(hours=1) < t <= now)
    if len(starts) < target.max_per_hour:
        return None
    # the window falls below the limit when enough of its oldest attempts leave it
    until = starts[len(starts) - target.max_per_hour] + timedelta(hours=1)
    return wait(until, MAX_PER_HOUR, f"{len(starts)} attempts in the last hour "
                f"(max_per_hour = {target.max_per_hour})")


def _backoff(streak: list[Action], now: datetime, limits: Thresholds) -> Decision | None:
    if not streak:
        return None
    delay = min(limits.backoff_base * 2 ** (len(streak) - 1), limits.backoff_max)
    until = streak[0].updated + delay
    return wait(until, BACKOFF, f"{len(streak)} failed attempt(s) in a row: waiting "
                f"{delay} after the last") if now < until else None


@dataclass(frozen=True, slots=True)
class CurrentLaunch:
    """What the target runs now, as the daemon knows it right before applying."""
    launch_id: str
    config_hash: str | None
    outcome: str  # core.launches.lifecycle outcomes
    fingerprints: frozenset[str]  # its incidents' fingerprints


def recheck(action: Action, current: CurrentLaunch | None) -> Decision:
    """Called right before applying: is the failure still the current launch's? A plan made
    for a launch that someone has since restarted, fixed or reconfigured must not run."""
    if current is None:
        return block(NOT_CURRENT, f"no launch of {action.target!r} is known now")
    if current.config_hash is not None and current.config_hash != action.from_config:
        return block(CONFIG_CHANGED, f"the configuration in force is {current.config_hash}, "
                     f"not {action.from_config} the plan was made from")
    if current.outcome == SERVING:
        return block(NOT_CURRENT, f"launch {current.launch_id} is serving")
    if current.outcome == STOPPED:
        return block(NOT_CURRENT, f"launch {current.launch_id} was stopped")
    if current.outcome == STARTING and not current.fingerprints:
        # its manager started it again (Restart=) from the same configuration: it has shown
        # nothing yet and will meet the same failure; the relaunch replaces it
        return allow()
    if action.fingerprint not in current.fingerprints:
        return block(NOT_CURRENT, f"launch {current.launch_id} does not show the failure")
    return allow()


def approval_expired(action: Action, now: datetime, thresholds: Thresholds = Thresholds()
                     ) -> bool:
    """An action waiting for an operator longer than approval_timeout (the runner expires it)."""
    asked = action.entered(AWAITING_APPROVAL)
    return (action.state == AWAITING_APPROVAL and asked is not None
            and now >= asked + thresholds.approval_timeout)
