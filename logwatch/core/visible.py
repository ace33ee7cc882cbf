"""Text from logs made safe for a terminal: every control character shown, none obeyed.

Log lines, file names and database values are untrusted. Written raw to a terminal, ESC, CSI,
OSC, DCS and their 8-bit C1 forms can set the clipboard (OSC 52), the window title (OSC 0),
plant hyperlinks (OSC 8) or make the terminal answer a query into the shell's input. Every
output meant for a terminal passes through `visible()`: C0 controls and DEL in caret notation
(`^[`, `^?`), C1 controls and the bidirectional overrides that reorder what is shown as
`\\x9b` / `\\u202e`. JSON output needs none of this: `json.dumps` escapes them itself.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline (handled by the caller's choice), DEL, C1 controls, the
# bidi embeddings/overrides/isolates and marks, and the line/paragraph separators.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                     "\u202a-\u202e\u2066-\u2069]")
_UNSAFE_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                         "\u202a-\u202e\u2066-\u2069]")


def _show(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)  # ESC -> ^[, NUL -> ^@
    if code == 0x7F:
        return "^?"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def visible(text: str, lines: bool = False) -> str:
    """`text` with every control character rendered visibly. `lines`: keep newlines and tabs
    (multi-line evidence); otherwise they are shown too (`^J`, `^I`), as a table cell needs."""
    pattern = _UNSAFE if lines else _UNSAFE_ALL
    if pattern.search(text) is None:
        return text
    return pattern.sub(_show, text)
