"""The daemon's relaunches: when a launch of a configured target fails, the plan for it (read
back from the history, with its pre-flight), an action proposed, the policy's decision, the
operator's approval where the policy asks for it, and the action carried out through the
target's executor and verified on what the daemon itself reads from the target.

Every move is written to the history before its step (on the daemon's own connection, one
call at a time) and published as an `action` event; action_book.py keeps the open actions
and makes their moves. Decisions are the core's (`decide`, `recheck`); here are the waits,
the timers and the tasks, and carrying_out.py drives the executor on the action's thread.
Nothing read from a log reaches a command line, a path or SQL text: plans are built from the
snapshot and the diagnoses, and the executors fill their commands from plan fields only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

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
from logwatch.core.remedy.policy import (
    ALLOW,
    BREAKER_RESET,
    NEEDS_APPROVAL,
    WAIT,
    CurrentLaunch,
    OperatorEvent,
    RelaunchPolicy,
    Request,
    decide,
    policy_from_config,
)
from logwatch.core.settings.config import TargetConfig
from logwatch.daemon.action_book import ActionBook, Open, RelaunchError, Told
from logwatch.daemon.carrying_out import CarryingOut, ExecutorFor
from logwatch.daemon.launch_watch import LaunchWatch
from logwatch.daemon.relaunch_settings import Settings
from logwatch.store.actions import load_action, record_action, record_operator_event
from logwatch.store.db import Store


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
        self._sources = dict(sources or {})
        self.policy: RelaunchPolicy = policy_from_config(targets, settings.thresholds)
        self._status = signature_status
        self._now = now
        self.watch = LaunchWatch()
        self.book = ActionBook(in_store, told, settings.thresholds, now)
        self._carrying = CarryingOut(self.book, settings, self.watch, current,
                                     len(self.targets), now, executor, retake)
        self._proposing: set[str] = set()  # targets whose failure is being planned
        # a failure that came while another of the target's was planned or waited: proposed
        # when that one ends without being carried out (a relaunch carried out supersedes it)
        self._missed: dict[str, tuple[Mapping[str, Any], str | None, str | None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closed = False  # the daemon is stopping: no step starts any more

    # -- the book's, as the daemon, its status and metrics read them -------------------------
    @property
    def open(self) -> dict[str, Open]:
        return self.book.open

    @property
    def running(self) -> dict[str, str]:
        return self.book.running

    @property
    def breakers(self) -> dict[str, bool]:
        return self.book.breakers

    @property
    def by_state(self) -> dict[str, int]:
        return self.book.by_state

    # -- what the daemon calls --------------------------------------------------------------
    def target_of(self, source: str) -> TargetConfig | None:
        """The configured target a source belongs to (named so, or `TARGET:...`)."""
        return self.targets.get(self._sources.get(source) or source.split(":", 1)[0])

    def busy(self, target: str) -> bool:
        """Whether anything is still to come for `target`: a failure being planned, an
        action running, or one open that waits for an operator or for a time (one blocked
        with no time to try again, by the breaker say, waits for nothing that will come)."""
        return target in self._proposing or target in self.running or any(
            not (o.action.state == BLOCKED and o.timer is None)
            for o in self.book.open_of(target))

    def _occupied(self, target: str) -> bool:
        """A failure of `target` is being planned, or an action of it is open (a running
        one is open too): a new failure waits for it."""
        return target in self._proposing or bool(self.book.open_of(target))

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
        if self.closed:  # told by the daemon's last commit, as it stops
            self.book.note(f"launch {fields['id']} of {target.name} failed as the daemon "
                           "stopped: not proposed (the next daemon proposes a failure that "
                           "comes again)")
            return
        if self.watch.answered(str(fields["source"]), str(fields["id"])):
            self.book.note(f"launch {fields['id']} of {target.name} was a relaunch that did not "
                           "stand; its action already answered its failure")
            return
        if self._occupied(target.name):
            busy = self.book.open_of(target.name)
            self.book.note(f"launch {fields['id']} of {target.name} failed; "
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
            for action in [a for a in await self.book.history(name) if isinstance(a, Action)]:
                if action.state in PENDING:
                    to, why = EXPIRED, ("the daemon restarted before this was carried out; "
                                        "a new failure is proposed anew")
                elif action.state in IN_FLIGHT:
                    to, why = ESCALATED, ("the daemon stopped while carrying this out; a "
                                          "person must look at the target")
                    await self._carrying.release_hold(self.targets[name])
                else:
                    continue
                moved = transition(action, to, max(self._now(), action.updated), POLICY, why)
                await self.book.db(partial(record_action, action=moved))
                self.book.published(moved)

    async def approve(self, action_id: str, operator: str, reason: str = "") -> Action:
        """`logwatch approve ID`: an action awaiting approval goes on to the policy's other
        guardrails (and runs when they pass)."""
        states = (AWAITING_APPROVAL,)
        held = await self.book.waiting(action_id, states, "approved")
        if not await self.book.move(held, APPROVED, operator,
                                    reason or "approved by an operator", states):
            raise self.book.not_now(held.action, states, "approved")
        held.cancel_timer()
        approved = held.action
        self._spawn(self._decide(held))  # it may run for minutes: the answer is not held
        return approved

    async def reject(self, action_id: str, operator: str, reason: str = "") -> Action:
        """`logwatch reject ID`: an action not started yet is dropped."""
        states = (PROPOSED, AWAITING_APPROVAL, APPROVED, BLOCKED)
        held = await self.book.waiting(action_id, states, "rejected")
        if not await self.book.move(held, REJECTED, operator,
                                    reason or "rejected by an operator", states):
            raise self.book.not_now(held.action, states, "rejected")
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
        await self.book.db(lambda store: record_operator_event(store, event))
        await self.book.history(target)
        self.book.told.log.info("breaker_reset", target=target, actor=operator)
        self.book.note(f"breaker of {target} reset by "
                       f"{operator.removeprefix(OPERATOR_PREFIX)}")
        for held in [o for o in self.book.open_of(target) if o.action.state == BLOCKED]:
            held.cancel_timer()
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
                           "time": a.transitions[-1].time.isoformat()} for a in self.book.ended],
                "running": dict(self.running),
                "breakers": {t: self.breakers.get(t, False) for t in self.policy.targets}}

    async def close(self) -> None:
        """Stopping: timers cancelled, and no step starts after this (a failure the last
        commit tells of is noted, not proposed); an action being carried out is left to
        finish on its thread only as far as the process lives (its moves are in the
        history)."""
        self.closed = True
        for held in self.open.values():
            held.cancel_timer()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.book.threads.shutdown(wait=False, cancel_futures=True)
        self._carrying.stop()

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
        found = await self.book.db_query(launch_id)
        if found is None:
            return
        if found.plan is None:
            self.book.note(f"launch #{found.number} of {target.name} failed; no relaunch "
                           "fixes the causes found")
            return
        plan = found.plan
        root = next((d for d in found.diagnoses if d.signature and not d.latent), None)
        action_id = action_id_for(target.name, found.number, plan.digest)
        if await self.book.db(lambda store: load_action(store, action_id)) is not None:
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
        await self.book.db(lambda store: record_action(store, action, plan_json))
        self.open[action_id] = held
        self.book.published(action)
        if not plan.startable:
            reasons = "; ".join(plan.refused) or "a precondition does not hold"
            await self.book.move(held, REJECTED, POLICY, "the plan is not startable: "
                                 f"{reasons} (`logwatch plan` shows it)")
            self._close(held)
            return
        await self._decide(held)

    async def _decide(self, held: Open) -> None:
        """The policy's answer for an action not started yet, acted on."""
        target = held.action.target
        history = await self.book.history(target)
        now = self._now()
        state, mode = held.action.state, self.policy.targets[target].mode
        decision = decide(history, now, self.policy, Request(
            held.action, held.signature_status, held.confidence))
        was = (state,)  # each move below is made only from the state decided on
        if decision.verdict == ALLOW:
            if state in (PROPOSED, AWAITING_APPROVAL) and not await self.book.move(
                    held, APPROVED, POLICY, "policy auto: every guardrail passed", was):
                return
            await self._run(held)
        elif decision.verdict == NEEDS_APPROVAL:
            if state == PROPOSED and await self.book.move(held, AWAITING_APPROVAL, POLICY,
                                                          decision.text, was):
                self._expire_at(held, now + self.settings.thresholds.approval_timeout)
        elif decision.verdict == WAIT or decision.retryable:
            if state == PROPOSED and mode == "ask":
                if await self.book.move(held, AWAITING_APPROVAL, POLICY,
                                        f"{decision.text}; approval is asked for meanwhile",
                                        was):
                    self._expire_at(held, now + self.settings.thresholds.approval_timeout)
                return
            if state == PROPOSED:
                if not await self.book.move(held, APPROVED, POLICY, "policy auto", was):
                    return
                was = (APPROVED,)
            if state != BLOCKED and not await self.book.move(held, BLOCKED, POLICY,
                                                             decision.text, was):
                return
            if decision.verdict == WAIT and decision.until is not None:
                self._decide_at(held, decision.until)
        elif await self.book.move(held, REJECTED, POLICY,
                                  f"{decision.reason}: {decision.text}", was):
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
            await self._carrying.carry_out(held, target, self._close)
        finally:
            self.running.pop(target.name, None)
        await self._after(target.name)

    async def _after(self, target: str) -> None:
        """An action on `target` ended: its breaker is read again, and actions that waited
        for the lock are decided again."""
        await self.book.history(target)
        for held in [o for o in self.book.open_of(target)
                     if o.action.state == BLOCKED and o.timer is None]:
            await self._decide(held)

    # -- endings, timers, tasks -------------------------------------------------------------
    def _close(self, held: Open) -> None:
        """The action is over (or left to a person): no longer open, and a failure that
        came meanwhile proposed."""
        self.book.close(held)
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
            if held.action.id in self.open and await self.book.move(
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
        held.cancel_timer()
        delay = max(0.0, (when - self._now()).total_seconds())
        held.timer = asyncio.get_running_loop().call_later(
            delay, lambda: self._spawn(step()))

    def _spawn(self, step: Any) -> None:
        if self.closed:  # its threads are gone: it could only fail
            step.close()
            return
        task = asyncio.get_running_loop().create_task(self._guarded(step))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, step: Any) -> None:
        try:
            await step
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one action's trouble never stops the daemon
            self.book.told.log.exception("relaunch_failed")
            self.book.note(f"relaunch step failed: {type(exc).__name__}: {str(exc)[:300]}")

