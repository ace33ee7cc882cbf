"""A subscription to the daemon's events: typed events (logwatch.daemon.protocol) read as
the consumer takes them, resumed after a daemon restart when asked to."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from logwatch.daemon.connection import (
    ANSWER_LIMIT,
    EVENT_LIMIT,
    DaemonUnavailable,
    RequestFailed,
    close_quietly,
    connect,
    exchange,
)
from logwatch.daemon.protocol import EVENTS, Event, HelloAnswer, parse_event, request_message


@dataclass(frozen=True)
class Reconnected:
    """In a subscription's stream: the daemon went away and one answers again (maybe
    another process: see `hello`); events published in between were missed."""

    kind: ClassVar[str] = "reconnected"
    hello: HelloAnswer
    down_s: float


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
        reader, writer, hello = await connect(self.path, self.timeout, EVENT_LIMIT, wait)
        kinds = self.kinds if self.kinds is not None else [
            k for k in hello["events"] if k in EVENTS]  # what we cannot parse, not asked for
        try:
            ack = await exchange(reader, writer, {"op": "subscribe", "events": kinds},
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
        await close_quietly(writer)

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
            if self._closed:  # closed while it reconnected
                await self.close()
                raise StopAsyncIteration
            self.reconnects += 1
            return Reconnected(hello, round(time.monotonic() - lost, 3))

    async def _line(self) -> bytes:
        """The next event line; b"" when the connection is gone. A line over EVENT_LIMIT is
        skipped and counted in `dropped`."""
        while True:
            reader = self._reader
            if reader is None:
                return b""
            try:
                return await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:
                if not await _skip_line(reader):
                    return b""
                self.dropped += 1
            except (asyncio.IncompleteReadError, ConnectionError):  # gone, maybe mid-line
                return b""


async def _skip_line(reader: asyncio.StreamReader) -> bool:
    """Drop the rest of a line too long to keep; False when the connection ends first."""
    while True:
        try:
            await reader.readuntil(b"\n")
            return True
        except asyncio.LimitOverrunError as over:
            await reader.readexactly(over.consumed)  # what is buffered of it
        except (asyncio.IncompleteReadError, ConnectionError):
            return False


async def raw_subscription(path: Path, kinds: list[str] | None = None, wait: float = 0.0
                           ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The acknowledged raw stream, one JSON event per line (kinds None: every kind the
    daemon has), for callers that read bytes."""
    reader, writer, _ = await connect(path, 30.0, ANSWER_LIMIT, wait)
    try:
        ack = await exchange(reader, writer, request_message("subscribe", {"events": kinds}),
                              30.0, path)
        if not ack.get("subscribed"):
            raise RequestFailed("subscribe", ack)
    except BaseException:
        writer.close()
        raise
    return reader, writer
