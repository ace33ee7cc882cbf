"""Follow a log file through rotation: inotify wake-ups (watchdog), polling as a fallback.

A generation of the file is named "dev:ino:sha(first bytes)/length" when it is first read;
that name goes into its checkpoint and its finding ids, and once checkpointed it is the
generation's name wherever it turns up later, so a re-read produces the same ids. It is
*recognised* by its first bytes, the dev:ino part only choosing among candidates: a rename
(logrotate `create`) keeps the inode, but a copytruncate copy or a compressed `.2.gz` has
another, and the same first bytes (decompressed).

Rename rotation (`create`, or delete and re-create): the old file is drained for a grace
period (a writer that keeps its fd goes on writing there), then the new one is read from 0.
copytruncate (size drops below the offset): the rest of our generation is read from its
rotated copy. In both cases, and when starting from a checkpoint, every rotated generation
newer than ours (rotated.py orders them) is read, oldest first, before the current file: two
rotations while the daemon was down leave one between them that nothing else would read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from logwatch.core.settings.config import START_AT
from logwatch.daemon.wakeup import Wakeup
from logwatch.own_log import get as get_logger
from logwatch.sources.base import Chunk, file_stream, source_name
from logwatch.sources.inotify import open_watch
from logwatch.sources.reading import READ_BYTES, LineSplitter, NotRegular, open_regular
from logwatch.sources.rotated import (
    Unread,
    every_rotated,
    fingerprint,
    read_unread,
    same_head,
    unread_after,
)


@dataclass(frozen=True, slots=True)
class FilePosition:
    """Where reading a generation stopped: what a checkpoint stores."""

    generation: str  # "dev:ino:sha(first bytes)/length"
    offset: int
    line: int


def _end_of_last_line(fh: IO[bytes], limit: int | None = None) -> tuple[int, int]:
    """(the offset just after the last newline in the first `limit` bytes (all of them with
    None), the number of the line that starts there)."""
    fh.seek(0)
    pos = offset = lines = 0
    while block := fh.read(READ_BYTES if limit is None else min(READ_BYTES, limit - pos)):
        if (count := block.count(b"\n")) > 0:
            lines += count
            offset = pos + block.rfind(b"\n") + 1
        pos += len(block)
    return offset, lines + 1


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
                 grace: float = 2.0, use_inotify: bool = True,
                 start_at: str = "start") -> None:
        """`start_at`: where a first run (no `resume`) starts. "start": the current file
        from its start; "end": after the current file's last complete line (a new daemon on
        an old log); "oldest": every rotated file first, oldest first, then the current one."""
        if start_at not in START_AT:
            raise ValueError(f"start_at must be one of {', '.join(START_AT)}, not {start_at!r}")
        self.path = Path(path)
        self.name = source_name(name or f"file:{self.path}")
        self.stream = file_stream(self.path)  # what its checkpoint is keyed by
        self.resume = resume
        self.poll_interval = poll_interval
        self.grace = grace
        self.use_inotify = use_inotify
        self.start_at = start_at
        self.events: list[str] = []  # rotations and recoveries, for the operator
        self._closed = False
        self._refused: str | None = None  # the last refusal said, not repeated on each try
        self._resumed = False  # the checkpoint's generation is the current file
        self._log = get_logger("logwatch.sources")
        # "end": the end as it is now, when the daemon is made (before it says it is ready),
        # not when its reader first opens the file: lines written in between are read
        self._end_at_start: tuple[int, int, int] | None = None  # (device, inode, size)
        if start_at == "end" and resume is None:
            with contextlib.suppress(OSError):
                st = os.stat(self.path)
                self._end_at_start = (st.st_dev, st.st_ino, st.st_size)

    async def close(self) -> None:
        self._closed = True

    @property
    def refused(self) -> str | None:
        """Why what is at the path is not read now (not a regular file), if so."""
        return self._refused

    def _chunk(self, generation: str, data: bytes, offset: int, new: bool = False,
               span: int | None = None, line: int | None = None) -> Chunk:
        return Chunk(self.name, generation, data, offset, new, path=str(self.path),
                     span=None if span == len(data) else span, first_line=line,
                     stream=self.stream)

    def _open(self) -> tuple[IO[bytes], os.stat_result] | None:
        """The regular file at the path; None (said once) while something else is there."""
        try:
            opened = open_regular(self.path)
        except NotRegular as exc:
            if str(exc) != self._refused:
                self._refused = str(exc)
                self.events.append(f"{exc}: not reading it; waiting for a regular file")
                self._log.warning("not_a_regular_file", path=str(self.path), detail=str(exc))
            return None
        if opened is not None:
            self._refused = None
        return opened

    @staticmethod
    def _generation(fh: IO[bytes], st: os.stat_result) -> str:
        return f"{st.st_dev}:{st.st_ino}:{fingerprint(fh)}"

    async def _read_unread(self, unread: list[Unread]) -> AsyncIterator[Chunk]:
        """The rotated generations `unread_after` found, as chunks of this source."""
        async for generation, piece, offset, new in read_unread(unread, self.events,
                                                                lambda: self._closed):
            yield self._chunk(generation, piece.data, offset, new, piece.span)

    async def _truncated(self, generation: str, offset: int, current: os.stat_result,
                         seen_size: int) -> AsyncIterator[Chunk]:
        """The file was truncated under us (copytruncate): the rest of our generation from
        its rotated copy, and the generations rotated since, when they can be found.
        `seen_size`: the most bytes the generation was seen to hold, so a tail is said lost
        only when bytes of it were in fact never handed on."""
        unread = unread_after(self.path, generation, offset, current)
        if unread is None:
            lost = seen_size - offset
            self.events.append(
                f"copytruncate: no rotated copy of {generation} found; its unread tail, "
                f"{lost:,} bytes from byte {offset:,}, is lost" if lost > 0 else
                f"copytruncate: {self.path} truncated after {generation} was read to its "
                f"end as last seen (byte {offset:,}); no rotated copy of it found")
            return
        async for chunk in self._read_unread(unread):
            yield chunk

    # -- following --------------------------------------------------------------------------
    async def _resume(self, opened: tuple[IO[bytes], os.stat_result] | None
                      ) -> AsyncIterator[Chunk]:
        """From the checkpoint: in the current file when it is that generation (its chunks
        are then left to the caller, which is told through `self._resumed`); else the rest
        of it from the rotated files and every newer rotated generation."""
        assert self.resume is not None
        generation, offset = self.resume.generation, self.resume.offset
        stored = generation.rsplit(":", 1)[-1]
        fh, st = opened if opened is not None else (None, None)

        def is_current(same_inode: bool) -> bool:
            if fh is None or st is None or st.st_size < offset:
                return False
            if same_inode and not generation.startswith(f"{st.st_dev}:{st.st_ino}:"):
                return False
            return same_head(fh, stored)

        if is_current(same_inode=True):
            self._resumed = True
            return
        unread = unread_after(self.path, generation, offset, st)
        if unread is not None:
            async for chunk in self._read_unread(unread):
                yield chunk
            return
        if is_current(same_inode=False):  # a copy of it put in its place
            self.events.append(f"resumed {generation} in {self.path}, a copy of it "
                               "(another inode, the same first bytes)")
            self._resumed = True
            return
        self.events.append(f"the checkpointed generation {generation} (byte {offset}) is "
                           f"neither {self.path} nor one of its rotated files: reading "
                           f"{self.path} from its start; older rotated files are not read")
        self._log.warning("checkpoint_generation_not_found", path=str(self.path),
                          generation=generation, offset=offset)

    async def chunks(self) -> AsyncIterator[Chunk]:
        loop = asyncio.get_running_loop()
        wake = _Wakeup(self.path, loop, self.use_inotify)
        try:
            opened = self._open()
            generation, offset, new_generation = "", 0, True
            self._resumed = False
            if self.resume is not None:
                async for chunk in self._resume(opened):
                    yield chunk
                if self._resumed and opened is not None:
                    generation, offset = self.resume.generation, self.resume.offset
                    new_generation = False
                    opened[0].seek(offset)
            elif self.start_at == "oldest":
                older = every_rotated(self.path, opened[1] if opened is not None else None)
                if older:
                    self.events.append(f"first run: reading {len(older)} rotated file(s) "
                                       f"of {self.path} before it, oldest first")
                async for chunk in self._read_unread(older):
                    yield chunk
            elif self.start_at == "end" and opened is not None:
                then = self._end_at_start
                limit = then[2] if then is not None and then[:2] == (
                    opened[1].st_dev, opened[1].st_ino) else None
                offset, line = await asyncio.to_thread(_end_of_last_line, opened[0], limit)
                opened[0].seek(offset)
                if offset:  # (no complete line yet: nothing to skip, read it from 0)
                    generation, new_generation = self._generation(*opened), False
                    self.events.append(f"started at the end of {self.path}: line {line}, "
                                       f"byte {offset}")
                    # nothing to match; it anchors the start, so a checkpoint records it
                    yield self._chunk(generation, b"", offset, True, line=line)
            if opened is None and self._refused is None:  # a typo must not look like a quiet log
                self.events.append(f"{self.path} does not exist yet: waiting for it")
                self._log.warning("waiting_for_file", path=str(self.path))
            while opened is None and not self._closed:
                await wake.wait(self.poll_interval)
                opened = self._open()
            if opened is None:
                return
            fh, st = opened
            seen_size = st.st_size  # the most bytes this generation was seen to hold
            splitter = LineSplitter()
            rotated_at: float | None = None
            while not self._closed:
                if not new_generation and offset and not same_head(fh, generation.rsplit(
                        ":", 1)[-1]):
                    # truncated and written past our offset before we read again (reading
                    # was paused, or the writer was quick): the size never shows that
                    async for chunk in self._truncated(generation, offset,
                                                       os.fstat(fh.fileno()), seen_size):
                        yield chunk
                    fh.seek(0)
                    offset, new_generation, seen_size = 0, True, 0
                    splitter.reset()
                    continue
                block = fh.read(READ_BYTES)
                if block:
                    seen_size = max(seen_size, os.fstat(fh.fileno()).st_size)
                    for piece in splitter.feed(block):
                        if new_generation:
                            generation = self._generation(fh, os.fstat(fh.fileno()))
                        yield self._chunk(generation, piece.data, offset, new_generation,
                                          piece.span)
                        offset += piece.span
                        new_generation = False
                    rotated_at = None if rotated_at is None else time.monotonic()
                    continue
                try:
                    now: os.stat_result | None = os.stat(self.path)
                except OSError:
                    now = None
                current = os.fstat(fh.fileno())
                if now is not None and now.st_ino == current.st_ino \
                        and now.st_dev == current.st_dev:
                    if now.st_size < offset + splitter.pending:  # copytruncate
                        if not new_generation:
                            async for chunk in self._truncated(generation, offset, current,
                                                               seen_size):
                                yield chunk
                        fh.seek(0)
                        offset, new_generation, seen_size = 0, True, 0
                        splitter.reset()
                        continue
                    seen_size = max(seen_size, now.st_size)
                else:  # renamed or deleted: drain the old file for a grace period
                    rotated_at = rotated_at or time.monotonic()
                    if time.monotonic() - rotated_at >= self.grace:
                        replacement = self._open()
                        if replacement is not None or now is None:
                            if (last := splitter.finish()) is not None:
                                if new_generation:
                                    generation = self._generation(fh, current)
                                yield self._chunk(generation, last.data, offset,
                                                  new_generation, last.span)
                                offset, new_generation = offset + last.span, False
                            fh.close()
                            self.events.append(f"rotation: finished {generation}")
                            while replacement is None and not self._closed:
                                await wake.wait(self.poll_interval)
                                replacement = self._open()
                            if replacement is None:
                                return
                            fh, st = replacement
                            # rotated again meanwhile: the generations between, oldest first
                            unread = None if new_generation else \
                                unread_after(self.path, generation, offset, st)
                            if unread is not None:
                                async for chunk in self._read_unread(unread):
                                    yield chunk
                            offset, new_generation, rotated_at = 0, True, None
                            seen_size = st.st_size
                            splitter.reset()
                            continue
                await wake.wait(min(self.poll_interval,
                                    self.grace if rotated_at is not None else self.poll_interval))
        finally:
            wake.stop()
