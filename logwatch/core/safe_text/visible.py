"""Text from logs made safe for a terminal: every control character shown, none obeyed.

Log lines, file names and database values are untrusted. Written raw to a terminal, ESC, CSI,
OSC, DCS and their 8-bit C1 forms can set the clipboard (OSC 52), the window title (OSC 0),
plant hyperlinks (OSC 8) or make the terminal answer a query into the shell's input. Every
output meant for a terminal passes through `visible()`: C0 controls and DEL in caret notation
(`^[`, `^?`), C1 controls and the bidirectional overrides that reorder what is shown as
`\\x9b` / `\\u202e`. JSON output keeps the original text, escaped: `json.dumps` escapes C0
itself, and `json_escaped()` adds DEL, C1 and the bidi controls, which it leaves raw when
`ensure_ascii=False`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

# C0 controls but tab and newline (handled by the caller's choice), DEL, C1 controls, the
# bidi embeddings/overrides/isolates and marks, the line/paragraph separators, and lone
# surrogates: the bytes of a file name that are not UTF-8 (os.fsdecode gives U+DC80-U+DCFF
# for them, written back out as the raw byte: a 0x9b there is an 8-bit CSI).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                     "\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                         "\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# What json.dumps(ensure_ascii=False) leaves raw: everything above but C0, which it escapes
# (and which, as newlines and indentation, is also the layout of indented JSON).
_JSON_RAW = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                       "\ud800-\udfff]")


def _show(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)  # ESC -> ^[, NUL -> ^@
    if code == 0x7F:
        return "^?"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, shown as that byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def visible(text: str, lines: bool = False) -> str:
    """`text` with every control character rendered visibly. `lines`: keep newlines and tabs
    (multi-line evidence); otherwise they are shown too (`^J`, `^I`), as a table cell needs."""
    pattern = _UNSAFE if lines else _UNSAFE_ALL
    if pattern.search(text) is None:
        return text
    return pattern.sub(_show, text)


def visible_data(value: Any, prose: Collection[str] = (), lines: bool = False) -> Any:
    """A copy of JSON-like data (dicts, lists, tuples, strings, numbers) with every string, keys
    included, rendered visibly. The values under a key in `prose` (and all below it) keep their
    newlines and tabs: text the caller wraps into lines itself."""
    if isinstance(value, str):
        return visible(value, lines)
    if isinstance(value, dict):
        return {visible(k) if isinstance(k, str) else k:
                visible_data(v, prose, lines or k in prose) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(visible_data(v, prose, lines) for v in value)
    return value


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_escaped(dumped: str) -> str:
    """JSON text from `json.dumps(..., ensure_ascii=False)` with DEL, C1 and the bidi controls
    escaped as `\\uXXXX` too. Such characters only occur inside string literals and are never
    part of an escape there, so the result is valid JSON that loads to the same value."""
    if _JSON_RAW.search(dumped) is None:
        return dumped
    return _JSON_RAW.sub(_json_escape, dumped)
