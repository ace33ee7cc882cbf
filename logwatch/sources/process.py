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
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import BinaryIO

from logwatch.core.safe_text.redact import redact_argv
from logwatch.core.safe_text.visible import visible
from logwatch.sources.base import Chunk
from logwatch.sources.dies_with_parent import GroupWatch, shim_available, wrapped

READ_BYTES = 1 << 16
STOP_SECONDS = 30.0  # after SIGTERM/SIGINT, a child still running is killed ([run] stop_seconds)


class ProcessSource:
    replayable = False  # unread output blocks the child, and is never offered again

    def __init__(self, argv: Sequence[str], name: str = "run",
                 passthrough: bool = True, umask: int = -1,
                 stop_seconds: float = STOP_SECONDS) -> None:
        self.argv = list(argv)
        self.stop_seconds = stop_seconds
        self._deadline: asyncio.TimerHandle | None = None
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
        self.interrupted = False  # the operator's signal was forwarded: no next child
        self.closed = False  # the run is ending: no next child either

    def forward(self, signum: int) -> None:
        """A signal from the operator: the run ends with this child. The first is sent to
        the child's whole process group; a second one, or the child still running
        `stop_seconds` later, kills the group (SIGKILL), said on stderr."""
        name = signal.Signals(signum).name
        if self.interrupted:
            self.kill_child(f"a second signal ({name})")
            return
        self.interrupted = True
        self.stop_child(signum)

    def stop_child(self, signum: int = signal.SIGTERM) -> None:
        """`signum` to the child's process group, SIGKILL after `stop_seconds` if it still
        runs (a relaunch stopping it, or the operator)."""
        if not self.running():
            return
        self.signal_child(signum)
        if self._deadline is None:
            name = signal.Signals(signum).name
            self._deadline = asyncio.get_running_loop().call_later(
                self.stop_seconds, self.kill_child,
                f"did not stop within {self.stop_seconds:g} s of {name}")

    def kill_child(self, why: str) -> None:
        """SIGKILL to the child's process group, said on stderr."""
        if not self.running():
            return
        assert self.process is not None
        said = f"pid {self.process.pid} {why}: SIGKILL to its process group"
        self.events.append(said)
        sys.stderr.write(visible(f"logwatch: {self.name}: {said}") + "\n")
        sys.stderr.flush()
        self.signal_child(signal.SIGKILL)

    def signal_child(self, signum: int) -> None:
        """Send a signal to the child's process group."""
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signum)

    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    @property
    def ending(self) -> bool:
        """No next child: the operator asked the run to stop, or it is ending."""
        return self.interrupted or self.closed

    async def close(self) -> None:
        self.closed = True
        self.stop_child(signal.SIGTERM)

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
            if self.next_launch is None or self.ending:
                return
            following = await self.next_launch(self.returncode)
            if following is None or self.ending:
                return
            argv, env = following

    async def _child(self, argv: Sequence[str], env: Mapping[str, str] | None
                     ) -> AsyncIterator[Chunk]:
        self.returncode = None
        self._deadline = None
        try:  # through the shim: the child dies with us, even by SIGKILL
            self.process = process = await asyncio.create_subprocess_exec(
                *wrapped(argv, env), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True, umask=self.umask,
                env=dict(env) if env is not None else None)
        except OSError as exc:
            self.returncode = 127
            self.events.append(f"cannot start {argv[0]}: {exc.strerror or exc}")
            if self.on_start is not None:
                self.on_start()
            return
        if self.on_start is not None:
            self.on_start()
        # the command's group dies with us too (vLLM's EngineCore and workers in it)
        watch = GroupWatch(process.pid) if shim_available() else None
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
            if watch is not None:
                watch.stop()
            how = (f"killed by signal {-self.returncode}" if self.returncode < 0
                   else f"exit code {self.returncode}")
            self.events.append(f"pid {process.pid} ended: {how}")
        finally:
            for pump in pumps:
                pump.cancel()
            if self._deadline is not None:
                self._deadline.cancel()
            if process.returncode is None:  # the run stops: the child with it, whatever it takes
                self.signal_child(signal.SIGTERM)
                try:
                    await asyncio.wait_for(process.wait(), self.stop_seconds)
                except TimeoutError:
                    self.kill_child(f"did not stop within {self.stop_seconds:g} s of SIGTERM")
                except BaseException:
                    self.signal_child(signal.SIGKILL)
                    raise
            if watch is not None:
                watch.stop()
