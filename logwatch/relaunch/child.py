"""Relaunch a supervised child (how `logwatch run` runs vLLM): its process group stopped (TERM,
then KILL after a timeout), the corrected command line started in a new group, its output in
a log file the verification reads."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from logwatch.core.remedy.plan import Launch, Plan, apply_plan
from logwatch.core.snapshot.argv import parse_launch

STOP_TIMEOUT_S = 10.0


@dataclass
class Child:
    """One launch as a child process, its stdout and stderr in `log`."""

    argv: list[str]
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                            env=self.env, start_new_session=True)

    def wait(self, deadline: float) -> int | None:
        """The exit status, or None if it still runs at the monotonic `deadline`."""
        assert self.process is not None
        try:
            return self.process.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            return None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """TERM to the process group, KILL after `timeout`."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@dataclass
class ChildExecutor:
    """The runner's executor for a child: `start` stops the current child and starts the
    plan's launch; `roll_back` stops it and starts the previous command line again only when
    that one was serving (a launch that failed is not put back: there is nothing healthy to
    return to, and the runner escalates)."""

    current: Child
    log_dir: Path
    previous_was_healthy: bool = False
    children: list[Child] = field(default_factory=list)  # every child started, in order
    previous: Child | None = None

    def start(self, plan: Plan, overlay_dir: str | None) -> Launch:
        after = apply_plan(plan, Launch(parse_launch(self.current.argv),
                                        dict(self.current.env)), overlay_dir)
        self.current.stop()
        self.previous = self.current
        self.current = Child(after.spec.argv(), after.env,
                             self.log_dir / f"launch-{len(self.children) + 2}.log")
        self.children.append(self.current)
        self.current.start()
        return after

    def done(self) -> None:
        """Nothing is held while a child is relaunched."""

    def roll_back(self) -> None:
        self.current.stop()
        if self.previous_was_healthy and self.previous is not None:
            back = Child(self.previous.argv, self.previous.env,
                         self.log_dir / f"launch-{len(self.children) + 2}.log")
            self.children.append(back)
            back.start()
            self.current = back
