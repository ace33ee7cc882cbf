"""The daemon's relaunches: when a launch of a configured target fails, the plan for it (read
back from the history, with its pre-flight), an action proposed, the policy's decision, the
operator's approval where the policy asks for it, and the action carried out through the
target's executor and verified on what the daemon itself reads from the target.

Every move is written to the history before its step (on the daemon's own connection, one
call at a time) and published as an `action` event. Decisions are the core's (`decide`,
`recheck`); here are the waits, the timers and the threads. Nothing read from a log reaches
a command line, a path or SQL text: plans are built from the snapshot and the diagnoses,
and the executors fill their commands from plan fields only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pwd
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

from logwatch.core.remedy.actions import (
    APPLYING,
    APPROVED,
    AWAITING_APPROVAL,
    BLOCKED,
    ESCALATED,
    EXPIRED,
    IN_FLIGHT,
    OPERATOR_PREFIX,
    PENDING,
    POLICY,
    PROPOSED,
    REJECTED,
    Action,
    action_id_for,
    propose,
    transition,
)
from logwatch.core.remedy.plan import Launch, Plan
from logwatch.core.remedy.policy import (
    ALLOW,
    BREAKER_RESET,
    NEEDS_APPROVAL,
    WAIT,
    CurrentLaunch,
    HistoryItem,
    OperatorEvent,
    RelaunchPolicy,
    Request,
    Thresholds,
    breaker_open,
    decide,
    policy_from_config,
    recheck,
)
from logwatch.core.remedy.verify import Verdict
from logwatch.core.settings.config import TargetConfig
from logwatch.core.snapshot.argv import ArgvError, parse_launch
from logwatch.daemon.launch_watch import LaunchWatch
from logwatch.relaunch.executors import executor_for, unit_of
from logwatch.relaunch.from_history import FailedLaunch, failed_launch_in
from logwatch.relaunch.runner import carry_out
from logwatch.relaunch.verify import verify_launch
from logwatch.store.actions import (
    load_action,
    load_history,
    record_action,
    record_operator_event,
)
from logwatch.store.db import Store

T = TypeVar("T")
ENDED_SHOWN = 5  # actions that ended, kept for `status` (the history has them all)


class Relaunching(Protocol):
    """An executor as the daemon's relaunch uses it (relaunch/executors.py, run_child.py)."""

    def start(self, plan: Plan, overlay_dir: str | None) -> Launch: ...

    def roll_back(self) -> None: ...

    def done(self) -> None: ...

    def alive(self) -> bool | None: ...


ExecutorFor = Callable[[TargetConfig, str, Launch | None], Relaunching | None]


class Told(Protocol):
    """What the relaunches tell the rest of the daemon."""

    events: list[str]
    log: Any

    def publish(self, kind: str, **fields: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class Settings:
    """`[relaunch]` of the configuration."""

    state_dir: Path
    dropin: str = "persistent"
    start_seconds: float = 900.0
    soak_seconds: float = 60.0
    thresholds: Thresholds = field(default_factory=Thresholds)
    dry_run: bool = False  # approved actions are dropped (rejected) before any change


@dataclass
class Open:
    """An action not finished yet, with what deciding and running it need."""

    action: Action
    plan: Plan
    found: FailedLaunch
    source: str
    signature_status: str
    confidence: float
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)
    # held while a move is worked out and written: a move checks the state it starts from
    # under it, so two requests (or a request and a timer) never both move from one state
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)


class RelaunchError(Exception):
    """An operator's request that cannot be done; the message says why."""


def operator_name(uid: int | None) -> str:
    """`operator:<user>` for the peer of a control connection (the kernel's word for who
    it is, not the client's)."""
    if uid is None:
        return OPERATOR_PREFIX + "unknown"
    try:
        return OPERATOR_PREFIX + pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"{OPERATOR_PREFIX}uid{uid}"


class Relaunches:
    def __init__(self, targets: Sequence[TargetConfig], settings: Settings,
                 in_store: Callable[[Callable[[Store], Any]], Any], told: Told,
                 current: Callable[[str], CurrentLaunch | None],
                 signature_status: Callable[[str], str],
                 now: Callable[[], datetime] = datetime.now,
                 executor: ExecutorFor | None = None,
                 sources: Mapping[str, str] | None = None,
                 retake: Callable[[], None] | None = None) -> None:
        """`in_store`: runs a function with the daemon's store, holding its lock.
        `current`: the launch a source runs now, as the daemon knows it. `signature_status`:
        a signature's status in the library loaded now. `executor`: how a target is
        relaunched (default: its unit or its site command). `sources`: source name ->
        target, for sources not named `TARGET:...`. `retake`: the targets' snapshots taken
        again now (called right after a restart, on the action's thread)."""
        self.targets = {t.name: t for t in targets}
        self.settings = settings
        self._executor_for: ExecutorFor = executor or (
            lambda target, action, base: executor_for(target, action, base, settings.dropin))
        self._sources = dict(sources or {})
        self._retake = retake
        self.policy: RelaunchPolicy = policy_from_config(targets, settings.thresholds)
        self._in_store = in_store
        self._told = told
        self._current = current
        self._status = signature_status
        self._now = now
        self.watch = LaunchWatch()
        self.open: dict[str, Open] = {}  # action id -> not finished yet
        self.running: dict[str, str] = {}  # target -> action id being carried out
        self.breakers: dict[str, bool] = {}  # target -> open, as last read
        self.by_state: dict[str, int] = {}  # actions that reached each state since start
        self.ended: deque[Action] = deque(maxlen=ENDED_SHOWN)  # the latest to end, newest last
        # planning and the history's reads and writes; carrying actions out (minutes each,
        # one per target at most)
        self._threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="logwatch-plan")
        self._actions = ThreadPoolExecutor(max_workers=max(1, len(self.targets)),
                                           thread_name_prefix="logwatch-act")
        self._proposing: set[str] = set()  # targets whose failure is being planned
        # a failure that came while another of the target's was planned or waited: proposed
        # when that one ends without being carried out (a relaunch carried out supersedes it)
        self._missed: dict[str, tuple[Mapping[str, Any], str | None, str | None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- what the daemon calls --------------------------------------------------------------
    def target_of(self, source: str) -> TargetConfig | None:
        """The configured target a source belongs to (named so, or `TARGET:...`)."""
        return self.targets.get(self._sources.get(source) or source.split(":", 1)[0])

    def busy(self, target: str) -> bool:
        """Whether anything is still to come for `target`: a failure being planned, an
        action running, or one open that waits for an operator or for a time (one blocked
        with no time to try again, by the breaker say, waits for nothing that will come)."""
        return target in self._proposing or target in self.running or any(
            not (o.action.state == BLOCKED and o.timer is None) for o in self._open_of(target))

    def _open_of(self, target: str) -> list[Open]:
        return [o for o in self.open.values() if o.action.target == target]

    def _occupied(self, target: str) -> bool:
        """A failure of `target` is being planned, or an action of it is open (a running
        one is open too): a new failure waits for it."""
        return target in self._proposing or bool(self._open_of(target))

    def launch_failed(self, fields: Mapping[str, Any], fingerprint: str | None,
                      config_hash: str | None) -> None:
        """A launch failed (event loop): propose its relaunch when the target's policy may
        act and no action of the target is open already (that one covers it).
        `fingerprint`: its root incident's problem; `config_hash`: the target's snapshot in
        force (what the recheck compares, and what attempts are counted per)."""
        target = self.target_of(str(fields["source"]))
        if target is None or self.policy.targets.get(target.name) is None \
                or self.policy.targets[target.name].mode == "off":
            return
        if self._occupied(target.name):
            busy = self._open_of(target.name)
            self._note(f"launch {fields['id']} of {target.name} failed; "
                       + (f"action {busy[0].action.id} is still open for it" if busy
                          else "its last failure is being planned"))
            if target.name not in self.running:
                self._missed[target.name] = (fields, fingerprint, config_hash)
            return
        self._proposing.add(target.name)
        self._spawn(self._propose(str(fields["id"]), str(fields["source"]), target,
                                  fingerprint or "", config_hash))

    async def recover(self) -> None:
        """At start: actions an earlier daemon left unfinished. One not started is expired
        (its failure is proposed anew if it happens again); one being carried out is
        escalated (nobody knows how far it got), and a unit's restart hold is taken away so
        that its own Restart= is back. Each target's breaker is read."""
        for name in self.policy.targets:
            for action in [a for a in await self._history(name) if isinstance(a, Action)]:
                if action.state in PENDING:
                    to, why = EXPIRED, ("the daemon restarted before this was carried out; "
                                        "a new failure is proposed anew")
                elif action.state in IN_FLIGHT:
                    to, why = ESCALATED, ("the daemon stopped while carrying this out; a "
                                          "person must look at the target")
                    await self._release_hold(name)
                else:
                    continue
                moved = transition(action, to, max(self._now(), action.updated), POLICY, why)
                await self._db(partial(record_action, action=moved))
                self._published(moved)

    async def _release_hold(self, target: str) -> None:
        unit = unit_of(self.targets[target], self.settings.dropin)
        if unit is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(self._threads,
                                                             unit.release_restarts)
        except Exception as exc:  # told, and the escalation stands
            self._note(f"could not give {unit.unit} its own Restart= back: {exc}")

    async def approve(self, action_id: str, operator: str, reason: str = "") -> Action:
        """`logwatch approve ID`: an action awaiting approval goes on to the policy's other
        guardrails (and runs when they pass)."""
        states = (AWAITING_APPROVAL,)
        held = await self._waiting(action_id, states, "approved")
        if not await self._move(held, APPROVED, operator, reason or "approved by an operator",
                                states):
            raise self._not_now(held.action, states, "approved")
        self._cancel_timer(held)
        approved = held.action
        self._spawn(self._decide(held))  # it may run for minutes: the answer is not held
        return approved

    async def reject(self, action_id: str, operator: str, reason: str = "") -> Action:
        """`logwatch reject ID`: an action not started yet is dropped."""
        states = (PROPOSED, AWAITING_APPROVAL, APPROVED, BLOCKED)
        held = await self._waiting(action_id, states, "rejected")
        if not await self._move(held, REJECTED, operator, reason or "rejected by an operator",
                                states):
            raise self._not_now(held.action, states, "rejected")
        self._close(held)
        return held.action

    async def reset_breaker(self, target: str, operator: str, reason: str = "") -> bool:
        """`logwatch breaker reset TARGET`: the target's failed streak no longer counts;
        its blocked actions are decided again. Whether the breaker was open."""
        if target not in self.targets:
            raise RelaunchError(f"{target!r} is not a configured target")
        event = OperatorEvent(BREAKER_RESET, target, self._now(), operator,
                              reason or "reset by an operator")
        was = self.breakers.get(target, False)
        await self._db(lambda store: record_operator_event(store, event))
        await self._history(target)
        self._told.log.info("breaker_reset", target=target, actor=operator)
        self._note(f"breaker of {target} reset by {operator.removeprefix(OPERATOR_PREFIX)}")
        for held in [o for o in self._open_of(target) if o.action.state == BLOCKED]:
            self._cancel_timer(held)
            self._spawn(self._decide(held))
        return was

    def status(self) -> dict[str, Any]:
        """Open and running actions, and each target's breaker (status, metrics)."""
        return {"actions": [{"id": o.action.id, "target": o.action.target,
                             "state": o.action.state,
                             "reason": o.action.transitions[-1].reason}
                            for o in self.open.values()],
                "ended": [{"id": a.id, "target": a.target, "state": a.state,
                           "reason": a.transitions[-1].reason,
                           "time": a.transitions[-1].time.isoformat()} for a in self.ended],
                "running": dict(self.running),
                "breakers": {t: self.breakers.get(t, False) for t in self.policy.targets}}

    async def close(self) -> None:
        """Stopping: timers cancelled; an action being carried out is left to finish on its
        thread only as far as the process lives (its moves are in the history)."""
        for held in self.open.values():
            self._cancel_timer(held)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._threads.shutdown(wait=False, cancel_futures=True)
        self._actions.shutdown(wait=False, cancel_futures=True)

    # -- the steps --------------------------------------------------------------------------
    async def _propose(self, launch_id: str, source: str, target: TargetConfig,
                       fingerprint: str, config_hash: str | None) -> None:
        try:
            await self._plan_and_propose(launch_id, source, target, fingerprint, config_hash)
        finally:
            self._proposing.discard(target.name)
            self._missed_now(target.name)

    async def _plan_and_propose(self, launch_id: str, source: str, target: TargetConfig,
                                fingerprint: str, config_hash: str | None) -> None:
        found = await self._db_query(launch_id)
        if found is None:
            return
        if found.plan is None:
            self._note(f"launch #{found.number} of {target.name} failed; no relaunch fixes "
                       "the causes found")
            return
        plan = found.plan
        root = next((d for d in found.diagnoses if d.signature and not d.latent), None)
        action_id = action_id_for(target.name, found.number, plan.digest)
        if await self._db(lambda store: load_action(store, action_id)) is not None:
            return  # proposed before (the daemon read this failure again after a restart)
        why = root.title if root is not None else "no signature recognised its cause"
        action = propose(action_id, target.name, plan.digest, plan.digest,
                         config_hash or found.snapshot_hash or found.snapshot.content_hash(),
                         root.signature if root is not None and root.signature else "",
                         fingerprint, self._now(),
                         f"launch #{found.number} failed ({why}); the plan "
                         + ("passed pre-flight" if plan.startable else "is not startable"))
        held = Open(action, replace(plan, target=target.name), found, source,
                    self._status(action.signature) if action.signature else "unknown",
                    root.confidence if root is not None else 0.0)
        plan_json = json.dumps(held.plan.to_dict(), sort_keys=True)
        await self._db(lambda store: record_action(store, action, plan_json))
        self.open[action_id] = held
        self._published(action)
        if not plan.startable:
            reasons = "; ".join(plan.refused) or "a precondition does not hold"
            await self._move(held, REJECTED, POLICY, f"the plan is not startable: {reasons} "
                             "(`logwatch plan` shows it)")
            self._close(held)
            return
        await self._decide(held)

    async def _decide(self, held: Open) -> None:
        """The policy's answer for an action not started yet, acted on."""
        target = held.action.target
        history = await self._history(target)
        now = self._now()
        state, mode = held.action.state, self.policy.targets[target].mode
        decision = decide(history, now, self.policy, Request(
            held.action, held.signature_status, held.confidence))
        was = (state,)  # each move below is made only from the state decided on
        if decision.verdict == ALLOW:
            if state in (PROPOSED, AWAITING_APPROVAL) and not await self._move(
                    held, APPROVED, POLICY, "policy auto: every guardrail passed", was):
                return
            await self._run(held)
        elif decision.verdict == NEEDS_APPROVAL:
            if state == PROPOSED and await self._move(held, AWAITING_APPROVAL, POLICY,
                                                      decision.text, was):
                self._expire_at(held, now + self.settings.thresholds.approval_timeout)
        elif decision.verdict == WAIT or decision.retryable:
            if state == PROPOSED and mode == "ask":
                if await self._move(held, AWAITING_APPROVAL, POLICY,
                                    f"{decision.text}; approval is asked for meanwhile", was):
                    self._expire_at(held, now + self.settings.thresholds.approval_timeout)
                return
            if state == PROPOSED:
                if not await self._move(held, APPROVED, POLICY, "policy auto", was):
                    return
                was = (APPROVED,)
            if state != BLOCKED and not await self._move(held, BLOCKED, POLICY, decision.text,
                                                         was):
                return
            if decision.verdict == WAIT and decision.until is not None:
                self._decide_at(held, decision.until)
        elif await self._move(held, REJECTED, POLICY, f"{decision.reason}: {decision.text}",
                              was):
            self._close(held)

    async def _run(self, held: Open) -> None:
        """Carry the approved action out on a thread, after the failure is checked again.
        The target is claimed first: an action still approved or blocked, and no other
        action of the target running (a reject from now on is refused)."""
        target = self.targets[held.action.target]
        async with held.lock:
            if held.action.state not in (APPROVED, BLOCKED) or held.action.id not in self.open \
                    or target.name in self.running:
                return
            self.running[target.name] = held.action.id
        try:
            await self._carry_out(held, target)
        finally:
            self.running.pop(target.name, None)
        await self._after(target.name)

    async def _carry_out(self, held: Open, target: TargetConfig) -> None:
        action = held.action
        if self.settings.dry_run:
            await self._move(held, REJECTED, POLICY, "dry run: approved, not applied "
                             f"(`logwatch plan --launch {held.found.id}` shows the plan)")
            self._close(held)
            return
        again = recheck(action, self._current(held.source))
        if again.verdict != ALLOW:
            await self._move(held, EXPIRED, POLICY, f"{again.reason}: {again.text}")
            self._close(held)
            return
        base = _recorded_launch(held.found)
        executor = self._executor_for(target, action.id, base)
        if executor is None:
            await self._move(held, ESCALATED, POLICY, f"target {target.name} has no way to "
                             "relaunch (no launch.unit, no relaunch.command)")
            self._close(held)
            return
        self._cancel_timer(held)
        loop = asyncio.get_running_loop()
        source, settings = held.source, self.settings

        def started(plan: Plan, overlay: str | None) -> Launch:
            launch = executor.start(plan, overlay)
            self.watch.begin(source)  # the launches read from now on are the relaunch's
            if self._retake is not None:  # and are linked to what the relaunch runs
                self._retake()
            return launch

        def verify(launch: Launch) -> Verdict:
            return verify_launch(launch.spec, lambda: self.watch.seen(source),
                                 executor.alive, settings.start_seconds,
                                 settings.soak_seconds)

        def moved(action: Action) -> None:
            loop.call_soon_threadsafe(self._moved, held, action)

        step = _Started(started, executor.roll_back, executor.done)
        try:
            await loop.run_in_executor(self._actions, lambda: carry_out(
                self._record, action, held.plan, step, verify, settings.state_dir, moved,
                self._now))
        except Exception as exc:  # the history unwritable, the manager gone: a person looks
            self._told.log.error("relaunch_stopped", action=action.id, error=str(exc)[:500])
            self._note(f"action {action.id} stopped: {exc}; the target is left as it is")
            with contextlib.suppress(Exception):
                await loop.run_in_executor(self._actions, executor.done)
            with contextlib.suppress(Exception):  # not left holding the target's lock
                await self._move(held, ESCALATED, POLICY, f"stopped: {str(exc)[:300]}; the "
                                 "target is left as it is")
        finally:
            self.watch.end(source)
            self._close(held)

    async def _after(self, target: str) -> None:
        """An action on `target` ended: its breaker is read again, and actions that waited
        for the lock are decided again."""
        await self._history(target)
        for held in [o for o in self._open_of(target)
                     if o.action.state == BLOCKED and o.timer is None]:
            await self._decide(held)

    # -- moves, timers, the history ---------------------------------------------------------
    async def _move(self, held: Open, to: str, actor: str, reason: str,
                    only_from: tuple[str, ...] | None = None) -> bool:
        """Move the action and write it; with `only_from`, only when it is in one of those
        states and not being carried out (checked under its lock): whether it moved."""
        async with held.lock:
            if only_from is not None and (held.action.state not in only_from
                                          or held.action.id in self.running.values()):
                return False
            moved = transition(held.action, to, max(self._now(), held.action.updated), actor,
                               reason)
            await self._db(lambda store: record_action(store, moved))
            self._moved(held, moved)
            return True

    def _moved(self, held: Open, action: Action) -> None:
        held.action = action
        self._published(action)

    def _published(self, action: Action) -> None:
        self.by_state[action.state] = self.by_state.get(action.state, 0) + 1
        last = action.transitions[-1]
        self._told.log.info("action", id=action.id, target=action.target, state=action.state,
                            actor=last.actor, reason=last.reason[:300])
        self._told.publish("action", id=action.id, target=action.target, state=action.state,
                           actor=last.actor, reason=last.reason, plan=action.plan_hash,
                           signature=action.signature, time=last.time.isoformat())

    def _record(self, action: Action) -> None:
        """carry_out's recorder (on the action's thread)."""
        self._in_store(lambda store: record_action(store, action))

    def _close(self, held: Open) -> None:
        """The action is over (or left to a person): no longer open."""
        self._cancel_timer(held)
        if self.open.pop(held.action.id, None) is not None:
            self.ended.append(held.action)
        if held.action.entered(APPLYING) is not None:
            self._missed.pop(held.action.target, None)  # the relaunch superseded it
        else:
            self._missed_now(held.action.target)

    def _missed_now(self, target: str) -> None:
        """The newest failure that came while the target was busy, proposed now that it is
        not (planned, open or running)."""
        if self._occupied(target):
            return
        missed = self._missed.pop(target, None)
        if missed is not None:
            self.launch_failed(*missed)

    def _expire_at(self, held: Open, when: datetime) -> None:
        async def expire() -> None:
            held.timer = None
            seconds = self.settings.thresholds.approval_timeout.total_seconds()
            if held.action.id in self.open and await self._move(
                    held, EXPIRED, POLICY, f"no approval within {seconds:g} s",
                    (AWAITING_APPROVAL,)):
                self._close(held)
        self._at(held, when, expire)

    def _decide_at(self, held: Open, when: datetime) -> None:
        async def again() -> None:
            held.timer = None
            if held.action.id in self.open and held.action.state == BLOCKED:
                await self._decide(held)
        self._at(held, when, again)

    def _at(self, held: Open, when: datetime, step: Callable[[], Any]) -> None:
        self._cancel_timer(held)
        delay = max(0.0, (when - self._now()).total_seconds())
        held.timer = asyncio.get_running_loop().call_later(
            delay, lambda: self._spawn(step()))

    @staticmethod
    def _cancel_timer(held: Open) -> None:
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None

    async def _waiting(self, action_id: str, states: tuple[str, ...], verb: str) -> Open:
        """The open action (whether its state allows the move is `_move`'s to say); for one
        not open, why not."""
        held = self.open.get(action_id)
        if held is not None:
            return held
        stored = await self._db(lambda store: load_action(store, action_id))
        if stored is None:
            raise RelaunchError(f"no action {action_id!r}")
        raise self._not_now(stored, states, verb)

    def _not_now(self, action: Action, states: tuple[str, ...], verb: str) -> RelaunchError:
        now = "being carried out" if action.id in self.running.values() else action.state
        return RelaunchError(f"action {action.id} is {now}: only an action "
                             f"{' or '.join(states).replace('_', ' ')} can be {verb}")

    def _spawn(self, step: Any) -> None:
        task = asyncio.get_running_loop().create_task(self._guarded(step))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, step: Any) -> None:
        try:
            await step
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one action's trouble never stops the daemon
            self._told.log.exception("relaunch_failed")
            self._note(f"relaunch step failed: {type(exc).__name__}: {str(exc)[:300]}")

    async def _history(self, target: str) -> list[HistoryItem]:
        """The target's actions and operator events, its breaker read from them."""
        history = await self._db(partial(load_history, target=target))
        self.breakers[target] = breaker_open(history, target, self.settings.thresholds)
        return history

    async def _db(self, fn: Callable[[Store], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._threads, lambda: self._in_store(fn))

    async def _db_query(self, launch_id: str) -> FailedLaunch | None:
        def query(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
            return list(self._in_store(lambda store: store.query(sql, list(params))))
        return await asyncio.get_running_loop().run_in_executor(
            self._threads, lambda: failed_launch_in(query, launch_id))

    def _note(self, text: str) -> None:
        self._told.events.append(text)
        self._told.log.info("relaunch_note", note=text)


@dataclass(frozen=True, slots=True)
class _Started:
    """The executor as carry_out sees it, the watch begun right after the restart."""

    start: Callable[[Plan, str | None], Launch]
    roll_back: Callable[[], None]
    done: Callable[[], None]


def _recorded_launch(found: FailedLaunch) -> Launch | None:
    """The failed launch as recorded (what a site's command edits; secrets masked)."""
    if not found.snapshot.argv:
        return None
    try:
        return Launch(parse_launch(list(found.snapshot.argv)), dict(found.snapshot.env))
    except ArgvError:
        return None


def settings_from_config(values: Mapping[str, Any], default_state: Path,
                         dry_run: bool = False) -> Settings:
    """`[relaunch]` values (config.Config.values) as Settings; `dry_run` (the command line's
    --dry-run) makes it a dry run whatever the file says."""
    state = values.get("relaunch.state_dir") or ""
    return Settings(Path(state) if state else default_state,
                    str(values.get("relaunch.dropin") or "persistent"),
                    float(values.get("relaunch.start_seconds") or 900.0),
                    float(values.get("relaunch.soak_seconds") or 60.0),
                    Thresholds(
                        approval_timeout=timedelta(
                            seconds=float(values.get("relaunch.approval_seconds") or 3600.0)),
                        breaker_failures=int(values.get("relaunch.breaker_failures") or 3),
                        backoff_base=timedelta(
                            seconds=float(values.get("relaunch.backoff_seconds") or 60.0))),
                    dry_run or bool(values.get("relaunch.dry_run")))
