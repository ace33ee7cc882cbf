"""`logwatch run --relaunch ask|auto`: relaunching the child `logwatch run` supervises.

The source (sources/process.py) runs one child after another: when one ends it asks
`next_launch` for the next. The answer is the relaunch an action asked for (`start`, on the
action's thread: the plan applied to the child's real argv and environment, not to the recorded
ones, whose secrets are masked), the last launch that verified after a rollback, or, once the
daemon has nothing more for the target (nothing being planned, no action open), nothing: the
run then ends. Its status is the verdict: a relaunch that did not verify, rolled back with
nothing healthy to return to, is a failure even when the rollback stopped it cleanly
(`failed_status`).

Each child started this way gets its snapshot recorded before its first line is read, so its
findings and launches link to what it really runs.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from logwatch.core.remedy.plan import Launch, Plan, apply_plan
from logwatch.host.targets import TargetSnapshot
from logwatch.relaunch.systemd import RelaunchError
from logwatch.sources.process import ProcessSource

START_SECONDS = 30.0  # the source starts the next child within this, or the start failed
SETTLE_POLL_SECONDS = 0.2  # how often a finished child's run looks whether anything is left


@dataclass(frozen=True, slots=True)
class _Next:
    launch: Launch
    snapshot: TargetSnapshot


class RunChild:
    """The executor of `logwatch run`'s child, and its source's `next_launch`."""

    def __init__(self, source: ProcessSource, launch: Launch,
                 loop: asyncio.AbstractEventLoop,
                 snapshot_of: Callable[[Launch], TargetSnapshot],
                 record: Callable[[TargetSnapshot], None],
                 settled: Callable[[], bool]) -> None:
        """`launch`: the first child's argv and whole environment. `snapshot_of`: a
        snapshot of a launch (read on the action's thread); `record`: makes it the source's
        (event loop). `settled`: whether the daemon has nothing more for the target (every
        failure read is written and handled, no action open)."""
        self.source = source
        self.current = launch
        self.healthy: Launch | None = None  # the last launch that verified
        self.unverified = False  # a relaunch rolled back with nothing healthy to put back
        self.failure: int | None = None  # the last status of a child that failed (128+N)
        self._stopping = False  # the run is stopping the child: its status is no verdict
        self._loop = loop
        self._snapshot_of = snapshot_of
        self._record = record
        self._settled = settled
        self._requests: asyncio.Queue[_Next] = asyncio.Queue()
        self._started = threading.Event()
        source.next_launch = self.next_launch
        source.on_start = self._started.set

    # -- the executor (the action's thread) -------------------------------------------------
    def start(self, plan: Plan, overlay_dir: str | None) -> Launch:
        after = apply_plan(plan, self.current, overlay_dir)
        self.unverified = False
        self._stop_child()  # a failed child has ended already; one still running is stopped
        self._launch(after)
        return after

    def roll_back(self) -> None:
        """Stop the relaunch; start the last launch that verified, when there was one (the
        failed one is not started again: the run then ends, failed)."""
        self.unverified = self.healthy is None
        self._stop_child()
        if self.healthy is not None:
            self._launch(self.healthy)

    def alive(self) -> bool | None:
        return self.source.running()

    def done(self) -> None:
        self.healthy = self.current

    def failed_status(self, code: int) -> int:
        """The run's status once its last child ended with `code` (128+N for a signal): that,
        or, after a relaunch that did not verify and was stopped, the status of the last
        child that failed by itself (1 when none is known). A child the rollback stopped
        ends with whatever the signal made of it (0 when vLLM had come up, 143 when SIGTERM
        killed it while it was starting): neither is the run's verdict."""
        if not self.unverified:
            return code
        return self.failure or 1

    def _launch(self, launch: Launch) -> None:
        snapshot = self._snapshot_of(launch)
        self._started.clear()
        self._loop.call_soon_threadsafe(self._requests.put_nowait, _Next(launch, snapshot))
        if not self._started.wait(START_SECONDS):
            raise RelaunchError("the run did not start the next child within "
                                f"{START_SECONDS:g} s")
        self.current = launch
        if not self.source.running() and self.source.returncode == 127:
            raise RelaunchError(f"cannot start {launch.spec.argv()[0]}: "
                                + (self.source.events[-1] if self.source.events else "?"))

    def _stop_child(self) -> None:
        """SIGTERM to the child's group; the source kills it after its stop deadline."""
        if not self.source.running():
            return
        self._stopping = True
        self._loop.call_soon_threadsafe(self.source.stop_child)
        while self.source.running():
            time.sleep(0.05)  # the child's exit is seen on the event loop

    # -- the source (the event loop) --------------------------------------------------------
    async def next_launch(self, code: int) -> tuple[Sequence[str], Mapping[str, str]] | None:
        """After a child ended with `code`: the next one to start, or None to end."""
        if code != 0 and not self._stopping:
            self.failure = 128 - code if code < 0 else code
        self._stopping = False
        while True:
            try:
                following = await asyncio.wait_for(self._requests.get(), SETTLE_POLL_SECONDS)
            except TimeoutError:
                if self._settled() or self.source.ending:
                    return None
                continue
            self._record(following.snapshot)
            return following.launch.spec.argv(), following.launch.env
