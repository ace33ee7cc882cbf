"""The one interface every source implements, and an in-memory source for tests.

A source has a name (what the operator configured: shown in status, metrics and events) and
reads a stream (a path, a journal). Checkpoints are keyed by the stream, so renaming a source,
or moving it from the command line into a configured target, goes on where it stopped instead
of reading and recording everything again. A pipe or a child has nothing to resume (each run
is a new generation): its position stays under its name.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Chunk:
    """Complete lines read from one generation of a source (a file until it rotates)."""

    source: str  # the source's configured name, e.g. "file:/var/log/vllm/vllm.log"
    generation: str  # identity of what was read: a file's fingerprint, a journal, one run
    data: bytes  # complete lines (ends with a newline unless the source ended)
    offset: int  # byte offset of data[0] within the generation
    new_generation: bool = False  # first chunk of a generation: line numbers restart
    # journald: (offset just after an entry, that entry's cursor), so a checkpoint can name
    # the last whole entry before the scanner's safe point
    marks: tuple[tuple[int, str], ...] = ()
    path: str | None = None  # a file source's path (how far behind the writer it is)
    # bytes of the generation `data` stands for, when not len(data): a line over the
    # source's limit is handed on cut (more), a last line without a newline gets one (less)
    span: int | None = None
    first_line: int | None = None  # number of data's first line, when a source starts
    # mid-generation without a checkpoint (a file followed from its end)
    # offsets in the generation where the program was started again (journald: the unit's
    # next invocation): a new launch begins with the line there
    launches: tuple[int, ...] = ()
    # the stream read, which its checkpoint is keyed by whatever the source is named
    # (`file_stream`, `journal_stream`); "" where there is nothing to resume (a pipe, a
    # child, tests): the source's name stands in
    stream: str = ""
    # journald: (offset just after the manager's entry, status, clean) where the manager said
    # the unit's main process ended: the launch in force there ended so (see `Exit`)
    exits: tuple[Exit, ...] = ()


@dataclass(frozen=True, slots=True)
class Exit:
    """The unit's main process ended, as its manager told the journal: `status` is the exit
    status, or minus the signal that killed it; `clean` as systemd judges a service's end
    (exit 0, or SIGHUP, SIGINT, SIGTERM or SIGPIPE)."""

    offset: int
    status: int
    clean: bool


def source_name(text: str) -> str:
    """A source's name as stored and shown: a path's bytes that are not UTF-8 (which Python
    carries as lone surrogates) written as `\\xNN`. Such a name once made every commit fail:
    DuckDB refuses text it cannot encode, and the checkpoint carries the name."""
    if text.isascii():
        return text
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def file_stream(path: str | os.PathLike[str]) -> str:
    """A followed path's stream: the absolute path it follows (not where a link on it points
    today), whatever the source is called. Its generations are told apart by fingerprint."""
    return source_name(f"file:{os.path.abspath(path)}")


def slices(chunk: Chunk, size: int) -> list[Chunk]:
    """A chunk cut at line ends into pieces of about `size` bytes (a line longer than that
    stays whole), so that a backlog is scanned in bites the event loop can wait between."""
    if len(chunk.data) <= size:
        return [chunk]
    # a span other than the data's length is made at the chunk's end (its last line cut or
    # given a newline): the last piece carries it
    extra = 0 if chunk.span is None else chunk.span - len(chunk.data)
    pieces, start = [], 0
    while start < len(chunk.data):
        end = chunk.data.find(b"\n", start + size - 1) + 1 or len(chunk.data)
        if len(chunk.data) - end < size // 4:  # no crumb of a piece at the end
            end = len(chunk.data)
        first, last = chunk.offset + start, chunk.offset + end
        pieces.append(Chunk(chunk.source, chunk.generation, chunk.data[start:end], first,
                            chunk.new_generation and start == 0,
                            tuple(m for m in chunk.marks if first < m[0] <= last),
                            chunk.path,
                            end - start + extra if extra and end == len(chunk.data) else None,
                            chunk.first_line if start == 0 else None,
                            tuple(o for o in chunk.launches if first <= o < last),
                            chunk.stream,
                            tuple(e for e in chunk.exits if first < e.offset <= last)))
        start = end
    return pieces


class Source(Protocol):
    name: str

    def chunks(self) -> AsyncIterator[Chunk]:
        """Chunks until the source ends (stdin EOF) or the daemon stops it."""

    async def close(self) -> None: ...


class MemorySource:
    """Yields given byte strings as chunks: a source for tests of everything downstream."""

    def __init__(self, name: str, parts: Sequence[bytes], delay: float = 0.0) -> None:
        self.name = name
        self.parts = list(parts)
        self.delay = delay

    async def chunks(self) -> AsyncIterator[Chunk]:
        offset = 0
        for i, part in enumerate(self.parts):
            if self.delay:
                await asyncio.sleep(self.delay)
            yield Chunk(self.name, "memory", part, offset, new_generation=i == 0)
            offset += len(part)

    async def close(self) -> None:
        return None
