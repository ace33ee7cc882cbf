"""The daemon's control socket: a Unix socket (mode 0660, optional group; no network
listener) speaking JSON lines. One request per line, one response per line; `subscribe`
turns the connection into a stream of events. Every request is checked against who the
peer is (`peers`: the owner, an operator, a reader; anyone else is not let in); a connection
that asks nothing for `idle_seconds` is closed, each user holds at most PER_USER of them,
and the owner's connections never wait behind anyone else's.

The requests, their answers and the events are declared in `logwatch.daemon.protocol`; every
request is checked against it before it is answered, and every event published against it
before it is sent. Publishing an event outside the vocabulary (an unknown kind or field) is a
programming error: it raises ProtocolError where the protocol is strict (the test suite sets
LOGWATCH_STRICT_PROTOCOL=1), and in production is logged once (`event_refused`) and dropped,
since ingestion matters more than one event. A slow subscriber never stalls ingestion: its
queue is bounded and events that do not fit are dropped and counted in the next event it
gets. Clients: `logwatch.daemon.client`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from logwatch import __version__, own_log
from logwatch.core.report.timestamps import written
from logwatch.daemon.action_book import RelaunchError, operator_name
from logwatch.daemon.peers import OWNER, Groups, Peer, identify, not_let_in, refused_because
from logwatch.daemon.protocol import EVENT_KINDS as EVENT_KINDS  # re-exported: older imports
from logwatch.daemon.protocol import (
    OPS,
    PROTOCOL_VERSION,
    ApproveRequest,
    Event,
    HelloRequest,
    IncidentsRequest,
    ProtocolError,
    RecentLinesRequest,
    RejectRequest,
    ReloadRequest,
    Request,
    ResetBreakerRequest,
    SignaturesRequest,
    SnapshotRequest,
    SqlRequest,
    StatusRequest,
    SubscribeRequest,
    event_message,
    parse_request,
    to_message,
)
from logwatch.daemon.recent_lines import RecentLines
from logwatch.daemon.relaunches import Relaunches
from logwatch.daemon.socket_trust import group_cannot_reach, prepare_directory
from logwatch.host.trusted_dirs import UnsafeSocketPath, trusted_uids
from logwatch.store.db import DatabaseError
from logwatch.store.operator_sql import DEFAULT_LIMITS, QueryLimits, QueryResult, run_read_only

if TYPE_CHECKING:
    import duckdb


class QueryStore(Protocol):
    """The history as the socket's queries see it."""

    @property
    def path(self) -> Path: ...

    def reader(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]: ...

    def interrupt_readers(self, wait: float = ...) -> int: ...


class HoldsStore(Protocol):
    @property
    def store(self) -> QueryStore: ...


class ControlledDaemon(Protocol):
    """What the control server needs from the daemon, and nothing more."""

    events: list[str]  # what the operator should know; the server adds its own notes

    @property
    def writer(self) -> HoldsStore: ...

    @property
    def snapshots(self) -> Mapping[str, str]: ...  # source or target -> snapshot hash

    @property
    def relaunches(self) -> Relaunches | None: ...  # when a target's policy may act

    def status(self) -> dict[str, Any]: ...

    def signature_states(self) -> dict[str, Any]: ...

    def reload(self) -> None: ...


def strict_protocol() -> bool:
    """Whether publishing outside the vocabulary raises (LOGWATCH_STRICT_PROTOCOL=1)."""
    return os.environ.get("LOGWATCH_STRICT_PROTOCOL", "") not in ("", "0")


SUBSCRIBER_QUEUE = 256  # events; a "lines" event holds at most 64 KiB of text
MAX_REQUEST_BYTES = 1 << 20
# Socket queries run on threads of their own (never the default pool, which sources use),
# at most this many at once; more are answered "busy" at once rather than queued.
SQL_CONCURRENT = 2
# At most this many connections at once of users other than the owner (root and the
# daemon's user), PER_USER of them of any one user; the owner has OWNER_CLIENTS of its own,
# so others' connections never lock it out. Answers waiting in the socket buffers of
# clients that do not read them may hold at most ANSWER_BUFFER_BYTES all together (a bigger
# answer is refused as busy), so clients that ask and never read cannot grow the daemon.
MAX_CLIENTS = 64
PER_USER = 16
OWNER_CLIENTS = 64
IDLE_SECONDS = 60.0  # socket.idle_seconds: a connection that asks nothing for so long goes
ANSWER_BUFFER_BYTES = 64 << 20
REFUSAL_WAIT = 5.0  # seconds a refused connection has to send the request it is answered
# refused connections waiting for their request at once; past that, each is answered and
# closed at once (a flood of silent connections must not take the daemon's descriptors)
REFUSALS_WAITING = 32


def _json(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return written(value)  # as the CLI writes a time it read from the file itself
    return str(value)


class Subscriber:
    def __init__(self, kinds: frozenset[str] | None = None) -> None:
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(SUBSCRIBER_QUEUE)
        self.kinds = kinds  # None: every kind of event
        self.dropped = 0

    def offer(self, event: dict[str, Any]) -> None:
        if self.kinds is not None and event["event"] not in self.kinds:
            return
        if self.dropped and not self.queue.full():
            event = {**event, "dropped_before": self.dropped}
            self.dropped = 0
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1


class ControlServer:
    def __init__(self, daemon: ControlledDaemon, path: Path, group: str | None = None,
                 strict: bool | None = None, *, operators_group: str | None = None,
                 idle_seconds: float = IDLE_SECONDS) -> None:
        """`group`: readers' (socket.group), `operators_group`: operators'
        (socket.operators_group); `strict`: raise on an event outside the vocabulary
        (default: strict_protocol())."""
        self.daemon = daemon
        self.strict = strict_protocol() if strict is None else strict
        self.log = own_log.get("logwatch.control")
        self._refused: set[str] = set()  # events refused, each logged once
        self.path = path
        self.group = group
        self.operators_group = operators_group
        self.groups = Groups()  # resolved when the socket starts
        self.idle_seconds = idle_seconds
        self._held: dict[int | None, int] = {}  # uid -> connections open
        self._turned_away: set[int | None] = set()  # users not let in (logged once each)
        self._refusing = 0  # refused connections waiting for their request (REFUSALS_WAITING)
        self.subscribers: set[Subscriber] = set()
        self._server: asyncio.base_events.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()
        self.limits: QueryLimits = DEFAULT_LIMITS
        self._queries = ThreadPoolExecutor(max_workers=SQL_CONCURRENT,
                                           thread_name_prefix="logwatch-sql")
        self._running_queries = 0
        self._writers: set[asyncio.StreamWriter] = set()  # connected clients
        self.recent = RecentLines()  # fed by the scan, whoever subscribes

    def wants(self, kind: str) -> bool:
        """Whether any subscriber takes this kind of event (skip building it otherwise)."""
        return any(s.kinds is None or kind in s.kinds for s in self.subscribers)

    def publish(self, kind: str, **fields: Any) -> None:
        """Called from the ingestion loop: never blocks. `kind` and the field names must be
        the vocabulary's (protocol.EVENTS); fields left out go at their defaults."""
        try:
            event = event_message(kind, fields)
        except ProtocolError as exc:
            if self.strict:
                raise
            if str(exc) not in self._refused:
                self._refused.add(str(exc))
                self.log.error("event_refused", kind=kind, error=str(exc))
            return
        for subscriber in list(self.subscribers):
            subscriber.offer(event)

    def publish_event(self, event: Event) -> None:
        """Publish a typed event (protocol.LaunchEvent(...), ...)."""
        message = to_message(event)
        del message["event"]
        self.publish(event.kind, **message)

    async def start(self) -> None:
        self.groups = Groups.named(self.group, self.operators_group)  # OSError: no such group
        # the socket's group: the readers', else the operators' (who must reach it too)
        named = self.groups.readers or self.groups.operators
        gid = named[1] if named else None
        try:
            prepare_directory(self.path.parent, gid)
        except UnsafeSocketPath as exc:
            raise OSError(str(exc)) from exc
        if gid is not None and group_cannot_reach(self.path.parent, gid):
            note = (f"control socket: members of group {named and named[0]} cannot reach "
                    f"{self.path.parent} (no search permission); give the directory to the "
                    "group, or make it 0755 (the socket's own mode 0660 keeps others out)")
            self.daemon.events.append(note)
            self.log.warning("control_socket_unreachable", group=named and named[0],
                             path=str(self.path.parent))
        if self.path.is_socket():
            try:
                _, probe = await asyncio.wait_for(asyncio.open_unix_connection(str(self.path)),
                                                  2)
            except (OSError, TimeoutError):
                self.path.unlink()  # nobody answers: a stale socket from a crashed daemon
            else:
                probe.close()
                raise OSError(f"another logwatch daemon is listening on {self.path}")
        self._server = await asyncio.start_unix_server(self._client, path=str(self.path),
                                                       limit=MAX_REQUEST_BYTES)
        os.chmod(self.path, 0o660)
        if gid is not None:
            os.chown(self.path, -1, gid)

    async def stop_queries(self) -> None:
        """Interrupt the queries running and refuse new ones (the daemon is stopping)."""
        self._queries.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(self.daemon.writer.store.interrupt_readers)

    async def close(self) -> None:
        """Stop listening, stop running queries and drop every client, however stalled."""
        if self._server is not None:
            self._server.close()
        await self.stop_queries()
        for task in list(self._clients):
            task.cancel()
        if self._clients:
            await asyncio.wait(list(self._clients), timeout=2)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _release(self, peer: Peer) -> None:
        self._held[peer.uid] -= 1
        if not self._held[peer.uid]:
            del self._held[peer.uid]

    def _no_slot(self, peer: Peer) -> str | None:
        """Why this peer's connection cannot be held now (counted already), or None."""
        if peer.role == OWNER:
            return None if self._held[peer.uid] <= OWNER_CLIENTS else (
                f"busy: {OWNER_CLIENTS} connections of yours are open (the most at once)")
        if self._held[peer.uid] > PER_USER:
            return (f"busy: {peer.name} has {PER_USER} connections open (the most for one "
                    "user); close one")
        strangers = sum(n for uid, n in self._held.items()
                        if uid is None or uid not in trusted_uids())
        if strangers > MAX_CLIENTS:
            return f"busy: {MAX_CLIENTS} connections are open (the most at once)"
        return None

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._clients.add(task)
        self._writers.add(writer)
        peer = identify(writer.get_extra_info("socket"), self.groups)
        self._held[peer.uid] = self._held.get(peer.uid, 0) + 1
        counted = True
        try:
            turned_away: dict[str, Any] | None = None
            if peer.role is None:
                if peer.uid not in self._turned_away:  # said once per user, not per try
                    self._turned_away.add(peer.uid)
                    self.log.warning("control_peer_refused", uid=peer.uid)
                turned_away = {"ok": False, "denied": True,
                               "error": not_let_in(peer, self.groups)}
            elif (busy := self._no_slot(peer)) is not None:
                turned_away = {"ok": False, "error": busy}
            if turned_away is not None:  # the answer to its first request (a client writes
                self._release(peer)  # first: an answer before it, then a close, is lost)
                counted = False
                if self._refusing < REFUSALS_WAITING:
                    self._refusing += 1
                    try:
                        with contextlib.suppress(TimeoutError, ValueError):
                            await asyncio.wait_for(reader.readline(), min(self.idle_seconds,
                                                                          REFUSAL_WAIT))
                    finally:
                        self._refusing -= 1
                await self._send(writer, turned_away)
                return
            while True:
                try:
                    line = await asyncio.wait_for(reader.readline(), self.idle_seconds)
                except TimeoutError:  # asked nothing for too long: its slot goes
                    return
                except ValueError:
                    await self._send(writer, {"ok": False, "error": "request over 1 MiB"})
                    return
                if not line:
                    return
                try:
                    message = json.loads(line)
                    if not isinstance(message, dict):
                        raise ValueError("not an object")
                    request = parse_request(message)
                except (ValueError, RecursionError) as exc:  # nested too deep: RecursionError
                    await self._send(writer, {"ok": False, "error": _bad_request(exc)})
                    continue
                denied = refused_because(request, peer, self.groups)
                if denied is not None:
                    self.log.warning("control_request_refused", op=request.op, uid=peer.uid)
                    await self._send(writer, {"ok": False, "denied": True, "error": denied})
                    continue
                if isinstance(request, SubscribeRequest):
                    refusal = self._other_db(request)
                    if refusal is not None:
                        await self._send(writer, refusal)
                        continue
                    kinds = None if request.events is None else frozenset(request.events)
                    await self._stream(writer, kinds)
                    return
                try:
                    reply = await self.answer(request, peer.uid)
                except (ValueError, TypeError) as exc:  # a field of the wrong kind
                    reply = {"ok": False, "error": f"bad request: {exc}"}
                except Exception as exc:  # never a dropped connection for the client
                    self.log.exception("control_request_failed", op=request.op)
                    reply = {"ok": False, "error": f"internal error: {type(exc).__name__}"}
                await self._send(writer, reply)
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            if counted:
                self._release(peer)
            if task is not None:
                self._clients.discard(task)
            self._writers.discard(writer)
            writer.transport.abort()  # never wait for a peer that stopped reading

    async def _send(self, writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
        data = json.dumps(message, default=_json).encode() + b"\n"
        if len(data) > 1 << 20:
            waiting = sum(w.transport.get_write_buffer_size() for w in self._writers)
            if waiting + len(data) > ANSWER_BUFFER_BYTES:
                data = json.dumps({"ok": False, "error": (
                    f"busy: {waiting >> 20} MiB of answers wait for their clients to read "
                    f"them; this one ({len(data) >> 20} MiB) would pass the "
                    f"{ANSWER_BUFFER_BYTES >> 20} MiB allowed; try again")}).encode() + b"\n"
        writer.write(data)
        await writer.drain()

    async def _stream(self, writer: asyncio.StreamWriter,
                      kinds: frozenset[str] | None) -> None:
        subscriber = Subscriber(kinds)
        self.subscribers.add(subscriber)
        try:
            await self._send(writer, {"ok": True, "subscribed": True})
            while True:
                await self._send(writer, await subscriber.queue.get())
        finally:
            self.subscribers.discard(subscriber)

    def _other_db(self, request: Request) -> dict[str, Any] | None:
        """The refusal when the client named a database other than the one held here."""
        if request.db is None:
            return None
        held = self.daemon.writer.store.path
        if Path(request.db).resolve() == held.resolve():
            return None
        return {"ok": False, "other_db": True,
                "error": f"this daemon's history is {held}, not {request.db}"}

    def hello(self) -> dict[str, Any]:
        return {"ok": True, "version": __version__, "protocol": PROTOCOL_VERSION,
                "requests": list(OPS), "events": sorted(EVENT_KINDS),
                "db": os.path.abspath(self.daemon.writer.store.path), "pid": os.getpid()}

    async def answer(self, request: Request, peer: int | None = None) -> dict[str, Any]:
        """The answer to a checked request (protocol.parse_request), subscribe aside.
        `peer`: the connecting user's uid (the operator an approval is recorded for)."""
        daemon = self.daemon
        refusal = self._other_db(request)
        if refusal is not None:
            return refusal
        if isinstance(request, ApproveRequest | RejectRequest | ResetBreakerRequest):
            return await self._relaunch(request, peer)
        if isinstance(request, HelloRequest):
            return self.hello()
        if isinstance(request, StatusRequest):
            return {"ok": True, "status": {**daemon.status(),
                                           "queries_running": self._running_queries}}
        if isinstance(request, SignaturesRequest):
            return {"ok": True, **daemon.signature_states()}
        if isinstance(request, RecentLinesRequest):
            return {"ok": True, "lines": self.recent.read(request.limit)}
        if isinstance(request, ReloadRequest):
            daemon.reload()
            return {"ok": True, "events": daemon.events[-5:]}
        if isinstance(request, SnapshotRequest):  # by hash, else the newest
            digest = request.hash
            sql, params = (("SELECT hash, first_recorded, body FROM snapshots WHERE hash = ?",
                            [digest]) if digest else
                           ("SELECT hash, first_recorded, body FROM snapshots "
                            "ORDER BY first_recorded DESC LIMIT 1", []))
            result = await self._run_query(sql, params)
            if isinstance(result, dict):
                return result
            if not result.rows:
                return {"ok": False, "error": "no such snapshot" if digest else
                        "no snapshot recorded yet (`logwatch run` records what it starts)"}
            digest, recorded, body = result.rows[0]
            return {"ok": True, "hash": digest, "recorded": recorded,
                    "snapshot": json.loads(body) if isinstance(body, str) else body,
                    "sources": {k: v for k, v in daemon.snapshots.items() if v == digest}}
        if isinstance(request, SqlRequest):
            result = await self._run_query(request.query)
        elif isinstance(request, IncidentsRequest):
            result = await self._run_query("SELECT * FROM incident_timeline "
                                           "ORDER BY last_time DESC NULLS LAST LIMIT ?",
                                           [request.limit])
        else:
            return {"ok": False, "error": f"{request.op}: not answered on this connection"}
        if isinstance(result, dict):
            return result
        return {"ok": True, "columns": result.columns, "rows": result.rows,
                "truncated": result.truncated}

    async def _relaunch(self, request: ApproveRequest | RejectRequest | ResetBreakerRequest,
                        peer: int | None) -> dict[str, Any]:
        relaunches = getattr(self.daemon, "relaunches", None)
        if relaunches is None:
            return {"ok": False, "error": "no target's relaunch policy is ask or auto here: "
                                          "there are no actions"}
        operator = operator_name(peer)
        try:
            if isinstance(request, ResetBreakerRequest):
                was = await relaunches.reset_breaker(request.target, operator,
                                                     request.reason or "")
                return {"ok": True, "target": request.target, "was_open": was}
            act = relaunches.approve if isinstance(request, ApproveRequest) \
                else relaunches.reject
            action = await act(request.id, operator, request.reason or "")
        except RelaunchError as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": True, "id": action.id, "state": action.state,
                "reason": action.transitions[-1].reason}

    async def _run_query(self, sql: str, params: list[Any] | None = None
                         ) -> QueryResult | dict[str, Any]:
        """A read-only query on the query threads, within the limits; an error answer when
        it fails or too many run already."""
        if self._running_queries >= SQL_CONCURRENT:  # counted on the loop: no lock needed
            return {"ok": False, "error": f"busy: {self._running_queries} queries are running "
                                          "(the most at once); try again"}
        self._running_queries += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._queries, self._query, sql, params or [])
        except RuntimeError:  # the executor is shut down
            return {"ok": False, "error": "logwatch is shutting down: no more queries"}
        except DatabaseError as exc:
            return {"ok": False, "error": str(exc)}
        finally:
            self._running_queries -= 1

    def _query(self, sql: str, params: list[Any]) -> QueryResult:
        with self.daemon.writer.store.reader() as cursor:  # its own connection
            return run_read_only(cursor, sql, params, self.limits,
                                 self.daemon.writer.store.path)



def _bad_request(exc: BaseException) -> str:
    if isinstance(exc, ProtocolError):
        return f"bad request: {exc}"
    return f"bad request: {type(exc).__name__}: {str(exc)[:200]}"
