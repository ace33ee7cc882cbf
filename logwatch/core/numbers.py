"""Numbers read from log text, kept only where they fit what they stand for.

A log's digits come in any length (`pid=9999...`, `size_n = 40000...`): converting them all
costs time, fails beyond 4,300 digits (Python's own limit), and a value no column or
calculation expects stops what follows. Every number parsed from a line goes through here.
"""

from __future__ import annotations

# what a count or size in a log can be and still be what it says (a tensor's width, a
# parallel size, a repeat count): beyond this it is garbage, and read as none
COUNT_MAX = (1 << 31) - 1


def bounded_number(digits: str | None, limit: int = COUNT_MAX) -> int | None:
    """`digits` (a run of ASCII digits) as an int when it is at most `limit`; else None."""
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(limit)):
        return None
    value = int(significant)
    return value if value <= limit else None
