"""The control socket's vocabulary: every request with its parameters and answer, every event
with its fields, and the protocol version. Pure data and checks, no I/O: the server, the client
(`logwatch.daemon.client`), the docs (`protocol_doc`) and the TUI all read it from here.

On the wire: one JSON object per line each way. A request is `{"op": OP, **params}`, its answer
`{"ok": true, ...}` or `{"ok": false, "error": "..."}`; an event is `{"event": KIND, **fields}`,
plus `dropped_before: N` when N events before it did not fit the subscriber's queue.

No `from __future__ import annotations` here: the TypedDicts' NotRequired keys and the
dataclasses' field types are read at run time (checks, docs), which string annotations break.
"""

import dataclasses
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NotRequired, TypedDict

# Bumped on a change an older peer would misread (a field renamed or retyped, a request's
# meaning changed); new requests, events and optional fields do not bump it: `hello` lists them.
PROTOCOL_VERSION = 1


class ProtocolError(ValueError):
    """A message outside the vocabulary: an unknown op, event kind, parameter or field, or a
    value of the wrong kind."""


# -- events -------------------------------------------------------------------------------
class CommittedFinding(TypedDict):
    source: str
    line: int
    signature: str


Outcome = Literal["starting", "serving", "failed", "stopped"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """Every event. `dropped_before` is set by the daemon, never by a publisher."""

    kind: ClassVar[str]
    dropped_before: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class LinesEvent(Event):
    """What was read: the whole lines that fit in 64 KiB, secrets masked (a single longer
    line is shown as its length only)."""

    kind: ClassVar[str] = "lines"
    source: str
    first_line: int
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class FindingEvent(Event):
    """A signature matched, as soon as it is matched (not yet in the history)."""

    kind: ClassVar[str] = "finding"
    source: str
    line: int
    signature: str
    severity: str
    fatal: bool
    captures: dict[str, str]


@dataclass(frozen=True, kw_only=True, slots=True)
class CommittedEvent(Event):
    """Findings are in DuckDB now (up to 1,000 named per event)."""

    kind: ClassVar[str] = "committed"
    count: int
    findings: list[CommittedFinding]


@dataclass(frozen=True, kw_only=True, slots=True)
class IncidentEvent(Event):
    """An incident seen for the first time since the daemon started; `launch`: the launch it
    belongs to, `again`: that launch's root cause made an earlier launch fail too."""

    kind: ClassVar[str] = "incident"
    id: str
    signature: str
    fatal: bool
    launch: str | None = None
    again: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class LibraryEvent(Event):
    """A reload ended: `loaded` with its `signatures`, or refused with the `error` (the
    running library stays)."""

    kind: ClassVar[str] = "library"
    loaded: bool
    version: str
    signatures: int | None = None
    error: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SignatureDisabledEvent(Event):
    """A signature's patterns kept running over the match budget: not tried until the next
    reload."""

    kind: ClassVar[str] = "signature_disabled"
    signature: str
    path: str
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotEvent(Event):
    """A target's unit started again and its configuration was recorded anew."""

    kind: ClassVar[str] = "snapshot"
    target: str
    hash: str
    invocation: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class LaunchEvent(Event):
    """A start of vLLM began or changed outcome. `root_cause`: the signature id of the cause
    of a failure; `failed_before`: earlier launches that failed with that same root cause
    (above 0: it failed again)."""

    kind: ClassVar[str] = "launch"
    id: str
    source: str
    start_line: int
    outcome: Outcome
    snapshot: str | None = None
    root_cause: str | None = None
    failed_before: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class DiagnosisEvent(Event):
    """The cause of a launch's failure (of one of its incidents), worked out."""

    kind: ClassVar[str] = "diagnosis"
    launch: str
    incident: str | None = None
    cause: str
    title: str
    summary: str
    confidence: float


EVENTS: dict[str, type[Event]] = {cls.kind: cls for cls in (
    LinesEvent, FindingEvent, CommittedEvent, IncidentEvent, LibraryEvent,
    SignatureDisabledEvent, SnapshotEvent, LaunchEvent, DiagnosisEvent)}
EVENT_KINDS = frozenset(EVENTS)
ENVELOPE = frozenset({"event", "dropped_before"})  # on every event; not a publisher's fields


@dataclass(frozen=True, slots=True)
class _EventSpec:
    required: frozenset[str]
    optional: frozenset[str]
    defaults: dict[str, Any]
    choices: dict[str, frozenset[Any]]  # Literal-typed fields: the values allowed


def _event_spec(cls: type[Event]) -> _EventSpec:
    hints = typing.get_type_hints(cls)
    own = [f for f in dataclasses.fields(cls) if f.name not in ENVELOPE]
    return _EventSpec(
        frozenset(f.name for f in own if f.default is dataclasses.MISSING),
        frozenset(f.name for f in own if f.default is not dataclasses.MISSING),
        {f.name: f.default for f in own if f.default is not dataclasses.MISSING},
        {f.name: frozenset(typing.get_args(hints[f.name])) for f in own
         if typing.get_origin(hints[f.name]) is Literal})


_EVENT_SPECS = {kind: _event_spec(cls) for kind, cls in EVENTS.items()}


def event_message(kind: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The wire form of an event published as `publish(kind, **fields)`, the fields left out
    at their defaults; ProtocolError for an unknown kind, an unknown or missing field, or a
    value outside a field's choices."""
    spec = _EVENT_SPECS.get(kind)
    if spec is None:
        raise ProtocolError(f"unknown event kind {kind!r}; the kinds are: "
                            f"{', '.join(sorted(EVENT_KINDS))}")
    names = fields.keys()
    unknown = names - spec.required - spec.optional
    missing = spec.required - names
    if unknown or missing:
        raise ProtocolError(f"{kind} event: " + "; ".join(
            ([f"unknown field(s) {', '.join(sorted(unknown))}"] if unknown else [])
            + ([f"missing field(s) {', '.join(sorted(missing))}"] if missing else [])))
    for name, allowed in spec.choices.items():
        if name in fields and fields[name] not in allowed:
            raise ProtocolError(f"{kind} event: {name} {fields[name]!r} is not one of "
                                f"{', '.join(sorted(map(str, allowed)))}")
    message = {"event": kind, **fields}
    for name, default in spec.defaults.items():
        message.setdefault(name, default)
    return message


def to_message(event: Event) -> dict[str, Any]:
    """The wire form of a typed event (what the daemon sends)."""
    return {"event": event.kind, **{f.name: getattr(event, f.name)
                                    for f in dataclasses.fields(event)
                                    if f.name not in ENVELOPE}}


def parse_event(message: Mapping[str, Any]) -> Event:
    """A received event, typed. Fields this side does not know are ignored (a newer daemon
    may add some); a missing field or an unknown kind is a ProtocolError."""
    kind = message.get("event")
    cls = EVENTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(f"unknown event kind {kind!r}")
    spec = _EVENT_SPECS[cls.kind]
    missing = spec.required - message.keys()
    if missing:
        raise ProtocolError(f"{cls.kind} event without {', '.join(sorted(missing))}")
    known = {k: v for k, v in message.items() if k in spec.required or k in spec.optional}
    return cls(**known, dropped_before=int(message.get("dropped_before") or 0))


# -- answers ------------------------------------------------------------------------------
class ErrorAnswer(TypedDict):
    ok: Literal[False]
    error: str
    other_db: NotRequired[bool]  # the request named a database this daemon does not hold


class HelloAnswer(TypedDict):
    ok: Literal[True]
    version: str  # logwatch's
    protocol: int
    requests: list[str]
    events: list[str]
    db: str
    pid: int


class DatabaseState(TypedDict):
    path: str
    writable: bool
    error: NotRequired[str]
    failed_tries: NotRequired[int]
    since_s: NotRequired[float]
    reading: NotRequired[str]


class SourceState(TypedDict):
    name: str
    generation: str
    next_line: int
    idle_s: float
    behind_bytes: NotRequired[int]


class StatusBody(TypedDict):
    library: str
    reloading: bool
    lines: int
    findings_recorded: int
    pending: int
    uptime_s: float
    database: DatabaseState
    sources: list[SourceState]
    events: list[str]
    queries_running: int


class StatusAnswer(TypedDict):
    ok: Literal[True]
    status: StatusBody


class RowsAnswer(TypedDict):
    ok: Literal[True]
    columns: list[str]
    rows: list[list[Any]]
    truncated: str | None  # why the rows stop early, if they do


class SnapshotAnswer(TypedDict):
    ok: Literal[True]
    hash: str
    recorded: str
    snapshot: dict[str, Any]
    sources: dict[str, str]  # source or target -> hash, those running with this one


class ReloadAnswer(TypedDict):
    ok: Literal[True]
    events: list[str]


class SubscribedAnswer(TypedDict):
    ok: Literal[True]
    subscribed: Literal[True]


# -- requests -----------------------------------------------------------------------------
Check = Callable[[Any], str | None]  # the problem with a parameter's value, or None


def _param(expects: str, check: Check) -> dict[str, Any]:
    """A request parameter's metadata: what it must be, and the check that says so."""
    return {"expects": expects, "check": check}


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) else "a string"


def _optional_text(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else "a string"


def _limit(value: Any) -> str | None:
    whole = isinstance(value, int) and not isinstance(value, bool)
    return None if whole and 1 <= value <= 1000 else "a whole number from 1 to 1000"


def _event_kinds(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        return f"a list of event kinds, from {', '.join(sorted(EVENT_KINDS))}"
    unknown = [k for k in value if k not in EVENT_KINDS]
    if unknown:
        return (f"unknown event kind {unknown[0]!r}; the kinds are: "
                f"{', '.join(sorted(EVENT_KINDS))}")
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class Request:
    """Every request may name the database it means: a daemon holding another one answers
    `{"ok": false, "other_db": true}`."""

    op: ClassVar[str]
    answer: ClassVar[type]  # the TypedDict of a successful answer
    db: str | None = field(default=None, metadata=_param("a path", _optional_text))


@dataclass(frozen=True, kw_only=True, slots=True)
class HelloRequest(Request):
    """Who answers: logwatch's and the protocol's versions, the requests and events it
    knows, its database and process id. Clients say it first; it also tells them the daemon
    is ready."""

    op: ClassVar[str] = "hello"
    answer: ClassVar[type] = HelloAnswer


@dataclass(frozen=True, kw_only=True, slots=True)
class StatusRequest(Request):
    """What the daemon is doing: lines read, findings recorded and waiting, the database's
    state, each source's position and lag, recent events."""

    op: ClassVar[str] = "status"
    answer: ClassVar[type] = StatusAnswer


@dataclass(frozen=True, kw_only=True, slots=True)
class SqlRequest(Request):
    """One read-only SQL statement on the history, bounded in time, rows and bytes."""

    op: ClassVar[str] = "sql"
    answer: ClassVar[type] = RowsAnswer
    query: str = field(metadata=_param("a string holding one SQL statement", _text))


@dataclass(frozen=True, kw_only=True, slots=True)
class IncidentsRequest(Request):
    """The newest rows of `incident_timeline`."""

    op: ClassVar[str] = "incidents"
    answer: ClassVar[type] = RowsAnswer
    limit: int = field(default=20, metadata=_param("a whole number from 1 to 1000", _limit))


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotRequest(Request):
    """A recorded configuration snapshot (secrets masked): the one named by `hash`, else the
    newest; and the sources running with it."""

    op: ClassVar[str] = "snapshot"
    answer: ClassVar[type] = SnapshotAnswer
    hash: str | None = field(default=None, metadata=_param("a string", _optional_text))


@dataclass(frozen=True, kw_only=True, slots=True)
class ReloadRequest(Request):
    """Load the signature library again (as SIGHUP); answers with the latest events."""

    op: ClassVar[str] = "reload"
    answer: ClassVar[type] = ReloadAnswer


@dataclass(frozen=True, kw_only=True, slots=True)
class SubscribeRequest(Request):
    """Turn the connection into a stream of events of the kinds named (all when left out)."""

    op: ClassVar[str] = "subscribe"
    answer: ClassVar[type] = SubscribedAnswer
    events: list[str] | None = field(default=None,
                                     metadata=_param("a list of event kinds", _event_kinds))


REQUESTS: dict[str, type[Request]] = {cls.op: cls for cls in (
    HelloRequest, StatusRequest, SqlRequest, IncidentsRequest, SnapshotRequest, ReloadRequest,
    SubscribeRequest)}
OPS = tuple(REQUESTS)


def parameters(cls: type[Request]) -> tuple[dataclasses.Field[Any], ...]:
    """A request's parameters, `db` last."""
    own = dataclasses.fields(cls)
    return tuple(sorted(own, key=lambda f: f.name == "db"))


def parse_request(message: Mapping[str, Any]) -> Request:
    """A received request, checked: ProtocolError names the op, parameter and value wrong."""
    op = message.get("op")
    cls = REQUESTS.get(op) if isinstance(op, str) else None
    if cls is None:
        raise ProtocolError(f"unknown op {op!r}; the ops are: {', '.join(OPS)}")
    params = {f.name: f for f in parameters(cls)}
    unknown = sorted(k for k in message if k != "op" and k not in params)
    if unknown:
        raise ProtocolError(f"{op}: unknown parameter {unknown[0]!r}; it takes "
                            f"{', '.join(params)}")
    values = {}
    for name, spec in params.items():
        if name not in message:
            if spec.default is dataclasses.MISSING:
                raise ProtocolError(f"{name}: required, {spec.metadata['expects']}")
            continue
        problem = spec.metadata["check"](message[name])
        if problem is not None:
            raise ProtocolError(f"{name}: {problem}")
        values[name] = message[name]
    return cls(**values)


def request_message(op: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """A request on the wire, parameters left as None left out."""
    return {"op": op, **{k: v for k, v in params.items() if v is not None}}
