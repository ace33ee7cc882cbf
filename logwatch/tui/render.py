"""Untrusted text made safe to draw: every value read from a log or the history becomes a
Rich `Text` with its control characters shown (never markup, never obeyed by the
terminal), and the styles each severity and tone is drawn with."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from rich.text import Text

from logwatch.core.safe_text.visible import visible

SEVERITY_STYLE = {"critical": "bold white on red", "error": "bold red",
                  "warning": "yellow", "info": ""}
TONE_STYLE = {"good": "bold green", "busy": "bold cyan", "ask": "bold magenta",
              "bad": "bold red", "idle": "dim", "add": "green", "remove": "red",
              "ok": "green", "note": "dim", "plain": ""}


def plain(value: Any) -> str:
    """A value as one visible line of text."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, float):
        return f"{value:.2f}"
    return visible(str(value))


def cell(value: Any, style: str = "") -> Text:
    """A table cell or a label: the value's visible text, never read as markup."""
    return Text(plain(value), style=style, no_wrap=True, overflow="ellipsis")


def styled_lines(lines: Iterable[tuple[str, str]]) -> Text:
    """(tone, text) lines as one Text, each line in its tone's style."""
    out = Text()
    for tone, line in lines:
        out.append(visible(line, lines=True) + "\n", style=TONE_STYLE.get(tone, ""))
    return out
