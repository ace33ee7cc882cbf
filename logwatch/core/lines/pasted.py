"""Undo what pasting and old formats do to a message: V0's worker error embedded in its own
line, a terminal's hard wrap (the width it cut at).

Signatures anchor on the message as vLLM raises it; these functions give them that message
back wherever the log wrapped it in something else.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_TB_START = "Traceback (most recent call last):"
# V0's worker loop: `Exception in worker W while processing method M: <str(e)>, Traceback ...`
_V0_EMBEDDED = re.compile(
    r"(?P<head>Exception in worker \S+ while processing method \w+):[ \n](?P<inner>.+?)"
    r"(?:(?:, |\n)(?P<tb>Traceback \(most recent call last\):))?",
    re.DOTALL,
)
EMBEDDING_HINT = "while processing method"
# Widths terminals and consoles are commonly set to: one cut at such a width, into a row that
# carries no header, is a wrap even in a short excerpt.
COMMON_WIDTHS = frozenset({80, 100, 120, 132, 140, 150, 160, 180, 200, 220, 240})


def split_embedded(message: str) -> str:
    """The V0 embedding as three lines: the wrapper, the message it carries, `Traceback`, so
    a pattern anchored at the start of a line finds the carried message. Idempotent: a line
    split once and then rejoined with the rest of a terminal-wrapped row splits the same."""
    if EMBEDDING_HINT not in message:
        return message
    m = _V0_EMBEDDED.fullmatch(message)
    if m is None:
        return message
    lines = [m.group("head") + ":", split_embedded(m.group("inner"))]
    if m.group("tb"):
        lines.append(_TB_START)
    return "\n".join(lines)


def wrap_width(lines: list[str], continues: Callable[[str], bool]) -> int | None:
    """The width a terminal cut these lines at, or None: many lines of one long length and
    none longer; or, at a common terminal width, every such line followed by a row that
    `continues` it (no header of its own), however few they are."""
    lengths: dict[int, int] = {}
    for line in lines:
        if len(line) >= 80:
            lengths[len(line)] = lengths.get(len(line), 0) + 1
    if not lengths:
        return None
    width, count = max(lengths.items(), key=lambda kv: kv[1])
    if width != max(lengths):
        return None
    if count >= 3 and count >= 0.2 * len(lines):
        return width
    if width in COMMON_WIDTHS and all(
            continues(lines[i + 1]) for i, line in enumerate(lines[:-1]) if len(line) == width):
        return width
    return None


# A word-wrapped paste (an issue tracker, an e-mail, a terminal that wraps at a space): a message
# broken into rows that carry no header of their own, each row but the last long, the next one
# going on as the middle of a sentence does.
SOFT_WRAP_MIN = 50
_SOFT_NEXT = re.compile(r"[a-z0-9`(\[{'\"]")
_RAISED = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning): \S")


def soft_continues(previous: str, row: str) -> bool:
    """Whether `row` is the rest of `previous` wrapped at a word: `previous` long and not
    indented, not ending a sentence or a heading; `row` not indented, words (not one name,
    as pydantic prints a field's on a line of its own) going on as the middle of a sentence
    does (a lowercase letter, a digit, a backtick, a bracket, a quote)."""
    tail = previous.rstrip()[-1:]
    return (len(previous) >= SOFT_WRAP_MIN and previous[:1] not in (" ", "\t")
            and tail not in (":", ".", "!", "?") and row[:1] not in (" ", "\t")
            and _SOFT_NEXT.match(row) is not None and " " in row.strip())


def soft_wrapped(rows: list[str], raw: Callable[[str], bool]) -> bool:
    """Whether a paste holds an exception's message wrapped at a word: a raised error's line
    (`ValueError: ...`) with no header, followed by a headerless row that goes on with it."""
    return any(_RAISED.match(row) and raw(row) and raw(rows[i + 1])
               and soft_continues(row, rows[i + 1])
               for i, row in enumerate(rows[:-1]))
