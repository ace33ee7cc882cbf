"""`?`: every key of the screen below and of the app, with what it does."""

from __future__ import annotations

from dataclasses import replace
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
        self.rows: list[tuple[str, str]] = []  # (keys, what they do), as listed

    def compose(self) -> ComposeResult:
        table = Table(title=f"Keys — {self.under.__class__.__name__.removesuffix('Screen')}",
                      show_header=True, expand=True)
        table.add_column("key", style="bold cyan", no_wrap=True)
        table.add_column("what it does")
        seen: set[str] = set()
        keys_of: dict[tuple[str, str], list[str]] = {}  # one row per action, all its keys
        for node in (self.under, self.app):
            for bindings in node._bindings.key_to_bindings.values():
                for b in bindings:
                    action = b.action.partition("(")[0]
                    if (not b.description or b.key in seen or b.key.startswith("super+")
                            or action == "command_palette"  # its own row, below
                            or node.check_action(action, ()) is False):  # hidden here
                        continue
                    seen.add(b.key)
                    keys = keys_of.setdefault((b.action, b.description), [])
                    # `G,end` is two bindings that both display as G: the second by its key
                    shown = self.app.get_key_display(b if not keys else
                                                     replace(b, key_display=None))
                    if shown not in keys:
                        keys.append(shown)
        self.rows = [(" ".join(keys), what) for (_, what), keys in keys_of.items()]
        self.rows.append(("ctrl+p", "command palette (screens, SQL presets, approve/reject)"))
        for shown_keys, what in self.rows:
            table.add_row(shown_keys, what)
        with VerticalScroll(id="help"):
            yield Static(table)

    def action_close(self) -> None:
        self.dismiss(None)
