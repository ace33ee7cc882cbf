"""The live log's lines, kept in a bounded ring (the history is in DuckDB): what arrived,
what a filter lets through, which lines are errors or warnings, and how many lines never
reached the screen. Pure: no Textual, no I/O, so it is tested with literals and benchmarked
on its own.

Lines are numbered by arrival (`seq`); the ring keeps the newest `capacity` of them. A filter
(regex in, regex out, a process such as `TP1` or `EngineCore_DP0`) gives a view: the seqs it
lets through, kept up to date as lines arrive, rebuilt only when the filter changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import regex

RING_LINES = 20_000
# vLLM's own header: `LEVEL MM-DD HH:MM:SS [file.py:N]`, after an optional process prefix
_LEVEL = re.compile(r"\b(CRITICAL|ERROR|WARNING|INFO|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d")
# the process a line came from: `(EngineCore_DP0 pid=12)`, `(VllmWorker TP1 pid=40)`,
# `(Worker_TP1 pid=40)`, `(APIServer pid=1)`
_PROCESS = re.compile(r"\(([A-Za-z][\w ]{0,40}?)(?: pid=\d+)\)")
SEVERITIES = ("critical", "error", "warning", "info")
ERRORS = frozenset({"critical", "error"})


class Line(NamedTuple):
    """A tuple, not a dataclass: a tuple of strings and ints is one the garbage collector
    stops tracking, so a full ring does not make every collection walk it."""

    source: str
    number: int  # its line number in the source
    text: str


@dataclass(frozen=True, slots=True)
class Mark:
    """A signature matched on a line: how bad, and the captured values to highlight."""

    signature: str
    severity: str
    captures: tuple[str, ...] = ()


def level_of(text: str) -> str | None:
    """The level vLLM's own header gives a line (lower case), or None."""
    found = _LEVEL.search(text, 0, 200)
    return found.group(1).lower() if found else None


def process_of(text: str) -> str | None:
    """The process a line names in its prefix (`TP1`, `EngineCore_DP0`, `APIServer`)."""
    found = _PROCESS.search(text, 0, 200)
    if found is None:
        return None
    name = found.group(1).strip()
    return name.split()[-1] if name.startswith("VllmWorker") else name


class FilterError(ValueError):
    """A filter that cannot be compiled, or that took too long on a line: shown inline,
    the filter before it stays."""


FILTER_CHARS = 8_192  # of a line, what a filter searches
FILTER_SECONDS = 0.05  # a search that takes longer than this ends the filter


@dataclass(frozen=True, slots=True)
class LineFilter:
    include: str = ""
    exclude: str = ""
    process: str = ""

    def compiled(self) -> tuple[regex.Pattern[str] | None, regex.Pattern[str] | None]:
        try:  # `regex`: the same syntax, and a search that can be given a time limit
            return (regex.compile(self.include) if self.include else None,
                    regex.compile(self.exclude) if self.exclude else None)
        except regex.error as exc:
            raise FilterError(f"not a regular expression: {exc}") from None

    @property
    def active(self) -> bool:
        return bool(self.include or self.exclude or self.process)

    def describe(self) -> str:
        parts = ([f"/{self.include}/"] if self.include else []) + \
                ([f"not /{self.exclude}/"] if self.exclude else []) + \
                ([f"process {self.process}"] if self.process else [])
        return ", ".join(parts) or "no filter"


@dataclass
class LineRing:
    """The newest `capacity` lines, their marks, and a filtered view of them."""

    capacity: int = RING_LINES
    lines: list[Line] = field(default_factory=list)
    base: int = 0  # seq of lines[0]
    dropped: int = 0  # lines that arrived in a batch bigger than the ring: never shown
    marks: dict[tuple[str, int], Mark] = field(default_factory=dict)
    filter: LineFilter = field(default_factory=LineFilter)
    _view: list[int] | None = None  # seqs the filter lets through; None: every line
    _patterns: tuple[regex.Pattern[str] | None, regex.Pattern[str] | None] = (None, None)
    dropped_filter: str = ""  # why the filter was taken off while lines arrived

    @property
    def end(self) -> int:
        """The seq the next line will get."""
        return self.base + len(self.lines)

    def __len__(self) -> int:
        return len(self.lines) if self._view is None else len(self._view)

    def add(self, lines: Iterable[Line]) -> int:
        """Append lines; those beyond the ring's size in one batch are counted as dropped.
        Returns how many were kept."""
        batch = list(lines)
        if len(batch) > self.capacity:
            self.dropped += len(batch) - self.capacity
            self.base += len(batch) - self.capacity
            batch = batch[-self.capacity:]
        first = self.end
        self.lines.extend(batch)
        if self._view is not None:
            try:
                self._view.extend([first + i for i, line in enumerate(batch)
                                   if self._passes(line)])
            except FilterError as exc:  # a line it cannot judge in time: not a frozen screen
                self.dropped_filter = f"filter {self.filter.describe()} taken off: {exc}"
                self.filter, self._patterns, self._view = LineFilter(), (None, None), None
        self._trim()
        return len(batch)

    def seed(self, older: Iterable[Line]) -> int:
        """Lines read before the first ones that arrived, put before them: a line of a
        source at or after that source's first line here is one the ring has already.
        Returns how many were put in."""
        first: dict[str, int] = {}
        for line in self.lines:
            first.setdefault(line.source, line.number)
        batch = [line for line in older
                 if line.source not in first or line.number < first[line.source]]
        batch = batch[-self.capacity:]
        if not batch:
            return 0
        self.lines[:0] = batch
        self.base -= len(batch)  # the same seqs for the lines already here
        if self._view is not None:
            try:
                self.set_filter(self.filter)
            except FilterError as exc:  # as in add: not a frozen screen
                self.dropped_filter = f"filter {self.filter.describe()} taken off: {exc}"
                self.filter, self._patterns, self._view = LineFilter(), (None, None), None
        self._trim()
        return len(batch)

    def _trim(self) -> None:
        excess = len(self.lines) - self.capacity
        if excess <= 0 or excess < self.capacity // 8:  # trim in steps: O(1) amortised
            return
        gone = self.lines[:excess]
        del self.lines[:excess]
        self.base += excess
        for line in gone:
            self.marks.pop((line.source, line.number), None)
        if self._view is not None:
            cut = next((i for i, seq in enumerate(self._view) if seq >= self.base),
                       len(self._view))
            del self._view[:cut]

    def mark(self, source: str, number: int, mark: Mark) -> None:
        """A finding on a line; a worse one on the same line wins."""
        key = (source, number)
        held = self.marks.get(key)
        if held is None or _rank(mark.severity) < _rank(held.severity):
            self.marks[key] = mark
        if len(self.marks) > 2 * self.capacity:  # marks of lines never seen, or long gone
            for stale in list(self.marks)[:len(self.marks) - self.capacity]:
                del self.marks[stale]

    def set_filter(self, new: LineFilter) -> None:
        """Apply a filter (FilterError, and the old one kept, when it does not compile)."""
        patterns = new.compiled()
        before = self.filter, self._patterns, self._view
        self.filter, self._patterns = new, patterns
        self.dropped_filter = ""
        if not new.active:
            self._view = None
            return
        try:
            self._view = [self.base + i for i, line in enumerate(self.lines)
                          if self._passes(line)]
        except FilterError:
            self.filter, self._patterns, self._view = before
            raise

    def _passes(self, line: Line) -> bool:
        include, exclude = self._patterns
        text = line.text[:FILTER_CHARS]
        try:
            if include is not None and include.search(text, timeout=FILTER_SECONDS) is None:
                return False
            if exclude is not None and \
                    exclude.search(text, timeout=FILTER_SECONDS) is not None:
                return False
        except TimeoutError:
            raise FilterError(f"over {FILTER_SECONDS * 1000:.0f} ms on line {line.number} "
                              f"of {line.source}") from None
        return not self.filter.process or process_of(text) == self.filter.process

    def seq_at(self, row: int) -> int:
        """The seq of the view's `row`-th line."""
        return self.base + row if self._view is None else self._view[row]

    def row(self, row: int) -> Line:
        return self.lines[self.seq_at(row) - self.base]

    def row_of(self, seq: int) -> int | None:
        """The view row showing `seq`, or None when the filter hides it."""
        if self._view is None:
            return seq - self.base if self.base <= seq < self.end else None
        import bisect

        at = bisect.bisect_left(self._view, seq)
        return at if at < len(self._view) and self._view[at] == seq else None

    def severity(self, line: Line) -> str | None:
        """A line's severity: its worst finding's, else its vLLM level (info and debug
        lines are None)."""
        held = self.marks.get((line.source, line.number))
        if held is not None:
            return held.severity
        level = level_of(line.text)
        return level if level in ("critical", "error", "warning") else None

    def find(self, row: int, kinds: frozenset[str], forward: bool) -> int | None:
        """The next (or previous) view row after `row` whose severity is one of `kinds`."""
        rows: Iterator[int] = iter(range(row + 1, len(self))) if forward \
            else iter(range(row - 1, -1, -1))
        return next((r for r in rows if self.severity(self.row(r)) in kinds), None)

    def processes(self) -> list[str]:
        """Every process the ring's lines name, in order of first appearance."""
        seen: dict[str, None] = {}
        for line in self.lines:
            name = process_of(line.text)
            if name is not None:
                seen.setdefault(name)
        return list(seen)


def _rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def as_drawn(text: str) -> str:
    """What a terminal leaves of a line that rewrote itself with carriage returns (a
    progress bar): its last non-empty part. Filters and copies still see the whole."""
    if "\r" not in text:
        return text
    return next((part for part in reversed(text.split("\r")) if part), "")


def split_lines(source: str, first_line: int, text: str) -> list[Line]:
    """A `lines` event's text as numbered lines (its last newline ends the last line)."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return [Line(source, first_line + i, part) for i, part in enumerate(parts)]
