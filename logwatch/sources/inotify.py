"""Wake-ups for a followed file from Linux inotify, read on the event loop itself.

vLLM writes a log line per write(2), so a busy server makes a thousand IN_MODIFY events a
second. Waking once per event (a watchdog thread hands each to the loop) costs a large share
of a core; here the watch's file descriptor sits in the event loop and wake-ups are spaced:
the first event after a quiet spell wakes the reader `burst` seconds later (2 ms: the rest of
a burst of writes lands), and while the writer keeps writing there is at most one wake-up per
`coalesce` seconds (25 ms): the kernel merges the identical events queued meanwhile, one read
drains them, and the file is read once for all of them.

Falls back (returns None from `open_watch`) where inotify is not there: the caller polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import struct
from pathlib import Path

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
DIRECTORY_EVENTS = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO
                    | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF)
HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)
COALESCE_SECONDS = 0.025
BURST_SECONDS = 0.002

_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL | None:
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        if name is None:
            return None
        with contextlib.suppress(OSError):
            _libc = ctypes.CDLL(name, use_errno=True)
    return _libc


def names_in(data: bytes) -> list[str]:
    """The names carried by a buffer of inotify events ("" for the watched directory)."""
    out, pos = [], 0
    while pos + HEADER.size <= len(data):
        _, _, _, length = HEADER.unpack_from(data, pos)
        raw = data[pos + HEADER.size: pos + HEADER.size + length]
        out.append(raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape"))
        pos += HEADER.size + length
    return out


class DirectoryWatch:
    """Wakes a waiter when something happens to `name` (or `name.*`) in a directory."""

    def __init__(self, fd: int, name: str, loop: asyncio.AbstractEventLoop,
                 coalesce: float, burst: float = BURST_SECONDS) -> None:
        self.fd, self.name, self.loop = fd, name, loop
        self.coalesce, self.burst = coalesce, burst
        self.reads = 0  # wake-ups handed to the source (for tests and the benchmark)
        self._last_wake = float("-inf")
        self._waiter: asyncio.Future[bool] | None = None

    def _wake(self, readable: bool) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(readable)

    async def _readable(self, deadline: float) -> bool:
        """Until the descriptor is readable (True) or the deadline (False)."""
        self._waiter = self.loop.create_future()
        self.loop.add_reader(self.fd, self._wake, True)
        timer = self.loop.call_at(deadline, self._wake, False)
        try:
            return await self._waiter
        finally:
            self.loop.remove_reader(self.fd)
            timer.cancel()
            self._waiter = None

    def _drain(self) -> bool:
        """Read every queued event; whether one concerns the followed file."""
        relevant = False
        while True:
            try:
                data = os.read(self.fd, 64 << 10)
            except BlockingIOError:
                return relevant
            except OSError:
                return True
            if not data:
                return relevant
            # the file, its rotated copies (vllm.log.1: drained after a rename), or the
            # directory itself
            relevant = relevant or any(n == "" or n.startswith(self.name)
                                       for n in names_in(data))

    async def wait(self, timeout: float) -> None:
        """Until an event about the file (or `timeout`); several events make one wake-up."""
        loop = self.loop
        deadline = loop.time() + timeout
        while await self._readable(deadline):
            at = max(loop.time() + self.burst, self._last_wake + self.coalesce)
            await asyncio.sleep(at - loop.time())  # let the writer's events pile up
            if self._drain():
                self._last_wake = loop.time()
                self.reads += 1
                return

    def stop(self) -> None:
        self._wake(False)
        with contextlib.suppress(OSError):
            os.close(self.fd)


def open_watch(path: Path, loop: asyncio.AbstractEventLoop,
               coalesce: float = COALESCE_SECONDS) -> DirectoryWatch | None:
    """Watch `path`'s directory for events about `path`; None where inotify is unavailable
    (not Linux, the directory is missing, or the watch limit is reached)."""
    lib = _lib()
    if lib is None or not hasattr(lib, "inotify_init1"):
        return None
    fd = lib.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        return None
    wd = lib.inotify_add_watch(fd, os.fsencode(path.parent), DIRECTORY_EVENTS)
    if wd < 0:
        os.close(fd)
        return None
    return DirectoryWatch(fd, path.name, loop, coalesce)
