"""Talk to a running daemon over its control socket: requests, event subscriptions that
outlive a daemon restart, and waiting until a daemon is ready (its `hello` answers).

The one client of the protocol: the CLI, the TUI, the benchmarks and the tests use it.
Every connection checks that the socket's path and the process serving it are trusted
(socket_trust), then says `hello` and refuses a daemon of another protocol version. The
vocabulary (requests, answers, events) is `logwatch.daemon.protocol`'s; connections are
`connection.py`'s, subscriptions `subscription.py`'s, all importable from here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, cast

from logwatch.daemon.connection import (
    ANSWER_LIMIT,
    FIRST_BACKOFF,
    DaemonUnavailable,
    PermissionDenied,
    ProtocolMismatch,
    RequestFailed,
    close_quietly,
    connect,
    exchange,
    hello_checked,
)
from logwatch.daemon.protocol import HelloAnswer, RowsAnswer, StatusBody, request_message
from logwatch.daemon.subscription import Reconnected, Subscription, raw_subscription

__all__ = ["Client", "DaemonUnavailable", "PermissionDenied", "ProtocolMismatch", "Reconnected",
           "RequestFailed", "Subscription", "raw_subscription", "request", "subscribe",
           "wait_ready"]


class Client:
    """A connection to a daemon for requests, opened on first use. With `reconnect`, a
    request that finds the daemon gone waits up to `reconnect_for` seconds (None: forever)
    for one to answer again and is sent again (every request is safe to repeat); without, a
    connection the daemon closed while it was idle (socket.idle_seconds) is opened again
    once."""

    def __init__(self, path: Path, *, timeout: float = 30.0, reconnect: bool = False,
                 reconnect_for: float | None = 30.0) -> None:
        self.path = path
        self.timeout = timeout
        self.reconnect = reconnect
        self.reconnect_for = reconnect_for
        self.daemon: HelloAnswer | None = None  # the hello of the daemon connected to
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()  # one request at a time on the connection

    async def connect(self, wait: float | None = 0.0) -> HelloAnswer:
        """Open the connection (trying for `wait` seconds, None: until one answers) and say
        hello."""
        await self.close()
        self._reader, self._writer, self.daemon = await connect(
            self.path, self.timeout, ANSWER_LIMIT, wait)
        return self.daemon

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        await close_quietly(writer)

    async def __aenter__(self) -> Client:
        if self._writer is None:
            await self.connect()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def request(self, op: str, **params: Any) -> dict[str, Any]:
        """The daemon's answer, `ok` true or false (an error is an answer too: `other_db`,
        a refused query). Parameters left None are not sent."""
        message = request_message(op, params)
        async with self._lock:
            while True:
                reused = self._writer is not None  # the daemon closes one left idle
                if self._writer is None:
                    await self.connect(self.reconnect_for if self.reconnect else 0.0)
                assert self._reader is not None and self._writer is not None
                try:
                    return await exchange(self._reader, self._writer, message,
                                           self.timeout, self.path)
                except DaemonUnavailable:
                    await self.close()
                    if not self.reconnect and not reused:
                        raise
                except BaseException:  # a timeout: a late answer must not be read as the next
                    await self.close()
                    raise

    async def _ok(self, op: str, **params: Any) -> dict[str, Any]:
        answer = await self.request(op, **params)
        if not answer.get("ok"):
            raise RequestFailed(op, answer)
        return answer

    async def hello(self) -> HelloAnswer:
        return hello_checked(await self.request("hello"), self.path)

    async def status(self) -> StatusBody:
        return cast(StatusBody, (await self._ok("status"))["status"])

    async def sql(self, query: str) -> RowsAnswer:
        """A read-only query's rows; RequestFailed when the daemon refuses or stops it."""
        return cast(RowsAnswer, await self._ok("sql", query=query))

    def subscribe(self, kinds: Iterable[str] | None = None, *,
                  reconnect: bool | None = None) -> Subscription:
        """Events of these kinds (None: every kind both sides know), on a connection of its
        own. Reconnects as this client does unless told otherwise."""
        return Subscription(self.path, kinds, timeout=self.timeout,
                            reconnect=self.reconnect if reconnect is None else reconnect,
                            reconnect_for=self.reconnect_for)


async def request(path: Path, op: str, /, *, timeout: float = 30.0,
                  **params: Any) -> dict[str, Any]:
    """One request on a connection of its own: the answer, `ok` true or false."""
    async with Client(path, timeout=timeout) as client:
        return await client.request(op, **params)


def subscribe(path: Path, kinds: Iterable[str] | None = None, *, wait: float = 0.0,
              reconnect: bool = False, reconnect_for: float | None = 30.0) -> Subscription:
    """A subscription, not started yet (`async with` or the first `async for` starts it);
    `wait`: seconds to keep trying while the daemon is still starting."""
    return Subscription(path, kinds, reconnect=reconnect, reconnect_for=reconnect_for,
                        wait=wait)


async def wait_ready(path: Path, timeout: float = 30.0, *,
                     alive: Callable[[], bool] | None = None) -> HelloAnswer:
    """Until a daemon says hello on `path` (its socket is up, its sources are being opened);
    TimeoutError after `timeout` seconds, DaemonUnavailable at once when `alive()` (the
    daemon's process, say) turns false."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    backoff = FIRST_BACKOFF / 2
    while True:
        if alive is not None and not alive():
            raise DaemonUnavailable(f"the daemon for {path} exited before it answered")
        try:
            _, writer, hello = await connect(path, max(1.0, timeout), ANSWER_LIMIT, 0.0)
        except DaemonUnavailable:
            if loop.time() >= deadline:
                raise TimeoutError(f"no logwatch daemon answered on {path} within "
                                   f"{timeout:g} s") from None
            await asyncio.sleep(min(backoff, max(0.0, deadline - loop.time())))
            backoff = min(backoff * 2, 0.5)
            continue
        writer.close()
        return hello
