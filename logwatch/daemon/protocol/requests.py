"""The requests the control socket answers, each a frozen dataclass of its parameters (with
what each must be), and the TypedDict of its answer. On the wire a request is
`{"op": OP, **params}` and its answer `{"ok": true, ...}` or `{"ok": false, "error": ...}`;
`parse_request` checks what a client sends.

No `from __future__ import annotations`: the TypedDicts' NotRequired keys and the parameters'
types are read at run time, which string annotations break.
"""

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NotRequired, TypedDict

from logwatch.daemon.protocol.base import OPERATORS, READERS, ProtocolError
from logwatch.daemon.protocol.events import EVENT_KINDS, Outcome


class ErrorAnswer(TypedDict):
    ok: Literal[False]
    error: str
    other_db: NotRequired[bool]  # the request named a database this daemon does not hold
    denied: NotRequired[bool]  # the connecting user may not ask this (the error says who may)


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
    """A configured source (a glob's files each have their own): daemon/source_states.py."""

    name: str
    kind: str  # file | glob | journal | run | stdin
    path: NotRequired[str]  # a file's path, a glob's pattern
    # following | catching_up | lagging | missing | unreadable | held | running | exited |
    # starting
    state: str
    detail: str  # the state in the operator's words
    behind_bytes: NotRequired[int]  # a file's: bytes at its path not read yet
    progress: NotRequired[float]  # catching_up: 0..1 of the file read
    generation: str | None  # what is read now (None: nothing read since the daemon started)
    next_line: int
    idle_s: float | None  # since data was last read (None: none since the daemon started)
    vllm_output: NotRequired[bool]  # false: no line read so far was vLLM's (not "healthy")


class LaunchState(TypedDict):
    """A source's current launch."""

    id: str
    source: str
    number: int
    start_line: int
    outcome: Outcome
    root_cause: str | None
    failed_before: int
    fatal_incidents: NotRequired[int]  # in this launch, as last analysed
    # titles of the problems its snapshot shows that its log has not reached yet
    latent: NotRequired[list[str]]


class RelaunchState(TypedDict):
    """The daemon's relaunches: actions not finished, the latest ones that ended (newest
    last, at most 5: the history has them all), the one running per target, and each
    target's breaker (open: only `reset_breaker` closes it)."""

    actions: list[dict[str, str]]
    ended: list[dict[str, str]]
    running: dict[str, str]
    breakers: dict[str, bool]


class StatusBody(TypedDict):
    version: str  # logwatch's
    protocol: int  # the control protocol's version (PROTOCOL_VERSION)
    library: str
    reloading: bool
    lines: int
    findings_recorded: int
    pending: int
    uptime_s: float
    database: DatabaseState
    sources: list[SourceState]
    launches: list[LaunchState]
    failed_launches: int  # since the daemon started
    last_failure: str | None  # the newest, as the operator reads it
    events: list[str]
    queries_running: int
    relaunch: NotRequired[RelaunchState]  # when a target's relaunch policy may act


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


class ActionAnswer(TypedDict):
    ok: Literal[True]
    id: str
    state: str  # where the action is after the request (approved ones may be running)
    reason: str  # its last move's


class BreakerAnswer(TypedDict):
    ok: Literal[True]
    target: str
    was_open: bool


class SignatureState(TypedDict):
    id: str
    version: int
    status: str  # stable, experimental, deprecated
    severity: str
    fatal: bool
    category: str
    title: str
    path: str
    disabled: str | None  # why the matcher gave up on it until the next reload


class SignaturesAnswer(TypedDict):
    ok: Literal[True]
    library: str  # the version loaded
    signatures: list[SignatureState]


class SourceLines(TypedDict):
    source: str
    first_line: int  # the number of text's first line
    text: str  # whole lines, secrets masked


class RecentLinesAnswer(TypedDict):
    ok: Literal[True]
    lines: list[SourceLines]  # a source's lines at most once, in no particular order


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
    who: ClassVar[str] = READERS  # who may ask it (base.READERS, base.OPERATORS)
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
    """What the daemon is doing: its and the protocol's versions, lines read, findings
    recorded and waiting, the database's state, each configured source with its state
    (following, catching up, lagging, missing, unreadable, held), position and lag, each
    source's newest launch, recent events."""

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
class SignaturesRequest(Request):
    """The library loaded now: each signature's id, version, status, severity and title, and
    whether the matcher disabled it (hit counts are in the history: `findings`)."""

    op: ClassVar[str] = "signatures"
    answer: ClassVar[type] = SignaturesAnswer


@dataclass(frozen=True, kw_only=True, slots=True)
class ReloadRequest(Request):
    """Load the signature library again (as SIGHUP); answers with the latest events."""

    op: ClassVar[str] = "reload"
    answer: ClassVar[type] = ReloadAnswer


def _action_id(value: Any) -> str | None:
    ok = isinstance(value, str) and 0 < len(value) <= 200 and value.isprintable()
    return None if ok else "an action id (printable, at most 200 characters)"


def _reason(value: Any) -> str | None:
    ok = value is None or (isinstance(value, str) and len(value) <= 2000)
    return None if ok else "a string of at most 2000 characters"


@dataclass(frozen=True, kw_only=True, slots=True)
class _ActionRequest(Request):
    """An operator's word on one action; who said it is the connecting user (from the
    socket's credentials), never a name the request carries."""

    answer: ClassVar[type] = ActionAnswer
    who: ClassVar[str] = OPERATORS
    id: str = field(metadata=_param("an action id", _action_id))
    reason: str | None = field(default=None, metadata=_param("a string", _reason))


@dataclass(frozen=True, kw_only=True, slots=True)
class ApproveRequest(_ActionRequest):
    """Approve an action awaiting approval (policy `ask`); the guardrails still decide when
    it runs. The approver recorded is the connecting user (from the socket's credentials)."""

    op: ClassVar[str] = "approve"


@dataclass(frozen=True, kw_only=True, slots=True)
class RejectRequest(_ActionRequest):
    """Reject an action that has not started (proposed, awaiting approval, approved,
    blocked)."""

    op: ClassVar[str] = "reject"


@dataclass(frozen=True, kw_only=True, slots=True)
class ResetBreakerRequest(Request):
    """Close a target's circuit breaker (opened by repeated failed relaunches); its blocked
    actions are decided again."""

    op: ClassVar[str] = "reset_breaker"
    answer: ClassVar[type] = BreakerAnswer
    who: ClassVar[str] = OPERATORS
    target: str = field(metadata=_param("a target name", _action_id))
    reason: str | None = field(default=None, metadata=_param("a string", _reason))


@dataclass(frozen=True, kw_only=True, slots=True)
class RecentLinesRequest(Request):
    """The last lines read from each source (at most `limit` per source, and 64 KiB; the
    daemon keeps the last 500), secrets masked: what a client shows of the log before the
    `lines` events it subscribed to. Its lines overlap those events where they meet: the
    line numbers tell them apart."""

    op: ClassVar[str] = "recent_lines"
    answer: ClassVar[type] = RecentLinesAnswer
    limit: int = field(default=200, metadata=_param("a whole number from 1 to 1000", _limit))


@dataclass(frozen=True, kw_only=True, slots=True)
class SubscribeRequest(Request):
    """Turn the connection into a stream of events of the kinds named (all when left out)."""

    op: ClassVar[str] = "subscribe"
    answer: ClassVar[type] = SubscribedAnswer
    events: list[str] | None = field(default=None,
                                     metadata=_param("a list of event kinds", _event_kinds))


REQUESTS: dict[str, type[Request]] = {cls.op: cls for cls in (
    HelloRequest, StatusRequest, SqlRequest, IncidentsRequest, SnapshotRequest,
    SignaturesRequest, ReloadRequest, ApproveRequest, RejectRequest, ResetBreakerRequest,
    RecentLinesRequest, SubscribeRequest)}
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
