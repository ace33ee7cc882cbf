"""A flag one coroutine waits on with a timeout, cheaply: a future and a timer per wait.

`asyncio.wait_for(event.wait(), t)` makes a task, a timeout handle and a cancellation per
call; the daemon's batcher and each followed file wait this way tens of times a second, so
the difference is a visible share of the daemon's CPU at low line rates.
"""

from __future__ import annotations

import asyncio


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Wakeup:
    """Like asyncio.Event for a single waiter, with `wait(timeout)` that returns whether it
    was set rather than raising on the timeout."""

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._set = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    async def wait(self, timeout: float) -> bool:
        """Until set (True) or `timeout` seconds (False)."""
        if self._set:
            return True
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        timer = loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
        return self._set
