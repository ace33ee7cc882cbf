"""The events a subscription carries, each a frozen dataclass with its fields: on the wire
`{"event": KIND, **fields}`, plus `dropped_before: N` when N events before it did not fit the
subscriber's queue. `event_message` checks what a publisher sends, `parse_event` reads what a
client receives.

No `from __future__ import annotations`: field types are read at run time (the choices of a
Literal field, the reference in docs/daemon.md).
"""

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypedDict

from logwatch.daemon.protocol.base import ProtocolError


class CommittedFinding(TypedDict):
    source: str
    line: int
    signature: str


# a launch's outcome: core/launches/lifecycle.py's state machine
Outcome = Literal["starting", "serving", "failed", "stopped", "crashed", "replaced"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """Every event. `dropped_before` is set by the daemon, never by a publisher."""

    kind: ClassVar[str]
    dropped_before: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class LinesEvent(Event):
    """What was read: the whole lines that fit in 64 KiB, secrets masked (a single longer
    line is shown as its length only). `count`: how many lines were read, more than `text`
    holds when they did not fit (0 from a daemon older than this field)."""

    kind: ClassVar[str] = "lines"
    source: str
    first_line: int
    text: str
    count: int = 0


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
    belongs to, `again`: the same failure ended an earlier launch too, `source`: what the
    launch was read from (the configured source, e.g. `qwen:journal:-u vllm.service`)."""

    kind: ClassVar[str] = "incident"
    id: str
    signature: str
    fatal: bool
    launch: str | None = None
    again: bool = False
    source: str | None = None


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
    """The cause of a launch's failure (of one of its incidents), worked out; or a latent
    problem its snapshot shows (no incident, cause `latent_...`)."""

    kind: ClassVar[str] = "diagnosis"
    launch: str
    incident: str | None = None
    cause: str
    title: str
    summary: str
    confidence: float


ActionState = Literal["proposed", "awaiting_approval", "approved", "rejected", "expired",
                      "blocked", "applying", "restarting", "verifying", "succeeded",
                      "verify_failed", "rolling_back", "rolled_back", "rollback_failed",
                      "escalated"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ActionEvent(Event):
    """A relaunch action moved (each move is also in `action_transitions`): who moved it
    (`policy`, `executor` or `operator:<user>`) and why. `awaiting_approval` waits for
    `approve`; `escalated` means a person must look."""

    kind: ClassVar[str] = "action"
    id: str
    target: str
    state: ActionState
    actor: str
    reason: str
    plan: str
    signature: str
    time: str  # ISO 8601, the daemon's local time


EVENTS: dict[str, type[Event]] = {cls.kind: cls for cls in (
    LinesEvent, FindingEvent, CommittedEvent, IncidentEvent, LibraryEvent,
    SignatureDisabledEvent, SnapshotEvent, LaunchEvent, DiagnosisEvent, ActionEvent)}
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
