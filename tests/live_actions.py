"""Helpers for tests that drive a live daemon's relaunches: the action events up to a state,
the `logwatch` command as an operator types it."""

from __future__ import annotations

import asyncio
import sys

from logwatch.daemon.client import Subscription
from logwatch.daemon.protocol import ActionEvent


async def until_state(events: Subscription, states: set[str], seen: list[ActionEvent],
                      timeout: float = 90) -> ActionEvent:
    """The next action event whose state is one of `states`; every one read is kept in
    `seen`."""
    while True:
        event = await asyncio.wait_for(anext(events), timeout)
        assert isinstance(event, ActionEvent), event
        seen.append(event)
        if event.state in states:
            return event


async def logwatch_cli(*args: str) -> tuple[int, str]:
    """The real `logwatch` command in its own process (so its own uid on the socket)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "logwatch", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()
