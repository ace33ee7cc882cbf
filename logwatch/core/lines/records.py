"""Plain dataclasses that flow through the core: physical lines, parsed lines and records."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from logwatch.core.lines.fast_init import fast_init


@dataclass(frozen=True, slots=True)
class Line:
    """One physical line as a source delivered it."""

    source: str
    lineno: int  # 1-based position within the source (a byte offset or cursor comes later)
    text: str


@fast_init
@dataclass(frozen=True, slots=True)
class ParsedLine:
    """A physical line with its wrappers removed and its vLLM header (if any) parsed."""

    source: str
    lineno: int
    raw: str  # the line as received, minus the line terminator
    message: str  # the text after every wrapper and header
    kind: str  # "vllm" (full header), "prefix" (process prefix only), "uvicorn", "glog", "raw"
    process: str | None = None  # e.g. "EngineCore_DP0", "Worker_TP1", "VllmWorker"
    pid: int | None = None
    rank: str | None = None  # "TP1", "PP1_TP3", "0" (from rank=0 or [rank0]:)
    level: str | None = None
    vllm_time: str | None = None  # vLLM's own "MM-DD HH:MM:SS", verbatim
    logger_file: str | None = None
    logger_line: int | None = None
    time: datetime | None = None  # best known time: outer wrapper, else vLLM's with inferred year
    outer_time: datetime | None = None
    repeated: int = 1  # Ray's "[repeated Nx across cluster]"

    @property
    def header_key(self) -> tuple[object, ...]:
        """Lines of one multi-line logger record repeat exactly this header."""
        return (self.process, self.pid, self.level, self.vllm_time, self.logger_file,
                self.logger_line)

    @property
    def stream_key(self) -> tuple[object, ...]:
        """Which writer a line belongs to, for untangling interleaved processes."""
        if self.process is not None or self.pid is not None:
            return ("proc", self.process, self.pid)
        if self.rank is not None:
            return ("rank", self.rank)
        return ("raw",)


@dataclass(slots=True)
class Record:
    """One logical log record: a single line or an assembled multi-line block."""

    lines: list[ParsedLine] = field(default_factory=list)
    # The message, where it is known as the record is made (then its lines never change):
    # one string object for every record of the same text, its hash computed once.
    known_message: str | None = field(default=None, compare=False, repr=False)

    @property
    def first(self) -> ParsedLine:
        return self.lines[0]

    @property
    def source(self) -> str:
        return self.lines[0].source

    @property
    def lineno(self) -> int:
        return self.lines[0].lineno

    @property
    def last_lineno(self) -> int:
        return self.lines[-1].lineno

    @property
    def message(self) -> str:
        """The record's text: each line's message, joined by newlines."""
        if len(self.lines) == 1:
            return self.lines[0].message
        if self.known_message is not None:
            return self.known_message
        return "\n".join(line.message for line in self.lines)

    # The first line's field that is set, as plain loops: every finding asks these.
    @property
    def process(self) -> str | None:
        for ln in self.lines:
            if ln.process:
                return ln.process
        return None

    @property
    def pid(self) -> int | None:
        for ln in self.lines:
            if ln.pid is not None:
                return ln.pid
        return None

    @property
    def rank(self) -> str | None:
        for ln in self.lines:
            if ln.rank is not None:
                return ln.rank
        return None

    @property
    def level(self) -> str | None:
        return next((ln.level for ln in self.lines if ln.level), None)

    @property
    def time(self) -> datetime | None:
        for ln in self.lines:
            if ln.time is not None:
                return ln.time
        return None

    @property
    def is_traceback(self) -> bool:
        return any(ln.message.lstrip().startswith("Traceback (most recent call last)")
                   or ln.message.endswith("Traceback (most recent call last):")
                   for ln in self.lines)

    def index_of(self, line: ParsedLine) -> int:
        """Where in the record this very line object is (0 if it is not one of them)."""
        for i, ln in enumerate(self.lines):
            if ln is line:
                return i
        return 0

    def line_at(self, offset: int) -> ParsedLine:
        """The physical line holding character `offset` of `message`."""
        pos = 0
        for line in self.lines:
            end = pos + len(line.message)
            if offset <= end:
                return line
            pos = end + 1
        return self.lines[-1]
