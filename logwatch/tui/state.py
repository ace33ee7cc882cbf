"""The app's state that screens read: the connection, the dashboard's data, what happened
recently, as plain dataclasses, and `AppView`, all a screen sees of the app. No Textual."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from logwatch.tui.backend import Backend
from logwatch.tui.board import IncidentRow, PendingAction, TargetRow
from logwatch.tui.lines import LineRing

LIVE, HISTORY, DOWN, CONNECTING = "live", "history", "down", "connecting"


@dataclass
class Connection:
    kind: str = CONNECTING
    where: str = ""
    since: datetime | None = None  # when it went down
    problem: str = ""  # why the socket was not used (untrusted, other protocol)

    def describe(self, now: datetime) -> str:
        if self.kind == LIVE:
            return f"● live · {self.where}"
        if self.kind == DOWN and self.since is not None:
            return (f"○ disconnected since {self.since:%H:%M:%S} "
                    f"({int((now - self.since).total_seconds())} s) · reconnecting · "
                    "showing what was last read")
        if self.kind == HISTORY:
            return f"◌ {self.where}" + (f" · {self.problem}" if self.problem else "")
        return "… connecting"


@dataclass
class Board:
    targets: list[TargetRow] = field(default_factory=list)
    incidents: list[IncidentRow] = field(default_factory=list)
    actions: list[PendingAction] = field(default_factory=list)
    plan: dict[str, Any] | None = None  # of the first open action
    plan_action: str | None = None
    model: str | None = None  # the model the plan's launch served
    status: dict[str, Any] | None = None
    error: str = ""  # the last refresh's failure, shown, the previous data kept
    read: datetime | None = None


@dataclass
class Activity:
    """What happened, newest last, for the dashboard (bounded)."""

    entries: deque[tuple[datetime, str, str]] = field(
        default_factory=lambda: deque(maxlen=200))

    def add(self, tone: str, text: str, now: datetime | None = None) -> None:
        self.entries.append((now or datetime.now(), tone, text))


class AppView(Protocol):
    """What a screen sees of the app: its state, read only, and the two things a screen may
    ask of it (read the signatures again, send an operator's word). The app satisfies it
    structurally; screens know this and never the app, so the app alone knows the screens."""

    @property
    def connection(self) -> Connection: ...
    @property
    def board(self) -> Board: ...
    @property
    def activity(self) -> Activity: ...
    @property
    def ring(self) -> LineRing: ...
    @property
    def dropped_events(self) -> int: ...
    @property
    def dropped_lines(self) -> int: ...
    @property
    def signature_states(self) -> dict[str, Any] | None: ...
    @property
    def last_reload(self) -> tuple[datetime, bool, str] | None: ...
    @property
    def backend(self) -> Backend | None: ...
    @property
    def can_act(self) -> bool: ...
    @property
    def clock(self) -> Callable[[], datetime]: ...

    def load_signatures(self) -> None: ...

    async def act(self, op: str, **params: Any) -> tuple[bool, str]: ...
