"""The daemon's book of relaunch actions: the ones not finished yet, each move made under the
action's lock, written to the history and published as an `action` event, and the history's
reads and writes on the daemon's own threads.

The book decides nothing: which move to make is the relaunches' (relaunches.py), after the
core's `decide` and `recheck`; the book makes it only from the states it is told, and says
why an operator's request cannot be done (`RelaunchError`).
"""

from __future__ import annotations

import asyncio
import pwd
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, Protocol, TypeVar

from logwatch.core.remedy.actions import OPERATOR_PREFIX, Action, transition
from logwatch.core.remedy.plan import Plan
from logwatch.core.remedy.policy import HistoryItem, Thresholds, breaker_open
from logwatch.core.remedy.said import move_line
from logwatch.relaunch.from_history import FailedLaunch, failed_launch_in
from logwatch.store.actions import load_action, load_history, record_action
from logwatch.store.db import Store

T = TypeVar("T")
ENDED_SHOWN = 5  # actions that ended, kept for `status` (the history has them all)


class Told(Protocol):
    """What the relaunches tell the rest of the daemon."""

    events: list[str]
    log: Any

    def publish(self, kind: str, **fields: Any) -> None: ...


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

    def cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


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


class ActionBook:
    def __init__(self, in_store: Callable[[Callable[[Store], Any]], Any], told: Told,
                 thresholds: Thresholds, now: Callable[[], datetime]) -> None:
        """`in_store`: runs a function with the daemon's store, holding its lock.
        `thresholds`: the policy's, for each target's breaker read from the history."""
        self._in_store = in_store
        self.told = told
        self._thresholds = thresholds
        self._now = now
        self.open: dict[str, Open] = {}  # action id -> not finished yet
        self.running: dict[str, str] = {}  # target -> action id being carried out
        self.breakers: dict[str, bool] = {}  # target -> open, as last read
        self.by_state: dict[str, int] = {}  # actions that reached each state since start
        self.ended: deque[Action] = deque(maxlen=ENDED_SHOWN)  # the latest to end, newest last
        # planning and the history's reads and writes
        self.threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="logwatch-plan")

    def open_of(self, target: str) -> list[Open]:
        return [o for o in self.open.values() if o.action.target == target]

    async def move(self, held: Open, to: str, actor: str, reason: str,
                   only_from: tuple[str, ...] | None = None) -> bool:
        """Move the action and write it; with `only_from`, only when it is in one of those
        states and not being carried out (checked under its lock): whether it moved."""
        async with held.lock:
            if only_from is not None and (held.action.state not in only_from
                                          or held.action.id in self.running.values()):
                return False
            moved = transition(held.action, to, max(self._now(), held.action.updated), actor,
                               reason)
            await self.db(lambda store: record_action(store, moved))
            self.moved(held, moved)
            return True

    def moved(self, held: Open, action: Action) -> None:
        held.action = action
        self.published(action)

    def published(self, action: Action) -> None:
        self.by_state[action.state] = self.by_state.get(action.state, 0) + 1
        last = action.transitions[-1]
        self.told.log.info("action", id=action.id, target=action.target, state=action.state,
                           actor=last.actor, reason=last.reason[:300], said=move_line(action))
        self.told.publish("action", id=action.id, target=action.target, state=action.state,
                          actor=last.actor, reason=last.reason, plan=action.plan_hash,
                          signature=action.signature, time=last.time.isoformat())

    def record(self, action: Action) -> None:
        """carry_out's recorder (on the action's thread)."""
        self._in_store(lambda store: record_action(store, action))

    def close(self, held: Open) -> None:
        """The action is over (or left to a person): no longer open."""
        held.cancel_timer()
        if self.open.pop(held.action.id, None) is not None:
            self.ended.append(held.action)

    async def waiting(self, action_id: str, states: tuple[str, ...], verb: str) -> Open:
        """The open action (whether its state allows the move is `move`'s to say); for one
        not open, why not."""
        held = self.open.get(action_id)
        if held is not None:
            return held
        stored = await self.db(lambda store: load_action(store, action_id))
        if stored is None:
            raise RelaunchError(f"no action {action_id!r}")
        raise self.not_now(stored, states, verb)

    def not_now(self, action: Action, states: tuple[str, ...], verb: str) -> RelaunchError:
        now = "being carried out" if action.id in self.running.values() else action.state
        return RelaunchError(f"action {action.id} is {now}: only an action "
                             f"{' or '.join(states).replace('_', ' ')} can be {verb}")

    async def history(self, target: str) -> list[HistoryItem]:
        """The target's actions and operator events, its breaker read from them."""
        history = await self.db(partial(load_history, target=target))
        self.breakers[target] = breaker_open(history, target, self._thresholds)
        return history

    async def db(self, fn: Callable[[Store], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self.threads, lambda: self._in_store(fn))

    async def db_query(self, launch_id: str) -> FailedLaunch | None:
        def query(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
            return list(self._in_store(lambda store: store.query(sql, list(params))))
        return await asyncio.get_running_loop().run_in_executor(
            self.threads, lambda: failed_launch_in(query, launch_id))

    def note(self, text: str) -> None:
        self.told.events.append(text)
        self.told.log.info("relaunch_note", note=text, said=text)
