"""Reading a followed log file: open only regular files, never blocking, and split what is
read into complete lines, an over-long line cut for matching while offsets stay true.

A followed path can be swapped for a FIFO, a device or a socket by anyone who can write the
log directory; `open()` on a FIFO with no writer blocks the event loop for good (and with it
SIGTERM). The path is opened with O_NONBLOCK (which a regular file ignores) and anything that
is not a regular file is refused and named. Symbolic links are followed: a path that links
to the current log (`current.log -> vllm-2026-11-30.log`) is a common layout, and what the
link points at passes the same check, and one more: whoever can write the directories on the
way must be able to read the file themselves (file_access.py), so a link to /etc/shadow is
refused.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from logwatch.sources.file_access import refusal

# A line longer than this is cut for matching: its first LINE_LIMIT bytes are handed on as a
# line, the rest is read and dropped (never held) up to its newline.
LINE_LIMIT = 64 << 20
READ_BYTES = 8 << 20  # one read of a log file


class NotRegular(Exception):
    """A path holds something other than a regular file, or a file that is not read for
    those who could have put it there (file_access.py); the message says which."""


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: Path) -> tuple[IO[bytes], os.stat_result] | None:
    """The regular file at `path`, opened for reading, with its stat; None when nothing
    readable is there. Raises NotRegular for anything else (FIFO, device, socket, directory),
    without opening a device at all in the usual case and without blocking in any case."""
    try:
        before = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(before.st_mode):  # a device is not even opened (opening has effects)
        raise NotRegular(f"{path} is {kind_of(before.st_mode)}, not a regular file")
    try:  # swapped between the stat and the open: O_NONBLOCK keeps a FIFO from blocking
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegular(f"{path} is {kind_of(st.st_mode)}, not a regular file")
    why = refusal(path, st)  # a link to a file its directory's writers could not read
    if why is not None:
        os.close(fd)
        raise NotRegular(why)
    return os.fdopen(fd, "rb"), st


@dataclass(frozen=True, slots=True)
class Piece:
    """Complete lines to hand on, standing for `span` bytes of the file: more than
    len(data) when a line was cut, one less when a last line had no newline."""

    data: bytes
    span: int


class LineSplitter:
    """Blocks read from a file in, pieces of complete lines out. Holds at most LINE_LIMIT
    bytes of an unterminated line; the bytes of it beyond that are only counted."""

    def __init__(self, limit: int = LINE_LIMIT) -> None:
        self.limit = limit
        self._head = bytearray()  # the unterminated line so far (up to `limit` bytes)
        self._dropped = 0  # bytes of that line beyond `limit`, read and not kept

    @property
    def pending(self) -> int:
        """Bytes read from the file and not handed on yet."""
        return len(self._head) + self._dropped

    @property
    def cutting(self) -> bool:
        return self._dropped > 0

    def _keep(self, data: bytes | memoryview) -> None:
        room = self.limit - len(self._head)
        if len(data) <= room:
            self._head += data
        else:
            self._head += data[:room]
            self._dropped += len(data) - room

    def feed(self, block: bytes) -> list[Piece]:
        last = block.rfind(b"\n")
        if last < 0:
            self._keep(block)
            return []
        out: list[Piece] = []
        view = memoryview(block)
        first = block.find(b"\n")
        self._keep(view[:first])  # the line in progress ends here
        if self._dropped:
            out.append(Piece(bytes(self._head) + b"\n", self.pending + 1))
            text = b""
        else:
            text = bytes(self._head) + b"\n"
        self._head, self._dropped = bytearray(), 0
        body = view[first + 1:last + 1]
        if len(body) > self.limit:  # blocks larger than the limit: a line in them may be over
            out += self._complete(text, bytes(body))
        elif lines := text + bytes(body):
            out.append(Piece(lines, len(lines)))
        self._keep(view[last + 1:])
        return out

    def _complete(self, text: bytes, body: bytes) -> list[Piece]:
        """Complete lines, each over the limit cut, the others together."""
        out: list[Piece] = []
        run, pos = bytearray(text), 0
        while pos < len(body):
            end = body.find(b"\n", pos)
            if end - pos > self.limit:
                if run:
                    out.append(Piece(bytes(run), len(run)))
                    run = bytearray()
                out.append(Piece(body[pos:pos + self.limit] + b"\n", end + 1 - pos))
            else:
                run += body[pos:end + 1]
            pos = end + 1
        if run:
            out.append(Piece(bytes(run), len(run)))
        return out

    def finish(self) -> Piece | None:
        """The unterminated last line of a finished generation, with a newline for matching
        (not counted in its span: the offset stays the file's size)."""
        if not self.pending:
            return None
        piece = Piece(bytes(self._head) + b"\n", self.pending)
        self._head, self._dropped = bytearray(), 0
        return piece

    def reset(self) -> None:
        self._head, self._dropped = bytearray(), 0
