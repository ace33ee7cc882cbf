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
        seen: set[str] = set()
        for node in (self.under, self.app):
            for bindings in node._bindings.key_to_bindings.values():
                for b in bindings:
                    action = b.action.partition("(")[0]
                    if (not b.description or b.key in seen or b.key.startswith("super+")
                            or node.check_action(action, ()) is False):  # hidden here
                        continue
                    seen.add(b.key)
                    table.add_row(self.app.get_key_display(b), b.description)
        table.add_row("ctrl+p", "command palette (screens, SQL presets, approve/reject)")
        with VerticalScroll(id="help"):
            yield Static(table)

    def action_close(self) -> None:
        self.dismiss(None)
