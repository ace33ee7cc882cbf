"""Talk to a running daemon over its control socket: requests, event subscriptions that
outlive a daemon restart, and waiting until a daemon is ready (its `hello` answers).

The CLI, the TUI, the benchmarks and the tests all use this one client. Every connection
checks that the socket's path and the process serving it are trusted (socket_trust), then
says `hello` and refuses a daemon of another protocol version. The vocabulary (requests,
answers, events) is `logwatch.daemon.protocol`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, cast

from logwatch.daemon.protocol import (
    EVENTS,
    PROTOCOL_VERSION,
    Event,
    HelloAnswer,
    RowsAnswer,
    StatusBody,
    parse_event,
    request_message,
)
from logwatch.daemon.socket_trust import UnsafeSocketPath, check_peer, check_socket

ANSWER_LIMIT = 64 << 20  # the longest answer read (a query's rows, up to the daemon's bound)
# The longest event kept (a `lines` event is at most ~400 KB as JSON); a longer one is skipped
# and counted as dropped. The stream reader stops reading the socket at twice this much
# unread, and from then the daemon's bounded queue drops events for us (`dropped_before`).
EVENT_LIMIT = 4 << 20
FIRST_BACKOFF = 0.05  # seconds before the first retry; doubled each time up to MAX_BACKOFF
MAX_BACKOFF = 2.0


class DaemonUnavailable(ConnectionError):
    """No daemon answers on the socket, or the one that did went away."""


class ProtocolMismatch(Exception):
    """The daemon speaks another protocol version than this client (not an OSError: a
    caller that falls back to the database file when no daemon runs must not do so here)."""


class RequestFailed(Exception):
    """The daemon answered `{"ok": false, "error": ...}`."""

    def __init__(self, op: str, answer: dict[str, Any]) -> None:
        super().__init__(f"{op}: {answer.get('error', answer)}")
        self.answer = answer


@dataclass(frozen=True)
class Reconnected:
    """In a subscription's stream: the daemon went away and one answers again (maybe
    another process: see `hello`); events published in between were missed."""

    kind: ClassVar[str] = "reconnected"
    hello: HelloAnswer
    down_s: float


def _check_server(writer: asyncio.StreamWriter, path: Path) -> None:
    """The process at the other end runs as us or root (the kernel says who: SO_PEERCRED)."""
    sock = writer.get_extra_info("socket")
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    check_peer(uid, path)


async def _open(path: Path, timeout: float, limit: int
                ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to a trusted daemon; DaemonUnavailable when none listens,
    UnsafeSocketPath when someone else could have put the socket there or serves it."""
    try:
        check_socket(path)
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(str(path), limit=limit), timeout)
    except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError) as exc:
        raise DaemonUnavailable(f"no logwatch daemon answers on {path} "
                                f"({exc.strerror or type(exc).__name__})") from exc
    try:
        _check_server(writer, path)
    except UnsafeSocketPath:
        writer.close()
        raise
    return reader, writer


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    message: dict[str, Any], timeout: float, path: Path) -> dict[str, Any]:
    try:
        writer.write(json.dumps(message).encode() + b"\n")
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
    except (ConnectionError, BrokenPipeError) as exc:
        raise DaemonUnavailable(f"the daemon on {path} went away ({exc})") from exc
    if not line:
        raise DaemonUnavailable(f"the daemon on {path} closed the connection")
    answer = json.loads(line)
    if not isinstance(answer, dict):
        raise DaemonUnavailable(f"the daemon on {path} answered {line[:200]!r}")
    return answer


def _hello_checked(answer: dict[str, Any], path: Path) -> HelloAnswer:
    if not answer.get("ok"):
        raise ProtocolMismatch(f"{path}: the daemon does not understand hello "
                               f"({answer.get('error')}): an older logwatch?")
    if answer.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolMismatch(f"{path}: the daemon (logwatch {answer.get('version')}) speaks "
                               f"protocol {answer.get('protocol')}, this client "
                               f"{PROTOCOL_VERSION}")
    return cast(HelloAnswer, answer)


async def _connect(path: Path, timeout: float, limit: int, wait: float | None
                   ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, HelloAnswer]:
    """Connect and say hello, retrying with backoff for `wait` seconds (None: forever) while
    no daemon answers. A trust or version refusal is never retried."""
    loop = asyncio.get_running_loop()
    deadline = None if wait is None else loop.time() + wait
    backoff = FIRST_BACKOFF
    while True:
        try:
            reader, writer = await _open(path, timeout, limit)
            try:
                hello = _hello_checked(await _exchange(reader, writer, {"op": "hello"},
                                                       timeout, path), path)
            except BaseException:
                writer.close()
                raise
            return reader, writer, hello
        except DaemonUnavailable:
            if deadline is not None and loop.time() >= deadline:
                raise
        pause = backoff if deadline is None else min(backoff, max(0.0, deadline - loop.time()))
        await asyncio.sleep(pause)
        backoff = min(backoff * 2, MAX_BACKOFF)


class Client:
    """A connection to a daemon for requests, opened on first use. With `reconnect`, a
    request that finds the daemon gone waits up to `reconnect_for` seconds (None: forever)
    for one to answer again and is sent again (every request is safe to repeat)."""

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
        self._reader, self._writer, self.daemon = await _connect(
            self.path, self.timeout, ANSWER_LIMIT, wait)
        return self.daemon

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

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
                if self._writer is None:
                    await self.connect(self.reconnect_for if self.reconnect else 0.0)
                assert self._reader is not None and self._writer is not None
                try:
                    return await _exchange(self._reader, self._writer, message,
                                           self.timeout, self.path)
                except DaemonUnavailable:
                    await self.close()
                    if not self.reconnect:
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
        return _hello_checked(await self.request("hello"), self.path)

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


class Subscription:
    """A stream of typed events: `async with client.subscribe([...]) as events:` (subscribed
    once inside), then `async for event in events`. Nothing is buffered beyond the socket:
    a consumer that falls behind makes the daemon's bounded queue drop events, counted on
    the next one (`Event.dropped_before`) and in `dropped`. When the daemon goes away the
    iteration raises DaemonUnavailable, or with `reconnect` waits up to `reconnect_for`
    seconds (None: forever) for one, subscribes again and yields `Reconnected`."""

    def __init__(self, path: Path, kinds: Iterable[str] | None = None, *,
                 timeout: float = 30.0, reconnect: bool = False,
                 reconnect_for: float | None = 30.0, wait: float = 0.0) -> None:
        self.path = path
        self.kinds = None if kinds is None else sorted(set(kinds))
        self.timeout, self.wait = timeout, wait
        self.reconnect, self.reconnect_for = reconnect, reconnect_for
        self.daemon: HelloAnswer | None = None
        self.reconnects = 0
        self.dropped = 0  # events the daemon dropped for us, and lines too long to keep
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._closed = False

    async def start(self) -> HelloAnswer:
        """Connect (trying for `wait` seconds), say hello and subscribe: events published
        from now on are ours. RequestFailed when the daemon refuses a kind."""
        return await self._subscribe(self.wait)

    async def _subscribe(self, wait: float | None) -> HelloAnswer:
        reader, writer, hello = await _connect(self.path, self.timeout, EVENT_LIMIT, wait)
        kinds = self.kinds if self.kinds is not None else [
            k for k in hello["events"] if k in EVENTS]  # what we cannot parse, not asked for
        try:
            ack = await _exchange(reader, writer, {"op": "subscribe", "events": kinds},
                                  self.timeout, self.path)
            if not ack.get("subscribed"):
                raise RequestFailed("subscribe", ack)
        except BaseException:
            writer.close()
            raise
        self._reader, self._writer, self.daemon = reader, writer, hello
        return hello

    async def close(self) -> None:
        self._closed = True
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def __aenter__(self) -> Subscription:
        if self._writer is None:
            await self.start()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event | Reconnected:
        if self._closed:
            raise StopAsyncIteration
        if self._reader is None:
            await self.start()
        while True:
            line = await self._line()
            if self._closed:
                raise StopAsyncIteration
            if line:
                message = json.loads(line)
                event = parse_event(message)
                self.dropped += event.dropped_before
                return event
            lost = time.monotonic()
            await self.close()
            self._closed = False
            if not self.reconnect:
                raise DaemonUnavailable(f"the daemon on {self.path} ended the subscription "
                                        "(it stopped or restarted)")
            hello = await self._subscribe(self.reconnect_for)
            self.reconnects += 1
            return Reconnected(hello, round(time.monotonic() - lost, 3))

    async def _line(self) -> bytes:
        """The next event line; b"" when the connection is gone. A line over EVENT_LIMIT is
        skipped (the reader drops what it holds of it; its tail follows)."""
        skipping = False
        while True:
            reader = self._reader
            if reader is None:
                return b""
            try:
                line = await reader.readline()
            except ValueError:  # over the limit
                skipping = True
                continue
            except ConnectionError:
                return b""
            if skipping and line:
                self.dropped += 1
                skipping = False
                continue
            return line


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
            _, writer, hello = await _connect(path, max(1.0, timeout), ANSWER_LIMIT, 0.0)
        except DaemonUnavailable:
            if loop.time() >= deadline:
                raise TimeoutError(f"no logwatch daemon answered on {path} within "
                                   f"{timeout:g} s") from None
            await asyncio.sleep(min(backoff, max(0.0, deadline - loop.time())))
            backoff = min(backoff * 2, 0.5)
            continue
        writer.close()
        return hello


async def raw_subscription(path: Path, kinds: list[str] | None = None, wait: float = 0.0
                           ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The acknowledged raw stream, one JSON event per line (kinds None: every kind the
    daemon has), for callers that read bytes."""
    reader, writer, _ = await _connect(path, 30.0, ANSWER_LIMIT, wait)
    try:
        ack = await _exchange(reader, writer, request_message("subscribe", {"events": kinds}),
                              30.0, path)
        if not ack.get("subscribed"):
            raise RequestFailed("subscribe", ack)
    except BaseException:
        writer.close()
        raise
    return reader, writer
