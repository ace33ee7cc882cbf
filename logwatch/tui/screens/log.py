"""The live log: lines as they arrive, matched ones drawn by severity; follows while at the
bottom (scrolling up pauses and counts new lines; End or G resumes); filter in (`/`) and
out (`\\`) by regex with a live count, by process (`p`: TP workers, engine cores); `e`/`E`
and `w`/`W` jump to the next/previous error and warning; `c` copies the line (OSC 52).
Lines the screen could not keep, and events the daemon dropped, are counted in view."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Input, Static

from logwatch.core.safe_text.visible import visible
from logwatch.tui.lines import ERRORS, FilterError, LineFilter
from logwatch.tui.messages import LinesChanged
from logwatch.tui.render import cell
from logwatch.tui.screens.base import AppScreen
from logwatch.tui.widgets.connection_bar import ConnectionBar
from logwatch.tui.widgets.log_view import LogView

WARNINGS = frozenset({"warning"})


class LogScreen(AppScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter('include')", "Filter", key_display="/"),
        Binding("backslash", "filter('exclude')", "Exclude", key_display="\\"),
        Binding("p", "process", "Process"),
        Binding("e", "jump('error', True)", "Error"),
        Binding("E", "jump('error', False)", "Prev error", show=False),
        Binding("w", "jump('warning', True)", "Next warning", show=False),
        Binding("W", "jump('warning', False)", "Prev warning", show=False),
        Binding("G,end", "follow", "Follow", key_display="G"),
        Binding("g,home", "top", "Top", show=False),
        Binding("c", "copy", "Copy line", show=False),
        Binding("escape", "clear", "Clear filter", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._editing: str | None = None  # which filter the input edits
        self._error = ""

    def compose(self) -> ComposeResult:
        yield ConnectionBar()
        yield LogView(self.lw.ring, id="log")
        yield Input(id="filter", classes="hidden")
        yield Static(id="log-status")
        yield Footer(compact=True, show_command_palette=False)  # fits 80 columns (? lists ctrl+p)

    def on_mount(self) -> None:
        self.query_one(LogView).focus()

    def draw(self) -> None:
        self.query_one(LogView).lines_arrived(0)
        self._draw_status()

    def lines_arrived(self, count: int) -> None:
        ring = self.lw.ring
        if ring.dropped_filter:  # a line it could not judge in time: every line again
            self._error, ring.dropped_filter = ring.dropped_filter, ""
            self.query_one(LogView).view_changed()
        self.query_one(LogView).lines_arrived(count)
        self._draw_status()

    def on_lines_changed(self, _: LinesChanged) -> None:
        self.draw()

    def on_log_view_moved(self, _: LogView.Moved) -> None:
        self._draw_status()

    def _draw_status(self) -> None:
        app, view = self.lw, self.query_one(LogView)
        ring = app.ring
        text = Text()
        if view.following:
            text.append(" ▼ following ", style="bold black on green")
        else:
            text.append(" ❚❚ paused ", style="bold black on yellow")
            if view.new_lines:
                text.append(f" {view.new_lines:,} new lines — End/G to follow ",
                            style="bold yellow")
        shown = len(ring)
        total = len(ring.lines)
        if ring.filter.active:
            text.append(f" {ring.filter.describe()}: ", style="cyan")
            text.append(f"{shown:,} of {total:,} lines ", style="bold cyan")
        else:
            text.append(f" {total:,} lines in view (newest {ring.capacity:,} kept) ")
        dropped = app.dropped_lines
        if dropped or app.dropped_events:
            text.append(f" dropped: {dropped:,} lines, {app.dropped_events:,} events ",
                        style="bold white on red")
        if self._error:
            text.append(" ")
            text.append(cell(self._error, "bold red"))
        self.query_one("#log-status", Static).update(text, layout=False)  # one row, always

    # -- filters ----------------------------------------------------------------------
    def action_filter(self, which: str) -> None:
        box = self.query_one("#filter", Input)
        self._editing = which
        box.placeholder = ("show only lines matching (regex)" if which == "include"
                           else "hide lines matching (regex)")
        box.value = getattr(self.lw.ring.filter, which)
        box.remove_class("hidden")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if self._editing is None:
            return
        self._apply(replace(self.lw.ring.filter, **{self._editing: event.value}))

    def on_input_submitted(self, _: Input.Submitted) -> None:
        self._close_input()

    def _close_input(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("hidden")
        self._editing = None
        self.query_one(LogView).focus()

    def _apply(self, new: LineFilter) -> None:
        try:
            self.lw.ring.set_filter(new)
        except FilterError as exc:
            self._error = str(exc)
        else:
            self._error = ""
            self.query_one(LogView).view_changed()
        self._draw_status()

    def action_clear(self) -> None:
        if self._editing is not None:
            self._close_input()
        self._apply(LineFilter())

    def action_process(self) -> None:
        """The next process the lines name (all of them after the last)."""
        processes = self.lw.ring.processes()
        current = self.lw.ring.filter.process
        if not processes:
            self.notify("no line names a process (TP worker, engine core)", timeout=3)
            return
        nxt = processes[0] if current not in processes else (
            processes[processes.index(current) + 1]
            if processes.index(current) + 1 < len(processes) else "")
        self._apply(replace(self.lw.ring.filter, process=nxt))  # the status bar names it

    # -- moving -------------------------------------------------------------------------
    def action_jump(self, kind: str, forward: bool) -> None:
        view = self.query_one(LogView)
        kinds = ERRORS if kind == "error" else WARNINGS
        if view.cursor is not None:
            start = view.cursor
        else:  # from the top of the screen down, or from its bottom up
            top = int(view.scroll_y)
            start = top - 1 if forward else min(len(self.lw.ring), top + view.size.height)
        row = self.lw.ring.find(start, kinds, forward)
        if row is None:
            self.notify(f"no {'next' if forward else 'previous'} {kind}", timeout=2)
            return
        view.jump(row)

    def action_follow(self) -> None:
        self.query_one(LogView).follow()

    def action_top(self) -> None:
        view = self.query_one(LogView)
        view.following = False
        view.scroll_home(animate=False, immediate=True)

    def action_copy(self) -> None:
        view = self.query_one(LogView)
        if not len(self.lw.ring):
            return
        line = self.lw.ring.row(view.current_row())
        # as shown: a control character in a log line must not reach the terminal that
        # pastes it (a bracketed-paste end, a clipboard write of its own)
        self.app.copy_to_clipboard(visible(line.text))
        self.notify(f"line {line.number} copied (OSC 52)", timeout=2)
