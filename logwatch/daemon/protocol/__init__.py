"""The control socket's vocabulary: every request with its parameters and answer, every event
with its fields, and the protocol version. Pure data and checks, no I/O: the server
(daemon/control.py), the client (daemon/client.py), the reference in docs/daemon.md
(`reference`) and the TUI all read it from here.

On the wire: one JSON object per line each way. A request is `{"op": OP, **params}`, its answer
`{"ok": true, ...}` or `{"ok": false, "error": "..."}`; `subscribe` turns the connection into a
stream of events, each `{"event": KIND, **fields}`.
"""

from logwatch.daemon.protocol.base import PROTOCOL_VERSION, ProtocolError
from logwatch.daemon.protocol.events import (
    ENVELOPE,
    EVENT_KINDS,
    EVENTS,
    CommittedEvent,
    CommittedFinding,
    DiagnosisEvent,
    Event,
    FindingEvent,
    IncidentEvent,
    LaunchEvent,
    LibraryEvent,
    LinesEvent,
    Outcome,
    SignatureDisabledEvent,
    SnapshotEvent,
    event_message,
    parse_event,
    to_message,
)
from logwatch.daemon.protocol.requests import (
    OPS,
    REQUESTS,
    DatabaseState,
    ErrorAnswer,
    HelloAnswer,
    HelloRequest,
    IncidentsRequest,
    ReloadAnswer,
    ReloadRequest,
    Request,
    RowsAnswer,
    SnapshotAnswer,
    SnapshotRequest,
    SourceState,
    SqlRequest,
    StatusAnswer,
    StatusBody,
    StatusRequest,
    SubscribedAnswer,
    SubscribeRequest,
    parameters,
    parse_request,
    request_message,
)

__all__ = [
    "ENVELOPE", "EVENTS", "EVENT_KINDS", "OPS", "PROTOCOL_VERSION", "REQUESTS",
    "CommittedEvent", "CommittedFinding", "DatabaseState", "DiagnosisEvent", "ErrorAnswer",
    "Event", "FindingEvent", "HelloAnswer", "HelloRequest", "IncidentEvent", "IncidentsRequest",
    "LaunchEvent", "LibraryEvent", "LinesEvent", "Outcome", "ProtocolError", "ReloadAnswer",
    "ReloadRequest", "Request", "RowsAnswer", "SignatureDisabledEvent", "SnapshotAnswer",
    "SnapshotEvent", "SnapshotRequest", "SourceState", "SqlRequest", "StatusAnswer",
    "StatusBody", "StatusRequest", "SubscribeRequest", "SubscribedAnswer", "event_message",
    "parameters", "parse_event", "parse_request", "request_message", "to_message",
]
