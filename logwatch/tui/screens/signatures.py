"""The signature library: its version, each signature's status, version, severity and hits
in the history, and what the matcher disabled; reload results are said when they happen."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import DataTable, Footer, Static

from logwatch.tui.messages import SignaturesChanged
from logwatch.tui.render import SEVERITY_STYLE, cell, plain
from logwatch.tui.screens.base import AppScreen
from logwatch.tui.widgets.connection_bar import ConnectionBar
from logwatch.tui.widgets.fitted_table import fill

COLUMNS = ("signature", "v", "status", "severity", "hits", "last hit", "title")


class SignaturesScreen(AppScreen):
    BINDINGS: ClassVar[list[BindingType]] = []

    def compose(self) -> ComposeResult:
        yield ConnectionBar()
        yield Static(id="library")
        yield DataTable(id="signatures", cursor_type="row", zebra_stripes=True)
        yield Footer(compact=True, show_command_palette=False)  # fits 80 columns (? lists ctrl+p)

    def on_mount(self) -> None:
        fill(self.query_one(DataTable), COLUMNS, [])
        if self.lw.signature_states is None:
            self.lw.load_signatures()

    def on_signatures_changed(self, _: SignaturesChanged) -> None:
        self.draw()

    def draw(self) -> None:
        states = self.lw.signature_states
        head = self.query_one("#library", Static)
        table = self.query_one(DataTable)
        if states is None or "error" in states:
            fill(table, COLUMNS, [])
            head.update(Text("reading the library…", style="dim") if states is None else
                        cell(f"the library could not be read: {states['error']}", "red"))
            return
        signatures = states.get("signatures") or []
        hits = states.get("hits") or {}
        title = cell(f"library {states.get('library')} · {len(signatures)} signatures · "
                     f"{sum(1 for s in signatures if s.get('disabled'))} disabled", "bold")
        if self.lw.last_reload is not None:  # the daemon's last reload, as it went
            at, loaded, what = self.lw.last_reload
            title.append(" · ")
            title.append(cell(f"{at:%H:%M:%S} {what}", "green" if loaded else "bold red"))
        head.update(title)
        rows: list[list[Text | str]] = []
        for s in sorted(signatures, key=lambda s: -int((hits.get(s["id"]) or {})
                                                       .get("hits") or 0)):
            hit = hits.get(s["id"]) or {}
            status = "DISABLED" if s.get("disabled") else s["status"]
            rows.append([cell(s["id"], "bold"), cell(s["version"]),
                         cell(status, "bold red" if s.get("disabled") else
                              "dim" if s["status"] != "stable" else ""),
                         cell(s["severity"], SEVERITY_STYLE.get(s["severity"], "")),
                         cell(hit.get("hits") or 0), cell(plain(hit.get("last"))),
                         cell(s["title"])])
        fill(table, COLUMNS, rows)
