"""Follow a log file through rotation: inotify wake-ups (watchdog), polling as a fallback.

A file generation is identified by device, inode and a hash of its first bytes. Rename
rotation (logrotate `create`, or delete and re-create): the old file is drained for a grace
period (a writer that keeps its fd goes on writing there), then the new one is read from 0.
copytruncate (size drops below the offset): the rest of the rotated copy is read from the old
offset when a sibling with the same first bytes exists, then the truncated file from 0.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from logwatch.sources.base import Chunk
from logwatch.sources.inotify import open_watch
from logwatch.wakeup import Wakeup

FINGERPRINT_BYTES = 1024
READ_BYTES = 8 << 20
RUNAWAY_BYTES = 64 << 20  # an unterminated line this long is handed on as it is


@dataclass(frozen=True, slots=True)
class FilePosition:
    """Where reading a generation stopped: what a checkpoint stores."""

    generation: str  # "dev:ino:sha(first bytes)"
    offset: int
    line: int


def fingerprint(fh: IO[bytes]) -> str:
    """Hash of the first bytes (up to FINGERPRINT_BYTES) of an open file."""
    here = fh.tell()
    fh.seek(0)
    head = fh.read(FINGERPRINT_BYTES)
    fh.seek(here)
    return hashlib.sha256(head).hexdigest()[:20] + f"/{len(head)}"


def _same_head(fh: IO[bytes], stored: str) -> bool:
    """Whether a file starts with the bytes a stored fingerprint hashed."""
    digest, _, length = stored.rpartition("/")
    here = fh.tell()
    fh.seek(0)
    head = fh.read(int(length) if length.isdigit() else FINGERPRINT_BYTES)
    fh.seek(here)
    return hashlib.sha256(head).hexdigest()[:20] == digest


class _Wakeup:
    """Wake-ups when the followed file changes: inotify read on the event loop (coalesced
    bursts, see sources/inotify.py); watchdog where that is not available (other kernels);
    polling every `poll_interval` always covers filesystems that send no events."""

    def __init__(self, path: Path, loop: asyncio.AbstractEventLoop,
                 use_inotify: bool) -> None:
        self.event = Wakeup()
        self._observer: Any = None
        self._watch = open_watch(path, loop) if use_inotify else None
        if not use_inotify or self._watch is not None:
            return
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:
            return
        wake = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                loop.call_soon_threadsafe(wake.event.set)

        try:
            observer = Observer()
            observer.schedule(Handler(), str(path.parent), recursive=False)
            observer.daemon = True
            observer.start()
            self._observer = observer
        except OSError:
            self._observer = None  # no inotify here (or no directory yet): poll

    async def wait(self, timeout: float) -> None:
        if self._watch is not None:
            await self._watch.wait(timeout)
            return
        await self.event.wait(timeout)
        self.event.clear()

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()
        if self._observer is not None:
            self._observer.stop()


class FileSource:
    """Chunks of complete lines from one path, across rotations."""

    def __init__(self, path: str | Path, name: str | None = None,
                 resume: FilePosition | None = None, poll_interval: float = 1.0,
                 grace: float = 2.0, use_inotify: bool = True) -> None:
        self.path = Path(path)
        self.name = name or f"file:{self.path}"
        self.resume = resume
        self.poll_interval = poll_interval
        self.grace = grace
        self.use_inotify = use_inotify
        self.events: list[str] = []  # rotations and recoveries, for the operator
        self._closed = False

    async def close(self) -> None:
        self._closed = True

    def _chunk(self, generation: str, data: bytes, offset: int, new: bool = False) -> Chunk:
        return Chunk(self.name, generation, data, offset, new, path=str(self.path))

    def _open(self) -> tuple[IO[bytes], os.stat_result] | None:
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - held across rotations
        except OSError:
            return None
        return fh, os.fstat(fh.fileno())

    @staticmethod
    def _generation(fh: IO[bytes], st: os.stat_result) -> str:
        return f"{st.st_dev}:{st.st_ino}:{fingerprint(fh)}"

    def _read_lines(self, fh: IO[bytes], partial: bytes) -> tuple[bytes, bytes]:
        """(complete lines, the incomplete tail) from what is readable now."""
        data = partial + fh.read(READ_BYTES)
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) > RUNAWAY_BYTES:  # binary junk with no newline: do not hoard it
                self.events.append(f"{len(data)} bytes without a newline handed on as a line")
                return data + b"\n", b""
            return b"", data
        return data[: cut + 1], data[cut + 1:]

    def _rotated_copy(self, generation: str) -> Path | None:
        """A sibling (vllm.log.1, ...) that starts with our generation's first bytes."""
        stored = generation.rsplit(":", 1)[-1]
        for sibling in sorted(self.path.parent.glob(self.path.name + ".*")):
            if sibling.suffix == ".gz":
                continue
            try:
                with open(sibling, "rb") as fh:
                    if _same_head(fh, stored):
                        return sibling
            except OSError:
                continue
        return None

    async def chunks(self) -> AsyncIterator[Chunk]:
        loop = asyncio.get_running_loop()
        wake = _Wakeup(self.path, loop, self.use_inotify)
        try:
            opened = None
            while opened is None and not self._closed:
                opened = self._open()
                if opened is None:
                    await wake.wait(self.poll_interval)
            if opened is None:
                return
            fh, st = opened
            generation = self._generation(fh, st)
            offset, new_generation = 0, True
            resume = self.resume
            if resume is not None:
                stored = resume.generation.rsplit(":", 1)[-1]
                same_file = resume.generation.startswith(f"{st.st_dev}:{st.st_ino}:")
                if same_file and _same_head(fh, stored) and st.st_size >= resume.offset:
                    generation, offset, new_generation = resume.generation, resume.offset, False
                    fh.seek(offset)
                elif (copy := self._rotated_copy(resume.generation)) is not None:
                    with open(copy, "rb") as old:  # rotated while we were down: finish it
                        old.seek(resume.offset)
                        rest = old.read()
                        rest = rest[: rest.rfind(b"\n") + 1]
                    self.events.append(f"resumed {resume.generation} from rotated copy {copy}")
                    if rest:
                        yield self._chunk(resume.generation, rest, resume.offset)
            partial = b""
            rotated_at: float | None = None
            while not self._closed:
                data, partial = self._read_lines(fh, partial)
                if data:
                    if new_generation:
                        generation = self._generation(fh, os.fstat(fh.fileno()))
                    yield self._chunk(generation, data, offset, new_generation)
                    offset += len(data)
                    new_generation = False
                    rotated_at = None if rotated_at is None else time.monotonic()
                    continue
                try:
                    now = os.stat(self.path)
                except FileNotFoundError:
                    now = None
                current = os.fstat(fh.fileno())
                if now is not None and now.st_ino == current.st_ino \
                        and now.st_dev == current.st_dev:
                    if now.st_size < offset + len(partial):  # copytruncate
                        copy = self._rotated_copy(generation)
                        if copy is not None:
                            with open(copy, "rb") as old:
                                old.seek(offset + len(partial))
                                rest = partial + old.read()
                                rest = rest[: rest.rfind(b"\n") + 1]
                            if rest:
                                yield self._chunk(generation, rest, offset)
                            self.events.append(f"copytruncate: read the rest of {generation} "
                                               f"from {copy}")
                        else:
                            self.events.append(f"copytruncate: no rotated copy of {generation}"
                                               " found; its unread tail is lost")
                        fh.seek(0)
                        offset, partial, new_generation = 0, b"", True
                        continue
                else:  # renamed or deleted: drain the old file for a grace period
                    rotated_at = rotated_at or time.monotonic()
                    if time.monotonic() - rotated_at >= self.grace:
                        replacement = self._open()
                        if replacement is not None or now is None:
                            if partial:  # a last line without newline: hand it on
                                yield self._chunk(generation, partial + b"\n", offset)
                            fh.close()
                            self.events.append(f"rotation: finished {generation}")
                            while replacement is None and not self._closed:
                                await wake.wait(self.poll_interval)
                                replacement = self._open()
                            if replacement is None:
                                return
                            fh, st = replacement
                            offset, partial, new_generation, rotated_at = 0, b"", True, None
                            continue
                await wake.wait(min(self.poll_interval,
                                    self.grace if rotated_at is not None else self.poll_interval))
        finally:
            wake.stop()
