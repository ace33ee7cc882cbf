"""Wake-ups for a followed file from Linux inotify, read on the event loop itself.

vLLM writes a log line per write(2), so a busy server makes a thousand IN_MODIFY events a
second. Waking once per event (a watchdog thread hands each to the loop) costs a large share
of a core; here the watch's file descriptor sits in the event loop and wake-ups are spaced:
the first event after a quiet spell wakes the reader `burst` seconds later (2 ms: the rest of
a burst of writes lands), and while the writer keeps writing the events are drained on a
timer every `coalesce` seconds (25 ms) without listening in between: the kernel merges the
identical events queued meanwhile, one read drains them, the file is read once for all of
them, and the event loop wakes once per `coalesce`.

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

from logwatch.daemon.wakeup import Wakeup

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
    """Wakes a waiter when something happens to `name` (or `name.*`) in a directory.

    Driven by callbacks. Quiet: listen; the first event schedules a drain `burst` seconds on.
    A drain that finds events about the file wakes the waiter (or is remembered for its next
    wait) and schedules the next drain `coalesce` seconds on; one that finds none listens
    again."""

    def __init__(self, fd: int, name: str, loop: asyncio.AbstractEventLoop,
                 coalesce: float, burst: float = BURST_SECONDS) -> None:
        self.fd, self.name, self.loop = fd, name, loop
        self.coalesce, self.burst = coalesce, burst
        self.reads = 0  # wake-ups handed to the source (for tests and the benchmark)
        self._last_wake = float("-inf")
        self._woken = Wakeup()
        self._listening = False
        self._closed = False
        self._listen()

    def _listen(self) -> None:
        if not self._listening and not self._closed:
            self.loop.add_reader(self.fd, self._readable)
            self._listening = True

    def _readable(self) -> None:
        self.loop.remove_reader(self.fd)  # quiet until the events are drained
        self._listening = False
        now = self.loop.time()
        self.loop.call_at(max(now + self.burst, self._last_wake + self.coalesce), self._settle)

    def _settle(self) -> None:
        if self._closed:
            return
        if self._drain():
            self._last_wake = self.loop.time()
            self.reads += 1
            self._woken.set()
            # still flowing, most likely: look again after `coalesce` without listening in
            # between, so a steady writer costs one loop wake-up per `coalesce`, not two
            self.loop.call_at(self._last_wake + self.coalesce, self._settle)
        else:
            self._listen()  # quiet: the next event wakes us (after `burst`)

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

    @property
    def quiet(self) -> bool:
        """No drain is due: events so far are all handed on, the next one wakes it."""
        return self._listening or self._closed

    async def wait(self, timeout: float) -> None:
        """Until an event about the file (or `timeout`); several events make one wake-up."""
        await self._woken.wait(timeout)
        self._woken.clear()

    def stop(self) -> None:
        self._closed = True
        if self._listening:
            self.loop.remove_reader(self.fd)
            self._listening = False
        self._woken.set()
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
