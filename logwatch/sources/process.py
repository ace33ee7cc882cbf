"""Run vLLM as a child (`logwatch run -- vllm serve ...`) and read what it prints.

The child gets its own process group (signals reach vLLM's workers too); stdout and stderr are
read in blocks (no line-length limit to trip over), passed through to logwatch's own streams,
and merged into one stream of complete lines in arrival order. Each child is a generation of
its own (`run:PID:NANOSECONDS`): its line numbers start at 1, and its findings never pass for
an earlier child's. Its output cannot be resumed: the position is kept under the source's name,
each child's replacing the last.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from typing import BinaryIO

from logwatch.sources.base import Chunk

READ_BYTES = 1 << 16


class ProcessSource:
    replayable = False  # unread output blocks the child, and is never offered again

    def __init__(self, argv: Sequence[str], name: str = "run",
                 passthrough: bool = True, umask: int = -1) -> None:
        self.argv = list(argv)
        self.umask = umask  # the child's (-1: ours)
        self.name = name
        self.passthrough = passthrough
        self.process: asyncio.subprocess.Process | None = None
        self.returncode: int | None = None
        self.events: list[str] = []
        self.generation = ""

    def forward(self, signum: int) -> None:
        """Send a signal to the child's whole process group."""
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signum)

    async def close(self) -> None:
        self.forward(signal.SIGTERM)

    async def _pump(self, stream: asyncio.StreamReader, echo: BinaryIO | None,
                    queue: asyncio.Queue[bytes | None]) -> None:
        partial = b""
        while True:
            data = await stream.read(READ_BYTES)
            if not data:
                if partial:
                    await queue.put(partial + b"\n")
                await queue.put(None)
                return
            if echo is not None:
                echo.write(data)
                echo.flush()
            data = partial + data
            cut = data.rfind(b"\n")
            if cut < 0:
                partial = data
                continue
            partial = data[cut + 1:]
            await queue.put(data[: cut + 1])

    async def chunks(self) -> AsyncIterator[Chunk]:
        try:
            self.process = process = await asyncio.create_subprocess_exec(
                *self.argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True, umask=self.umask)
        except OSError as exc:
            self.returncode = 127
            self.events.append(f"cannot start {self.argv[0]}: {exc.strerror or exc}")
            return
        self.generation = f"run:{process.pid}:{time.time_ns()}"
        self.events.append(f"started pid {process.pid}: {' '.join(self.argv)}")
        assert process.stdout is not None and process.stderr is not None
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=256)
        out = sys.stdout.buffer if self.passthrough else None
        err = sys.stderr.buffer if self.passthrough else None
        pumps = [asyncio.create_task(self._pump(process.stdout, out, queue)),
                 asyncio.create_task(self._pump(process.stderr, err, queue))]
        offset, open_streams, first = 0, 2, True
        try:
            while open_streams:
                data = await queue.get()
                if data is None:
                    open_streams -= 1
                    continue
                yield Chunk(self.name, self.generation, data, offset, first)
                offset += len(data)
                first = False
            self.returncode = await process.wait()
            how = (f"killed by signal {-self.returncode}" if self.returncode < 0
                   else f"exit code {self.returncode}")
            self.events.append(f"pid {process.pid} ended: {how}")
        finally:
            for pump in pumps:
                pump.cancel()
            if process.returncode is None:
                self.forward(signal.SIGTERM)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(process.wait(), 10)
