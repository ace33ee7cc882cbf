"""Run vLLM as a child (`logwatch run -- vllm serve ...`) and read what it prints.

The child gets its own process group (signals reach vLLM's workers too); stdout and stderr are
read in blocks (no line-length limit to trip over), passed through to logwatch's own streams,
and merged into one stream of complete lines in arrival order. Each child is a generation of
its own (`run:PID:NANOSECONDS`): its line numbers start at 1, and its findings never pass for
an earlier child's. Its output cannot be resumed: the position is kept under the source's name,
each child's replacing the last.

When a child ends, `on_exit` hears its status and `next_launch` (when set) may give the argv
and environment of the next child: a relaunch (relaunch/run_child.py). Without one, or when a
signal was forwarded to the child, the source ends with the child.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import BinaryIO

from logwatch.core.safe_text.redact import redact_argv
from logwatch.sources.base import Chunk

READ_BYTES = 1 << 16
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def dies_with_us() -> Callable[[], None] | None:
    """In the child before it runs vLLM: SIGTERM to it when logwatch dies, even by SIGKILL (a
    supervisor restarted by systemd must not find the last vLLM still holding the GPUs and
    the port). Linux only; elsewhere nothing."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not after fork
    except (OSError, AttributeError):
        return None
    return lambda: prctl(PR_SET_PDEATHSIG, signal.SIGTERM) and None


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
        self.on_exit: Callable[[int], None] | None = None  # each child's status, as it ends
        self.on_start: Callable[[], None] | None = None  # each child started (or not)
        # the next child's (argv, environment) once one ended, or None to end
        self.next_launch: Callable[[int], Awaitable[
            tuple[Sequence[str], Mapping[str, str]] | None]] | None = None
        self.interrupted = False  # a signal was forwarded: no next child

    def forward(self, signum: int) -> None:
        """Send a signal to the child's whole process group (from the operator: the run
        ends with this child)."""
        self.interrupted = True
        self.signal_child(signum)

    def signal_child(self, signum: int) -> None:
        """Send a signal to the child's process group (a relaunch stopping it)."""
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signum)

    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

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
        argv: Sequence[str] = self.argv
        env: Mapping[str, str] | None = None  # ours
        while True:
            async for chunk in self._child(argv, env):
                yield chunk
            assert self.returncode is not None
            if self.on_exit is not None:
                self.on_exit(self.returncode)
            if self.next_launch is None or self.interrupted:
                return
            following = await self.next_launch(self.returncode)
            if following is None or self.interrupted:
                return
            argv, env = following

    async def _child(self, argv: Sequence[str], env: Mapping[str, str] | None
                     ) -> AsyncIterator[Chunk]:
        self.returncode = None
        try:
            self.process = process = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True, umask=self.umask,
                env=dict(env) if env is not None else None, preexec_fn=dies_with_us())
        except OSError as exc:
            self.returncode = 127
            self.events.append(f"cannot start {argv[0]}: {exc.strerror or exc}")
            if self.on_start is not None:
                self.on_start()
            return
        if self.on_start is not None:
            self.on_start()
        self.generation = f"run:{process.pid}:{time.time_ns()}"
        self.events.append(f"started pid {process.pid}: {' '.join(redact_argv(argv))}")
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
                self.signal_child(signal.SIGTERM)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(process.wait(), 10)
