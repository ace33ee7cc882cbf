"""The last lines read from each source, kept for the socket's `recent_lines` request: a
client that connects (the TUI's live log) shows what came before it instead of an empty
screen. Bounded: at most RECENT_LINES lines and RECENT_BYTES bytes per source, for at most
RECENT_SOURCES sources (the least recently read dropped first); kept as the bytes read, and
masked (secrets, `redact`) when asked for, never before: the ingestion path pays only a copy
of each chunk's tail."""

from __future__ import annotations

from dataclasses import dataclass, field

from logwatch.core.safe_text.redact import redact
from logwatch.daemon.protocol.requests import SourceLines

RECENT_LINES = 500  # per source
RECENT_BYTES = 1 << 16  # per source; a longer line is left out
RECENT_SOURCES = 64


@dataclass(slots=True)
class _Tail:
    first_line: int  # the number of data's first line
    next_line: int  # the number the next line read will have
    data: bytearray = field(default_factory=bytearray)  # whole lines only
    held: int = 0  # lines in data


def last_lines(data: bytes | bytearray, lines: int, limit: int) -> int:
    """Where the last `lines` whole lines of `data` that fit in `limit` bytes begin."""
    start = max(0, len(data) - limit)
    if start and data[start - 1] != 0x0A:  # inside a line: from the next one
        start = data.find(b"\n", start) + 1 or len(data)
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    if data.count(b"\n", start, end) < lines:  # all of them fit: no walk back line by line
        return start
    for _ in range(lines):
        end = data.rfind(b"\n", start, end)
        if end < 0:
            return start
    return end + 1


class RecentLines:
    def __init__(self, lines: int = RECENT_LINES, limit: int = RECENT_BYTES,
                 sources: int = RECENT_SOURCES) -> None:
        self.lines, self.limit, self.sources = lines, limit, sources
        self._tails: dict[str, _Tail] = {}  # least recently read first

    def add(self, source: str, first_line: int, data: bytes, count: int) -> None:
        """`count` lines read from `source`, numbered from `first_line` (a number other than
        the one expected: a new generation, its lines numbered again; the old ones go)."""
        tail = self._tails.pop(source, None)
        if tail is None or tail.next_line != first_line:
            tail = _Tail(first_line, first_line)
        while len(self._tails) >= self.sources:
            del self._tails[next(iter(self._tails))]
        self._tails[source] = tail
        data = data[:data.rfind(b"\n") + 1]  # a last line without its newline is not counted
        # a chunk within both bounds is kept whole: no walk back through its lines
        start = 0 if count <= self.lines and len(data) <= self.limit else last_lines(
            data, self.lines, self.limit)
        kept = data[start:]
        if start:  # lines before these were left out: the older ones kept are not next to them
            tail.data, tail.held = bytearray(kept), kept.count(b"\n")
        else:
            tail.data += kept
            tail.held += count
        tail.next_line = first_line + count
        if len(tail.data) > 2 * self.limit or tail.held > 2 * self.lines:  # trimmed in steps
            del tail.data[:last_lines(tail.data, self.lines, self.limit)]
            tail.held = tail.data.count(b"\n")
        tail.first_line = tail.next_line - tail.held

    def read(self, lines: int) -> list[SourceLines]:
        """Each source's last `lines` lines (at most what is kept), secrets masked."""
        out: list[SourceLines] = []
        for source, tail in self._tails.items():
            start = last_lines(tail.data, lines, self.limit)
            data = bytes(tail.data[start:])
            if data:
                out.append({"source": source,
                            "first_line": tail.next_line - data.count(b"\n"),
                            "text": redact(data.decode("utf-8", errors="replace"))})
        return out
