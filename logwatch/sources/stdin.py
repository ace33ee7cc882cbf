"""Read a pipe (`vllm serve ... 2>&1 | logwatch daemon --stdin`) until end of input."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import BinaryIO

from logwatch.sources.base import Chunk

READ_BYTES = 1 << 16


class StdinSource:
    def __init__(self, stream: BinaryIO | None = None, name: str = "stdin") -> None:
        self.stream = stream or sys.stdin.buffer
        self.name = name

    async def close(self) -> None:
        return None

    async def chunks(self) -> AsyncIterator[Chunk]:
        loop = asyncio.get_running_loop()
        offset, partial, first = 0, b"", True
        while True:
            # read1 returns what the pipe has now (at most READ_BYTES), blocking in a thread
            read = getattr(self.stream, "read1", self.stream.read)
            data = await loop.run_in_executor(None, read, READ_BYTES)
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
