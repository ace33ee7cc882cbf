"""Read a pipe (`vllm serve ... 2>&1 | logwatch daemon --stdin`) until end of input.

A pipe, terminal or socket is read without blocking, woken by the event loop when data is
there, so no thread sits in read(2) when the daemon is told to stop (a blocked reader thread
kept a stopped daemon alive for as long as the writer kept the pipe open). A regular file
(`< vllm.log`) never blocks and is read as it is.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import BinaryIO

from logwatch.sources.base import Chunk

READ_BYTES = 1 << 16


class StdinSource:
    replayable = False  # unread input blocks its writer, and is never offered again

    def __init__(self, stream: BinaryIO | None = None, name: str = "stdin") -> None:
        self.stream = stream or sys.stdin.buffer
        self.name = name

    async def close(self) -> None:
        return None

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
        offset, partial, first = 0, b"", True
        async for data in self._reads():
            if not data:
                if partial:
                    yield Chunk(self.name, "stdin", partial + b"\n", offset, first)
                return
            data = partial + data
            cut = data.rfind(b"\n")
            if cut < 0:
                partial = data
                continue
            lines, partial = data[: cut + 1], data[cut + 1:]
            yield Chunk(self.name, "stdin", lines, offset, first)
            offset += len(lines)
            first = False
