"""Carrying an approved relaunch out from the daemon: the failure checked again, the target's
executor driven on the action's thread through relaunch/runner.py's `carry_out`, and the
relaunch verified on what the daemon itself reads from the target (launch_watch.py).

Each move is the action book's (written, then published on the event loop); which action is
carried out, and when, is the relaunches' to say. Executors fill their commands from plan
fields only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from logwatch.core.remedy.actions import (
    ESCALATED,
    EXPIRED,
    POLICY,
    REJECTED,
    RESTARTING,
    SUCCEEDED,
    Action,
)
from logwatch.core.remedy.plan import Launch, Plan
from logwatch.core.remedy.policy import ALLOW, CurrentLaunch, recheck
from logwatch.core.remedy.verify import Verdict
from logwatch.core.settings.config import TargetConfig
from logwatch.core.snapshot.argv import ArgvError, parse_launch
from logwatch.daemon.action_book import ActionBook, Open
from logwatch.daemon.launch_watch import LaunchWatch
from logwatch.daemon.relaunch_settings import Settings
from logwatch.relaunch.executors import executor_for, unit_of
from logwatch.relaunch.from_history import FailedLaunch
from logwatch.relaunch.runner import carry_out
from logwatch.relaunch.verify import verify_launch


class Relaunching(Protocol):
    """An executor as the daemon's relaunch uses it (relaunch/executors.py, run_child.py)."""

    def start(self, plan: Plan, overlay_dir: str | None) -> Launch: ...

    def roll_back(self) -> None: ...

    def done(self) -> None: ...

    def alive(self) -> bool | None: ...


ExecutorFor = Callable[[TargetConfig, str, Launch | None], Relaunching | None]


class CarryingOut:
    def __init__(self, book: ActionBook, settings: Settings, watch: LaunchWatch,
                 current: Callable[[str], CurrentLaunch | None], target_count: int,
                 now: Callable[[], datetime], executor: ExecutorFor | None = None,
                 retake: Callable[[], None] | None = None) -> None:
        """`current`: the launch a source runs now, as the daemon knows it. `target_count`:
        how many targets (one action carried out per target at most). `executor`: how a
        target is relaunched (default: its unit or its site command). `retake`: the targets'
        snapshots taken again now (called right after a restart, on the action's thread)."""
        self._book = book
        self.settings = settings
        self.watch = watch
        self._current = current
        self._now = now
        self._executor_for: ExecutorFor = executor or (
            lambda target, action, base: executor_for(target, action, base, settings.dropin))
        self._retake = retake
        # carrying actions out (minutes each, one per target at most)
        self._actions = ThreadPoolExecutor(max_workers=max(1, target_count),
                                           thread_name_prefix="logwatch-act")

    async def carry_out(self, held: Open, target: TargetConfig,
                        close: Callable[[Open], None]) -> None:
        """Carry the claimed action out; `close`: the relaunches' own, for every way it
        ends."""
        action = held.action
        if self.settings.dry_run:
            await self._book.move(held, REJECTED, POLICY, "dry run: approved, not applied "
                                  f"(`logwatch plan --launch {held.found.id}` shows the plan)")
            close(held)
            return
        again = recheck(action, self._current(held.source))
        if again.verdict != ALLOW:
            await self._book.move(held, EXPIRED, POLICY, f"{again.reason}: {again.text}")
            close(held)
            return
        base = _recorded_launch(held.found)
        executor = self._executor_for(target, action.id, base)
        if executor is None:
            await self._book.move(held, ESCALATED, POLICY, f"target {target.name} has no way "
                                  "to relaunch (no launch.unit, no relaunch.command)")
            close(held)
            return
        held.cancel_timer()
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
            loop.call_soon_threadsafe(self._book.moved, held, action)

        step = _Started(started, executor.roll_back, executor.done)
        try:
            await loop.run_in_executor(self._actions, lambda: carry_out(
                self._book.record, action, held.plan, step, verify, settings.state_dir, moved,
                self._now))
        except Exception as exc:  # the history unwritable, the manager gone: a person looks
            self._book.told.log.error("relaunch_stopped", action=action.id,
                                      error=str(exc)[:500])
            self._book.note(f"action {action.id} stopped: {exc}; the target is left as it is")
            with contextlib.suppress(Exception):
                await loop.run_in_executor(self._actions, executor.done)
            with contextlib.suppress(Exception):  # not left holding the target's lock
                await self._book.move(held, ESCALATED, POLICY, f"stopped: {str(exc)[:300]}; "
                                      "the target is left as it is")
        finally:
            ended = held.action
            self.watch.end(source, stood=ended.entered(RESTARTING) is None
                           or ended.state == SUCCEEDED)
            close(held)

    async def release_hold(self, target: TargetConfig) -> None:
        """A unit's restart hold taken away, so that its own Restart= is back."""
        unit = unit_of(target, self.settings.dropin)
        if unit is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(self._book.threads,
                                                             unit.release_restarts)
        except Exception as exc:  # told, and the escalation stands
            self._book.note(f"could not give {unit.unit} its own Restart= back: {exc}")

    def stop(self) -> None:
        """No more actions carried out (one being carried out finishes on its thread only as
        far as the process lives)."""
        self._actions.shutdown(wait=False, cancel_futures=True)


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
