"""Connections to the daemon's control socket, shared by requests (client.py) and
subscriptions (subscription.py): the trust checks on the socket's path and on the process
serving it, one JSON line each way, `hello` first, retries with backoff, and the errors a
client sees (a daemon that does not let us in is PermissionDenied, never "no daemon")."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any, cast

from logwatch.daemon.protocol import PROTOCOL_VERSION, HelloAnswer
from logwatch.daemon.socket_trust import check_peer, check_socket, peer_uid, who_may_connect
from logwatch.host.trusted_dirs import UnsafeSocketPath

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


class PermissionDenied(Exception):
    """The socket or the daemon does not let this user in; the message says who may (not
    an OSError: a caller that falls back to the database file when no daemon runs must not
    do so here)."""


class RequestFailed(Exception):
    """The daemon answered `{"ok": false, "error": ...}`."""

    def __init__(self, op: str, answer: dict[str, Any]) -> None:
        super().__init__(f"{op}: {answer.get('error', answer)}")
        self.answer = answer


def check_server(writer: asyncio.StreamWriter, path: Path) -> None:
    """The process at the other end runs as us or root (the kernel says who: SO_PEERCRED)."""
    uid = peer_uid(writer.get_extra_info("socket"))
    if uid is None:
        raise UnsafeSocketPath(f"{path}: the kernel does not say who serves it")
    check_peer(uid, path)


async def open_trusted(path: Path, timeout: float, limit: int
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to a trusted daemon; DaemonUnavailable when none listens,
    UnsafeSocketPath when someone else could have put the socket there or serves it."""
    try:
        check_socket(path)
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(str(path), limit=limit), timeout)
    except PermissionError as exc:  # the socket's or its directory's mode keeps us out
        raise PermissionDenied(f"permission denied: you may not connect to {path}; "
                               f"{who_may_connect(path)}") from exc
    except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError) as exc:
        raise DaemonUnavailable(f"no logwatch daemon answers on {path} "
                                f"({exc.strerror or type(exc).__name__})") from exc
    try:
        check_server(writer, path)
    except UnsafeSocketPath:
        writer.close()
        raise
    return reader, writer


async def close_quietly(writer: asyncio.StreamWriter | None) -> None:
    """Close a connection; one the daemon already dropped closes without a word."""
    if writer is not None:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
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


def hello_checked(answer: dict[str, Any], path: Path) -> HelloAnswer:
    error = str(answer.get("error", ""))
    if answer.get("denied"):  # the daemon does not let this user in: who may, said
        raise PermissionDenied(f"{path}: {error}")
    if error.startswith("busy"):  # all its connections are taken: try again later
        raise DaemonUnavailable(f"the daemon on {path} is {error}")
    if "unknown op" in error:
        raise ProtocolMismatch(f"{path}: the daemon does not know hello: an older logwatch?")
    if not answer.get("ok"):
        raise RequestFailed("hello", answer)
    if answer.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolMismatch(f"{path}: the daemon (logwatch {answer.get('version')}) speaks "
                               f"protocol {answer.get('protocol')}, this client "
                               f"{PROTOCOL_VERSION}")
    return cast(HelloAnswer, answer)


async def connect(path: Path, timeout: float, limit: int, wait: float | None
                   ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, HelloAnswer]:
    """Connect and say hello, retrying with backoff for `wait` seconds (None: forever) while
    no daemon answers. A trust or version refusal is never retried."""
    loop = asyncio.get_running_loop()
    deadline = None if wait is None else loop.time() + wait
    backoff = FIRST_BACKOFF
    while True:
        try:
            reader, writer = await open_trusted(path, timeout, limit)
            try:
                hello = hello_checked(await exchange(reader, writer, {"op": "hello"},
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
