"""The history: incidents per signature over the last two days as sparklines, and a SQL pane
(read-only, as `logwatch sql`): presets for the views, results in a table, errors inline,
`ctrl+s` writes the result to a CSV file in the current directory."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Button, DataTable, Footer, Input, Static

from logwatch.tui import queries
from logwatch.tui.backend import BackendError, Rows
from logwatch.tui.board import timeline
from logwatch.tui.render import cell
from logwatch.tui.screens.base import AppScreen
from logwatch.tui.widgets.connection_bar import ConnectionBar
from logwatch.tui.widgets.fitted_table import fill

CHART_ROWS = 8  # signatures on the chart: the root causes and the worst first


class HistoryScreen(AppScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f5", "run_query", "Run"),
        Binding("ctrl+s", "export", "Export CSV"),
        Binding("i", "edit", "Edit query", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.result: Rows | None = None
        self.chart: list[tuple[str, str, int]] = []  # (signature, sparkline, total) shown

    def compose(self) -> ComposeResult:
        yield ConnectionBar()
        yield Static(id="sparklines")
        with Horizontal(id="presets"):
            for name in queries.PRESETS:
                yield Button(name, id=f"preset-{name}", compact=True)
        yield Input(queries.PRESETS["failures_by_config"], id="query",
                    placeholder="SELECT ... (Enter or F5 runs it; read-only)")
        yield Static(id="sql-error")
        yield DataTable(id="result", zebra_stripes=True)
        yield Footer(compact=True, show_command_palette=False)  # fits 80 columns (? lists ctrl+p)

    def draw(self) -> None:
        self.load_timeline()
        if self.result is None:  # the first look runs the query in the box
            self.action_run_query()

    @work(group="timeline", exclusive=True)
    async def load_timeline(self) -> None:
        backend = self.lw.backend
        if backend is None:
            return
        try:
            rows = (await backend.sql(queries.TIMELINE)).dicts()
        except BackendError as exc:
            self.query_one("#sparklines", Static).update(cell(str(exc), "red"))
            return
        lines = self.chart = timeline(rows)[:CHART_ROWS]
        text = Text("Incidents per hour, the history's last 48 h (oldest left)\n", style="bold")
        for signature, spark, total in lines:
            text.append(cell(f"{signature:<26.26}", ""))
            for hour in spark:  # an hour with none: a dim dot, so the 48 hours show
                text.append("·" if hour == " " else hour, style="dim" if hour == " " else "red")
            text.append(f" {total}\n", style="dim")
        if not lines:
            text.append("no incident recorded yet", style="dim")
        self.query_one("#sparklines", Static).update(text)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id and event.button.id.startswith("preset-"):
            self.run_preset(event.button.id.removeprefix("preset-"))

    def run_preset(self, name: str) -> None:
        self.query_one("#query", Input).value = queries.PRESETS[name]
        self.action_run_query()

    def on_input_submitted(self, _: Input.Submitted) -> None:
        self.action_run_query()

    def action_edit(self) -> None:
        self.query_one("#query", Input).focus()

    def action_run_query(self) -> None:
        self.run_sql(self.query_one("#query", Input).value)

    @work(group="sql", exclusive=True)
    async def run_sql(self, query: str) -> None:
        error = self.query_one("#sql-error", Static)
        backend = self.lw.backend
        if backend is None:
            error.update(cell("no daemon and no history to ask", "red"))
            return
        error.update(Text("running…", style="dim"))
        try:
            result = await backend.sql(query)
        except BackendError as exc:
            error.update(cell(str(exc), "bold red"))
            return
        self.show(result)
        note = f"{len(result.rows):,} row(s)"
        if result.truncated:
            note += f" — cut: {result.truncated}"
        error.update(cell(note, "yellow" if result.truncated else "dim"))

    def show(self, result: Rows) -> None:
        """A query's rows in the table (every value a Text: never markup)."""
        self.result = result
        fill(self.query_one("#result", DataTable), [cell(c) for c in result.columns],
             [[cell(v) for v in row] for row in result.rows])

    def action_export(self) -> None:
        if self.result is None:
            self.notify("run a query first", timeout=2)
            return
        from logwatch.tui.export import write_csv

        try:
            path = write_csv(Path.cwd(), self.result.columns, self.result.rows, datetime.now())
        except OSError as exc:
            self.notify(f"not written: {exc}", severity="error")
            return
        self.notify(f"{len(self.result.rows):,} row(s) written to {path}", timeout=5)
