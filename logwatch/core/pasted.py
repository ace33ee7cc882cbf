"""Undo what old formats fold into a message: V0's worker error embedded in its own line.

Signatures anchor on the message as vLLM raises it; these functions give them that message
back wherever the log wrapped it in something else.
"""

from __future__ import annotations

import re

_TB_START = "Traceback (most recent call last):"
# V0's worker loop: `Exception in worker W while processing method M: <str(e)>, Traceback ...`
_V0_EMBEDDED = re.compile(
    r"(?P<head>Exception in worker \S+ while processing method \w+):[ \n](?P<inner>.+?)"
    r"(?:(?:, |\n)(?P<tb>Traceback \(most recent call last\):))?",
    re.DOTALL,
)
EMBEDDING_HINT = "while processing method"


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
