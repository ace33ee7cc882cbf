"""Join physical lines into records: logger tracebacks, raw stderr copies, interleaved workers.

Lines are grouped per writer (process and pid, torch rank, or the unprefixed stream), so
tensor-parallel workers whose tracebacks interleave line by line still come out as one record
each. A record closes when its writer prints a line that cannot continue it.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from logwatch.core.lines.normalize import strip_colour
from logwatch.core.lines.pasted import SOFT_WRAP_MIN, soft_continues, split_embedded
from logwatch.core.lines.records import ParsedLine, Record

_TB_START = "Traceback (most recent call last):"
CHAIN_MARKERS = ("The above exception was the direct cause",
                 "During handling of the above exception")
# Lines torch and CUDA print after an exception line, still part of the same report.
TRAILERS = ("frame #", "Exception raised from ", "CUDA kernel errors might be",
             "For debugging consider passing", "Compile with `TORCH_USE_CUDA_DSA`",
             "Search for `cudaError")
# pydantic's ValidationError (vLLM's configuration classes from 0.9.2) prints its errors on
# the lines after the exception line: "  Value error, <vLLM's message> [type=...]", then an
# indented documentation link. They are the message, so they stay in the record.
_PYDANTIC_HEAD = re.compile(r"ValidationError: \d+ validation errors? for \w+\s*$")
_PYDANTIC_ITEM_END = re.compile(r"\[type=\w+[^\n]*\]\s*$")
MAX_RECORD_LINES = 1000  # a runaway record is cut here so memory stays bounded
QUIET_WRITER_LINES = 2000  # a writer silent this many lines has finished its record


@dataclass(slots=True)
class _Open:
    record: Record
    state: str  # "plain", "process" (after "Process X:"), "frames", "after_exception"
    lines: list[ParsedLine] = field(default_factory=list)


def starts_traceback(message: str) -> bool:
    return message.startswith(_TB_START) or message.endswith(_TB_START)


# A traceback's frame line, and an exception line as a traceback ends with it: what a log's
# tail holds of a traceback whose head was cut off (`kubectl logs --tail`, a rotated file).
_FRAME_LINE = re.compile(r'\s+File "[^"\n]+", line \d+')
_EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception|Failed|Timeout|Exit|Interrupt)"
                             r"(?::|$)")


def _state_after_first(line: ParsedLine) -> str:
    message = line.message
    if starts_traceback(message):
        return "frames"
    if line.kind != "vllm":
        if message.startswith("Process ") and message.endswith(":"):
            return "process"
        if _FRAME_LINE.match(message):
            return "frames"  # a traceback cut at its head
        if message[:1] in (" ", "\t") and message.strip():
            return "cut"  # may be one cut in its frames' code lines
    return "plain"


def cut_at_head(record: Record) -> bool:
    """A record that is the rest of a traceback whose head was cut off: printed raw, it
    starts with a frame or a frame's indented code line."""
    first = record.lines[0]
    return first.kind != "vllm" and first.message[:1] in (" ", "\t")


def _continues(current: _Open, line: ParsedLine) -> str | None:
    """The record's next state if `line` continues it, else None.

    States: "plain" (an ordinary message), "process" (after multiprocessing's `Process X:`),
    "cut" (raw indented lines, maybe a traceback's code lines with its head cut off),
    "frames" (inside a traceback), "after_exception" (the exception line was seen), "chain"
    (after "The above exception was the direct cause ..."), "pydantic" (inside a
    ValidationError's error text) and "pydantic_end" (after an error's `[type=...]`).
    """
    last = current.record.lines[-1]
    same_logger_call = line.kind == "vllm" and last.kind == "vllm" \
        and line.header_key == last.header_key
    if (line.kind == "vllm" or last.kind == "vllm") and not same_logger_call:
        return None
    message = line.message
    stripped = message.strip()
    state = current.state
    indented = message[:1] in (" ", "\t")

    if starts_traceback(message):
        opens = same_logger_call or state in ("process", "chain") or (
            state == "plain" and last.message.rstrip().endswith(":"))
        return "frames" if opens else None
    if state == "plain":
        return "plain" if same_logger_call and indented else None
    if state == "cut":  # indented raw lines: frames' code, if a frame or an exception follows
        if _FRAME_LINE.match(message):
            return "frames"
        if indented and stripped:
            return "cut"
        return "after_exception" if _EXCEPTION_LINE.match(message) else None
    if state == "process":
        return None
    if stripped.startswith(CHAIN_MARKERS):
        return "chain"
    if not stripped:
        return state
    if state == "chain":
        return None
    if state == "pydantic":
        return "pydantic_end" if _PYDANTIC_ITEM_END.search(message) else "pydantic"
    if state == "pydantic_end" and indented:
        return "pydantic_end" if stripped.startswith("For further information") else "pydantic"
    if message.startswith(TRAILERS):
        return "after_exception"
    if state == "frames":
        if indented:
            return "frames"
        # unindented: the exception line
        return "pydantic" if _PYDANTIC_HEAD.search(message) else "after_exception"
    # After the exception line only the same logger call continues (a multi-line message);
    # an unprefixed writer has moved on to something else.
    return "after_exception" if same_logger_call else None


def rejoin_soft(head: ParsedLine, continuation: ParsedLine) -> ParsedLine:
    """A message wrapped at a word, one line again (a space where the row broke)."""
    rest = strip_colour(continuation.raw).strip()
    return replace(head, message=head.message.rstrip() + " " + rest,
                   raw=head.raw.rstrip() + " " + rest)


def rejoin(head: ParsedLine, continuation: ParsedLine) -> ParsedLine:
    """A line a terminal cut at its width, whole again. The continuation is taken as printed
    (colour aside): what looked like a wrapper at its start was the middle of the line."""
    rest = strip_colour(continuation.raw)
    return replace(head, message=split_embedded(head.message + rest),
                   raw=head.raw + continuation.raw)


class Assembler:
    """Streaming assembly: feed parsed lines in order, get records in order of first line.

    A closed record is held back while an earlier record is still open, so consumers see
    records in log order; a writer that stays quiet for QUIET_WRITER_LINES lines is closed.
    """

    def __init__(self, wrap_width: int | None = None, ordered: bool = True,
                 soft_wrap: bool = False) -> None:
        """`wrap_width`: the terminal width a copied log was hard-wrapped at, if known.
        `soft_wrap`: the log is a paste whose messages were wrapped at a word (rows without a
        header that go on with the row before: core.lines.pasted.soft_continues).
        `ordered=False` returns records as they close (cheaper when order does not matter)."""
        self._open: dict[tuple[object, ...], _Open] = {}
        self._closed: list[tuple[int, int, Record]] = []  # heap by first line
        self._sequence = itertools.count()
        self._ordered = ordered
        self._wrap_width = wrap_width
        # a line exactly as long as the terminal: held until the next line says whether it
        # goes on, so the record sees it whole ("Traceback (most re" opens nothing)
        self._cut: ParsedLine | None = None
        self._soft_wrap = soft_wrap and wrap_width is None

    def feed(self, line: ParsedLine) -> list[Record]:
        """Add one line; return the records that are complete and due, in order."""
        self._feed(line)
        if line.lineno % 256 == 0:
            for key, current in list(self._open.items()):
                if line.lineno - current.record.last_lineno > QUIET_WRITER_LINES:
                    self._close(current.record)
                    del self._open[key]
        if not self._closed:
            return []
        if not self._ordered:
            due = [entry[2] for entry in self._closed]
            self._closed.clear()
            return due
        oldest_open = min((o.record.lines[0].lineno for o in self._open.values()), default=None)
        due = []
        while self._closed and (oldest_open is None or self._closed[0][0] < oldest_open):
            due.append(heapq.heappop(self._closed)[2])
        return due

    def _close(self, record: Record) -> None:
        heapq.heappush(self._closed, (record.lines[0].lineno, next(self._sequence), record))

    def _feed(self, line: ParsedLine) -> None:
        if self._wrap_width is not None:
            cut, self._cut = self._cut, None
            row = len(line.raw)  # this physical row: as wide as the terminal, it goes on
            if cut is not None:
                if line.kind == "raw":  # no header of its own: the rest of the cut line
                    line = rejoin(cut, line)
                else:
                    self._place(cut)
            if row == self._wrap_width:
                self._cut = line
                return
        elif self._soft_wrap:
            held, self._cut = self._cut, None
            if held is not None:
                if line.kind == "raw" and soft_continues(held.message, line.message):
                    line = rejoin_soft(held, line)
                else:
                    self._place(held)
            if line.kind == "raw" and len(line.message) >= SOFT_WRAP_MIN:
                self._cut = line  # held until the next row says whether it goes on
                return
        self._place(line)

    def _place(self, line: ParsedLine) -> None:
        key = line.stream_key
        current = self._open.get(key)
        if current is not None:
            state = _continues(current, line)
            if state is not None and len(current.record.lines) < MAX_RECORD_LINES:
                current.record.lines.append(line)
                current.state = state
                return
            self._close(current.record)
        self._open[key] = _Open(Record([line]), _state_after_first(line))

    def may_go_on(self, record: Record) -> bool:
        """Whether a line fed later could still join `record`: it is open, and a line exists
        that continues it (`_continues`). A plain record of a writer without a logger header
        whose line does not end in ":" takes no line at all, so it is over as it stands."""
        current = self._open.get(record.lines[0].stream_key)
        if current is None or current.record is not record:
            return False
        last = record.lines[-1]
        return not (current.state == "plain" and last.kind != "vllm"
                    and not last.message.rstrip().endswith(":"))

    def open_records(self) -> list[Record]:
        """The records still open, left open: feeding more lines may extend them. (With
        `ordered=False` and no wrap width, `feed`'s records and these are all there is.)"""
        return [o.record for o in self._open.values()]

    def flush(self) -> list[Record]:
        """Close every open record (end of input, or a quiet period in a live source)."""
        if self._cut is not None:
            self._place(self._cut)
            self._cut = None
        records = [entry[2] for entry in self._closed]
        records += [o.record for o in self._open.values()]
        self._open.clear()
        self._closed = []
        records.sort(key=_first_lineno)
        return records


def _first_lineno(record: Record) -> int:
    return record.lines[0].lineno


def assemble(lines: Iterable[ParsedLine]) -> Iterator[Record]:
    """Assemble a finite sequence of lines into records, in order of their first line."""
    assembler = Assembler()
    pending: list[Record] = []
    for line in lines:
        pending.extend(assembler.feed(line))
    pending.extend(assembler.flush())
    pending.sort(key=lambda r: r.lineno)
    yield from pending
