"""The logwatch TUI: one app, four screens reached by one key each (dashboard `d`, live log
`l`, history `h`, signatures `s`), an incident's detail on `enter`, `?` for the keys.

A worker follows the daemon's events (reconnecting, with the time it went down shown);
lines go into a bounded ring and reach the screen in batches every 100 ms; everything
else marks the dashboard stale, and it is read again at most twice a second. With no daemon
the history is read read-only, once and on `r`; the worker keeps trying the socket and
switches to it when a daemon answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.screen import Screen

from logwatch.core.safe_text.visible import visible
from logwatch.daemon.client import DaemonUnavailable, ProtocolMismatch, Subscription
from logwatch.daemon.protocol import (
    ActionEvent,
    DiagnosisEvent,
    Event,
    FindingEvent,
    IncidentEvent,
    LaunchEvent,
    LibraryEvent,
    LinesEvent,
    SignatureDisabledEvent,
    SnapshotEvent,
)
from logwatch.tui import queries
from logwatch.tui.backend import Backend, BackendError, HistoryBackend, SocketBackend
from logwatch.tui.board import (
    ACTION_TONE,
    LAUNCH_TONE,
    incident_rows,
    pending_actions,
    recent_activity,
    target_of,
    target_rows,
)
from logwatch.tui.lines import RING_LINES, Line, LineRing, Mark, split_lines
from logwatch.tui.messages import BoardChanged, ConnectionChanged, LinesChanged
from logwatch.tui.state import DOWN, HISTORY, LIVE, Activity, AppView, Board, Connection

FLUSH_S = 0.1  # lines reach the screen at most this often
REFRESH_S = 0.5  # the dashboard is read again at most this often
IDLE_REFRESH_S = 5.0  # and this often when nothing happens (uptimes, lag)
RETRY_S = 1.0  # between tries of a socket no daemon answers
SEED_LINES = 500  # of each source, read before the TUI connected, shown first


class LogwatchApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "logwatch"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "show('dashboard')", "Dash", tooltip="the dashboard"),
        Binding("l", "show('log')", "Log", tooltip="the live log"),
        Binding("h", "show('history')", "History", tooltip="timeline and SQL"),
        Binding("s", "show('signatures')", "Sigs", tooltip="the signature library"),
        Binding("question_mark", "help", "Keys", key_display="?"),
        Binding("r", "refresh", "Refresh", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, socket: Path, db: Path | None = None, *, read_only: bool = False,
                 library_dirs: Iterable[Path] = (), ring_lines: int = RING_LINES,
                 clock: Callable[[], datetime] = datetime.now, connect: bool = True) -> None:
        super().__init__()
        _start_resource_tracker()
        self.socket, self.db = socket, db
        self.read_only = read_only
        self.library_dirs = tuple(library_dirs)
        self.clock = clock
        self.ring = LineRing(ring_lines)
        self.pending: list[Line] = []
        self.dropped_events = 0  # events the daemon dropped for this subscriber
        self.dropped_lines = 0  # lines read but not in a `lines` event (over 64 KiB)
        self.board = Board()
        self.activity = Activity()
        self.connection = Connection()
        self.signature_states: dict[str, Any] | None = None
        self.last_reload: tuple[datetime, bool, str] | None = None  # when, loaded, what
        self.backend: Backend | None = None
        self._connect = connect
        self.connection_at: datetime | None = None
        self._dirty = True
        self._refreshing = False
        self._last_refresh = 0.0

    # -- screens ------------------------------------------------------------------------
    def on_mount(self) -> None:
        from logwatch.tui.screens.dashboard import DashboardScreen
        from logwatch.tui.screens.history import HistoryScreen
        from logwatch.tui.screens.log import LogScreen
        from logwatch.tui.screens.signatures import SignaturesScreen

        self.add_mode("dashboard", DashboardScreen)
        self.add_mode("log", LogScreen)
        self.add_mode("history", HistoryScreen)
        self.add_mode("signatures", SignaturesScreen)
        self.switch_mode("dashboard")
        # what exists once the first screen is drawn (modules, classes, Textual's and
        # DuckDB's objects) lives as long as the app: out of the collector's full passes,
        # which otherwise walk all of it every second or two under load, a 60-70 ms frame
        self.call_after_refresh(gc.freeze)
        self.set_interval(FLUSH_S, self._flush_lines)
        self.set_interval(IDLE_REFRESH_S, self._idle_tick)
        if self._connect:
            self.run_worker(self._watch(), name="watch", group="watch", exclusive=True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # the screen on show: its own key is not in the footer
        return not (action == "show" and parameters and parameters[0] == self.current_mode
                    and len(self.screen_stack) == 1)

    def action_show(self, mode: str) -> None:
        if self.current_mode != mode:
            self.switch_mode(mode)
        else:  # back from an incident to its dashboard
            while len(self.screen_stack) > 1:
                self.pop_screen()

    def action_help(self) -> None:
        from logwatch.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_refresh(self) -> None:
        self._dirty = True
        self._maybe_refresh(force=True)
        if self.current_mode == "signatures":
            self.load_signatures()

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for mode, what in (("dashboard", "targets, incidents, the pending plan"),
                           ("log", "the live log"), ("history", "timeline and SQL"),
                           ("signatures", "the library and its hits")):
            yield SystemCommand(f"Show {mode}", what, lambda m=mode: self.action_show(m))
        if self.can_act:
            yield SystemCommand("Approve the pending plan", "after a confirmation",
                                lambda: self._on_dashboard("approve"))
            yield SystemCommand("Reject the pending plan", "after a confirmation",
                                lambda: self._on_dashboard("reject"))
        for name in queries.PRESETS:
            yield SystemCommand(f"SQL: {name}", "run the preset on the history screen",
                                lambda n=name: self._run_preset(n))

    def _on_dashboard(self, verb: str) -> None:
        self.action_show("dashboard")
        self.call_after_refresh(lambda: self.screen.run_action(verb))

    def _run_preset(self, name: str) -> None:
        self.action_show("history")

        def run() -> None:
            from logwatch.tui.screens.history import HistoryScreen

            if isinstance(self.screen, HistoryScreen):
                self.screen.run_preset(name)
        self.call_after_refresh(run)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every toast is plain text, whoever asks (widgets ask with markup on): what they
        say comes from logs, targets, paths and the daemon's errors, never markup."""
        del markup
        super().notify(visible(message, lines=True), title=visible(title),
                       severity=severity, timeout=timeout, markup=False)

    @property
    def can_act(self) -> bool:
        """Approve/reject are offered: not --read-only, and a daemon answers."""
        return not self.read_only and self.backend is not None and self.backend.can_act

    def broadcast(self, message_type: type[BoardChanged | ConnectionChanged | LinesChanged]
                  ) -> None:
        """Tell the screen on show (others read the state when they are shown again)."""
        try:
            screen = self.screen
        except ScreenStackError:  # closing: a refresh that finished after the last screen
            return
        screen.post_message(message_type())

    # -- the daemon's events --------------------------------------------------------------
    async def _watch(self) -> None:
        first = True
        while True:
            subscription = Subscription(self.socket, None, timeout=15.0)
            try:
                hello = await subscription.start()
            except (DaemonUnavailable, OSError, TimeoutError) as exc:
                if first:
                    await self._without_daemon("")
                elif self.connection.kind == LIVE:
                    self._went_down()
                first = False
                del exc
                await asyncio.sleep(RETRY_S)
                continue
            except ProtocolMismatch as exc:  # never retried: another logwatch
                await self._without_daemon(str(exc))
                return
            except Exception as exc:  # an untrusted socket path or owner
                await self._without_daemon(f"{self.socket} not used: {exc}")
                return
            first = False
            await self._went_live(dict(hello))
            try:
                async for event in subscription:
                    self._on_event(event)  # type: ignore[arg-type]
            except (DaemonUnavailable, OSError):
                pass
            finally:
                await subscription.close()
            self._went_down()

    async def _without_daemon(self, problem: str) -> None:
        """No daemon: the history file, read-only, when there is one."""
        if self.db is not None and self.db.exists():
            self.backend = HistoryBackend(self.db, self.library_dirs)
            self.connection = Connection(HISTORY, self.backend.where, problem=problem)
        else:
            self.backend = None
            where = f"no daemon on {self.socket}" + (f" and no history at {self.db}"
                                                      if self.db is not None else "")
            self.connection = Connection(HISTORY, where, problem=problem)
        self._note("idle", self.connection.describe(self.clock()))
        self.broadcast(ConnectionChanged)
        self._dirty = True
        self._maybe_refresh(force=True)

    async def _went_live(self, hello: dict[str, Any]) -> None:
        if self.backend is not None:
            await self.backend.close()
        self.backend = SocketBackend(self.socket, hello)
        was_down = self.connection.kind == DOWN
        self.connection_at = self.clock()
        self.connection = Connection(LIVE, self.backend.where)
        self._note("good", ("reconnected to " if was_down else "connected to ")
                          + f"the daemon (pid {hello.get('pid')})")
        self.broadcast(ConnectionChanged)
        self._dirty = True
        self._maybe_refresh(force=True)
        self.load_signatures()
        if not was_down:
            self.run_worker(self._seed_activity(), group="seed")
            self.run_worker(self._seed_lines(), group="seed-lines")

    async def _seed_activity(self) -> None:
        """What the history says happened lately, before this TUI connected."""
        backend = self.backend
        if backend is None:
            return
        try:
            rows = (await backend.sql(queries.RECENT)).dicts()
        except BackendError:
            return
        connected = self.connection_at or self.clock()
        live = list(self.activity.entries)
        told = {text for _, _, text in live}  # an event that came while this was read
        seeded = [(at, tone, text) for at, tone, text in recent_activity(rows)
                  if at is not None and at < connected and text not in told]
        self.activity.entries.clear()
        for entry in sorted(seeded + live, key=lambda e: e[0]):
            self.activity.entries.append(entry)
        self.broadcast(BoardChanged)

    async def _seed_lines(self) -> None:
        """The lines the daemon read before this TUI subscribed, before those since."""
        backend = self.backend
        if backend is None:
            return
        try:
            recent = await backend.recent_lines(min(SEED_LINES, self.ring.capacity))
        except BackendError:
            return
        older = [line for part in recent for line in split_lines(
            str(part["source"]), int(part["first_line"]), str(part["text"]))]
        self._flush_lines()  # the lines subscribed to so far: those the seed stops at
        if self.ring.seed(older):
            self.broadcast(LinesChanged)

    def _went_down(self) -> None:
        if self.connection.kind == DOWN:
            return
        self.connection = Connection(DOWN, self.connection.where, since=self.clock())
        self._note("bad", "the daemon went away; reconnecting")
        self.broadcast(ConnectionChanged)

    def _note(self, tone: str, text: str) -> None:
        self.activity.add(tone, text, self.clock())

    def _on_event(self, event: Event) -> None:
        self.dropped_events += event.dropped_before
        if isinstance(event, LinesEvent):
            lines = split_lines(event.source, event.first_line, event.text)
            if event.count > len(lines):
                self.dropped_lines += event.count - len(lines)
            self.pending.extend(lines)
            return
        if isinstance(event, FindingEvent):
            self.ring.mark(event.source, event.line, Mark(
                event.signature, event.severity, tuple(event.captures.values())))
            return
        if isinstance(event, ActionEvent):
            self._note(ACTION_TONE.get(event.state, "busy"),
                       f"{event.target}: action {event.id} {event.state} ({event.actor}): "
                       f"{event.reason}")
            if event.state in ("awaiting_approval", "succeeded", "escalated"):
                self.notify(f"{event.target}: {event.state.replace('_', ' ')}",
                            severity="error" if event.state == "escalated" else "information")
        elif isinstance(event, LaunchEvent):
            tone = LAUNCH_TONE.get(event.outcome, "busy")
            cause = f" — root cause {event.root_cause}" if event.root_cause else ""
            again = f" (failed {event.failed_before} time(s) before)" \
                if event.failed_before else ""
            self._note(tone, f"{target_of(event.source)}: launch {event.outcome}"
                                    f"{cause}{again}")
        elif isinstance(event, DiagnosisEvent):
            self._note("ask", f"diagnosis: {event.title}")
        elif isinstance(event, IncidentEvent) and event.fatal:
            self._note("bad", f"fatal incident {event.signature}")
        elif isinstance(event, SnapshotEvent):
            self._note("busy", f"{event.target}: configuration {event.hash[:12]} "
                                      "recorded")
        elif isinstance(event, LibraryEvent):
            text = (f"library {event.version} loaded ({event.signatures} signatures)"
                    if event.loaded else f"library reload refused: {event.error}")
            self._note("good" if event.loaded else "bad", text)
            self.last_reload = (self.clock(), event.loaded, text)
            self.notify(text, severity="information" if event.loaded else "error")
            self.load_signatures()
        elif isinstance(event, SignatureDisabledEvent):
            self.notify(f"signature {event.signature} disabled: {event.reason}",
                        severity="warning")
            self.load_signatures()
        self._dirty = True
        self._maybe_refresh()

    # -- batching -------------------------------------------------------------------------
    def _flush_lines(self) -> None:
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        dropped_before = self.ring.dropped
        self.ring.add(batch)
        self.dropped_lines += self.ring.dropped - dropped_before
        from logwatch.tui.screens.log import LogScreen

        if isinstance(self.screen, LogScreen):
            self.screen.lines_arrived(len(batch))

    def _idle_tick(self) -> None:
        if self.connection.kind == LIVE:
            self._dirty = True
            self._maybe_refresh()
        elif self.connection.kind == DOWN:
            self.broadcast(ConnectionChanged)  # the seconds since it went down

    def _maybe_refresh(self, force: bool = False) -> None:
        loop = asyncio.get_running_loop()
        if self._refreshing or not self._dirty:
            return
        wait = self._last_refresh + REFRESH_S - loop.time()
        if wait > 0 and not force:
            self.set_timer(wait, self._maybe_refresh)
            return
        self._refreshing, self._dirty = True, False
        self._last_refresh = loop.time()
        self.run_worker(self._refresh(), group="refresh")

    async def _refresh(self) -> None:
        try:
            backend = self.backend
            if backend is None:
                return
            try:
                self.board = await read_board(backend, self.clock())
            except BackendError as exc:
                self.board.error = str(exc)
            self.broadcast(BoardChanged)
        finally:
            self._refreshing = False
            if self._dirty and self.connection.kind == LIVE:
                self._maybe_refresh()

    def load_signatures(self) -> None:
        self.run_worker(self._signatures(), group="signatures", exclusive=True)

    async def _signatures(self) -> None:
        from logwatch.tui.messages import SignaturesChanged

        backend = self.backend
        if backend is None:
            return
        try:
            states = await backend.signatures()
            hits = await backend.sql(queries.SIGNATURE_HITS)
        except BackendError as exc:
            self.signature_states = {"error": str(exc)}
        else:
            self.signature_states = {**states, "hits": {r["signature"]: r for r in
                                                        hits.dicts()}}
        self.broadcast(SignaturesChanged)  # type: ignore[arg-type]

    # -- acting -------------------------------------------------------------------------
    async def act(self, op: str, **params: Any) -> tuple[bool, str]:
        """An operator's word through the socket: (done, what the daemon said)."""
        if not self.can_act or self.backend is None:
            return False, "read-only: nothing is sent to the daemon"
        try:
            answer = await self.backend.act(op, **params)
        except BackendError as exc:
            return False, str(exc)
        self._dirty = True
        self._maybe_refresh(force=True)
        if answer.get("ok"):
            return True, f"{answer.get('id', params.get('id'))}: {answer.get('state')} — " \
                         f"{answer.get('reason', '')}"
        return False, str(answer.get("error"))


def _as_view(app: LogwatchApp) -> AppView:
    """Never called: here mypy checks that the app still is what screens see of it, so a
    drift between LogwatchApp and AppView is a type error."""
    return app


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker now, while stderr is still the terminal's:
    the bounded signature check (with no daemon, the signatures screen loads the library
    itself) starts a child whose tracker would otherwise be handed the stderr Textual puts
    in place while it runs, which has no descriptor, and the start fails."""
    from multiprocessing import resource_tracker

    with contextlib.suppress(OSError, ValueError):
        resource_tracker.ensure_running()


async def read_board(backend: Backend, now: datetime) -> Board:
    """The dashboard's data, read in one go."""
    status = await backend.status()
    targets = (await backend.sql(queries.TARGETS)).dicts()
    incidents = (await backend.sql(queries.OPEN_INCIDENTS)).dicts()
    last = {str(r["target"]): str(r["state"]) for r in
            (await backend.sql(queries.LAST_ACTIONS)).dicts() if r["target"]}
    history_actions = [] if status is not None else \
        (await backend.sql(queries.OPEN_ACTIONS)).dicts()
    actions = pending_actions(status, history_actions)
    board = Board(targets=target_rows(targets, status, last, now),
                  incidents=incident_rows(incidents), actions=actions, status=status,
                  read=now)
    if actions:
        rows = (await backend.sql(queries.action_plan(actions[0].id))).dicts()
        if rows:
            board.plan = queries.json_value(rows[0]["plan"])  # type: ignore[assignment]
            board.plan_action = actions[0].id
            model = next((t for t in board.targets if t.target == actions[0].target), None)
            board.model = None if model is None else await _model_of(backend, model.launch_id)
    return board


async def _model_of(backend: Backend, launch_id: str | None) -> str | None:
    if launch_id is None:
        return None
    with contextlib.suppress(BackendError):
        rows = (await backend.sql(
            "SELECT s.model FROM launches l JOIN snapshots s ON s.hash = l.snapshot_hash "
            f"WHERE l.id = {queries.literal(launch_id)}")).rows
        return str(rows[0][0]) if rows and rows[0][0] else None
    return None
