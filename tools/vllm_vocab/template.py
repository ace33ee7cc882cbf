"""One message template: literal text with `{name}` placeholders, `{{`/`}}` for literal braces."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
MAX_NAME = 40


def escape(text: str) -> str:
    """Literal text as template text."""
    return text.replace("{", "{{").replace("}", "}}")


def field(expression: str) -> str:
    """A placeholder named after the expression that fills it (shortened, braces dropped)."""
    name = " ".join(expression.replace("{", "(").replace("}", ")").split())
    return "{" + (name if len(name) <= MAX_NAME else name[:MAX_NAME - 1] + "…") + "}"


def pieces(template: str) -> Iterator[tuple[str, str | None]]:
    """(literal text, placeholder name or None) in order."""
    position = 0
    for match in _FIELD.finditer(template):
        literal = template[position:match.start()]
        if match.group(0) in ("{{", "}}"):
            yield literal + match.group(0)[0], None
        else:
            yield literal, match.group(1)
        position = match.end()
    yield template[position:], None


def shape(template: str) -> str:
    """The wording alone: every placeholder `{}`, so releases that renamed a variable still
    share one wording."""
    return "".join(escape(text) + ("{}" if name is not None else "")
                   for text, name in pieces(template))


def literal_text(template: str) -> str:
    """The literal parts only, joined: how much fixed wording a template has."""
    return "".join(text for text, _ in pieces(template))


def fill(template: str, values: Mapping[str, str] | None = None,
         default: str = "?") -> str:
    """The template with every placeholder replaced by its value."""
    values = values or {}
    return "".join(text + ("" if name is None else values.get(name, default))
                   for text, name in pieces(template))


@dataclass(frozen=True, slots=True)
class Message:
    """One message site in one release's sources."""

    kind: str  # raise, assert, log, torch_check
    label: str  # exception class, log level, or the check macro
    template: str
    file: str
    function: str
    line: int
