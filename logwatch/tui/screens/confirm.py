"""A yes/no question before anything is sent to the daemon: `y` or Enter on the button says
yes, `n` or Escape says no."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from logwatch.core.safe_text.visible import visible


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str, verb: str) -> None:
        super().__init__()
        self.question, self.verb = question, verb

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(visible(self.question, lines=True)), id="question")
            with Horizontal(id="buttons"):
                yield Button(f"{self.verb} (y)", variant="warning", id="yes")
                yield Button("Cancel (n)", id="no")

    def on_mount(self) -> None:
        question = self.query_one("#question", Static)
        question.styles.width = "100%"
        self.query_one("#no", Button).focus()  # Enter alone does not approve

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
