"""`?`: every key of the screen below and of the app, with what it does."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "close",
                                                     "Close")]

    def __init__(self, under: Screen[object]) -> None:
        super().__init__()
        self.under = under

    def compose(self) -> ComposeResult:
        table = Table(title=f"Keys — {self.under.__class__.__name__.removesuffix('Screen')}",
                      show_header=True, expand=True)
        table.add_column("key", style="bold cyan", no_wrap=True)
        table.add_column("what it does")
        seen = set()
        for node in (self.under, self.app):
            for binding in node._bindings.key_to_bindings.values():
                for b in binding:
                    if b.description and b.key not in seen:
                        seen.add(b.key)
                        table.add_row(self.app.get_key_display(b), b.description)
        table.add_row("ctrl+p", "command palette (screens, SQL presets, approve/reject)")
        table.add_row("tab", "move between the panes")
        with VerticalScroll(id="help"):
            yield Static(table)

    def action_close(self) -> None:
        self.dismiss(None)
