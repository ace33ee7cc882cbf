"""Read a pipe (`vllm serve ... 2>&1 | logwatch daemon --stdin`) until end of input.

A pipe, terminal or socket is read without blocking, woken by the event loop when data is
there, so no thread sits in read(2) when the daemon is told to stop (a blocked reader thread
kept a stopped daemon alive for as long as the writer kept the pipe open). A regular file
(`< vllm.log`) never blocks and is read as it is.

Each run is a generation of its own (`stdin:PID:NANOSECONDS`): line numbers start again at 1
with every run, and findings are identified by generation and line, so a second crash piped in
later must not pass for the first one's lines. A regular file read from its start is the file
generation a file source would name it (`device:inode:sha256(first KiB)/length`): the same
file fed again records nothing twice, and neither does a file both followed and fed.
A pipe cannot be resumed: its position is kept under the source's name, each run's replacing
the last (a row per run would pile up, never read).
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import time
from collections.abc import AsyncIterator
from typing import BinaryIO

from logwatch.sources.base import Chunk
from logwatch.sources.rotated import FINGERPRINT_BYTES, head_fingerprint

READ_BYTES = 1 << 16


class StdinSource:
    replayable = False  # unread input blocks its writer, and is never offered again

    def __init__(self, stream: BinaryIO | None = None, name: str = "stdin") -> None:
        self.stream = stream or sys.stdin.buffer
        self.name = name
        self.generation = ""  # named when reading starts (`input_generation`)

    async def close(self) -> None:
        return None

    @staticmethod
    def input_generation(fd: int) -> str:
        """A regular file read from its start: its file generation; anything else: this run."""
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and os.lseek(fd, 0, os.SEEK_CUR) == 0:
            head = os.pread(fd, FINGERPRINT_BYTES, 0)
            return f"{st.st_dev}:{st.st_ino}:{head_fingerprint(head)}"
        return f"stdin:{os.getpid()}:{time.time_ns()}"

    async def _reads(self) -> AsyncIterator[bytes]:
        """What the input has, as it comes; b"" once at its end."""
        fd = self.stream.fileno()
        if stat.S_ISREG(os.fstat(fd).st_mode):
            while data := os.read(fd, READ_BYTES):
                yield data
                await asyncio.sleep(0)  # a big file: let the loop breathe between reads
            yield b""
            return
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        was_blocking = os.get_blocking(fd)
        os.set_blocking(fd, False)
        loop.add_reader(fd, ready.set)
        try:
            while True:
                try:
                    data = os.read(fd, READ_BYTES)
                except BlockingIOError:
                    ready.clear()
                    await ready.wait()
                    continue
                yield data
                if not data:
                    return
        finally:
            loop.remove_reader(fd)
            os.set_blocking(fd, was_blocking)  # the file description is shared (a terminal)

    async def chunks(self) -> AsyncIterator[Chunk]:
        self.generation = generation = self.input_generation(self.stream.fileno())
        offset, partial, first = 0, b"", True
        async for data in self._reads():
            if not data:
                if partial:
                    yield Chunk(self.name, generation, partial + b"\n", offset, first)
                return
            data = partial + data
            cut = data.rfind(b"\n")
            if cut < 0:
                partial = data
                continue
            lines, partial = data[: cut + 1], data[cut + 1:]
            yield Chunk(self.name, generation, lines, offset, first)
            offset += len(lines)
            first = False
