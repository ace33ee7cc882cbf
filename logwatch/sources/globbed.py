"""Follow every file a glob matches, now and later: one FileSource per path, merged.

Each file keeps its own source name (`file:/var/log/vllm/a.log`) and stream, so checkpoints,
line numbers and rotation stay per file; the glob is expanded again every `rescan` seconds and a
new match is followed from its start (or from its checkpoint). A file that stops matching
(deleted) is left to its FileSource, which waits for it to come back.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from logwatch.own_log import get as get_logger
from logwatch.sources.base import Chunk, source_name
from logwatch.sources.files import FilePosition, FileSource

QUEUE_CHUNKS = 16  # chunks waiting for the daemon; a full queue slows the readers down


class GlobSource:
    def __init__(self, pattern: str, name_for: Callable[[Path], str] | None = None,
                 resume: dict[str, FilePosition] | None = None, rescan: float = 2.0,
                 poll_interval: float = 1.0, use_inotify: bool = True,
                 start_at: str = "start") -> None:
        """`start_at`: "end" starts the files matched at the first expansion (with no
        checkpoint) at their end; a file that appears later is new, read from its start."""
        self.pattern = str(Path(pattern).expanduser())
        self.name = source_name(f"glob:{self.pattern}")
        self.name_for = name_for or (lambda p: f"file:{p}")
        self.resume = resume or {}  # positions by stream (or, from older versions, by name)
        self.rescan = rescan
        self.poll_interval = poll_interval
        self.use_inotify = use_inotify
        self.start_at = start_at
        self.files: dict[Path, FileSource] = {}
        self._pumps: list[asyncio.Task[None]] = []
        self._events: list[str] = []
        self._closed = False

    @property
    def events(self) -> list[str]:
        return self._events + [e for f in self.files.values() for e in f.events]

    def _expand(self) -> list[Path]:
        return sorted(Path(p).resolve() for p in glob.glob(self.pattern)
                      if Path(p).is_file())

    async def _pump(self, source: FileSource, queue: asyncio.Queue[Chunk]) -> None:
        try:
            async for chunk in source.chunks():
                await queue.put(chunk)
        except OSError as exc:  # one unreadable file must not end the others
            self._events.append(f"{source.path}: stopped following: {exc}")

    async def chunks(self) -> AsyncIterator[Chunk]:
        queue: asyncio.Queue[Chunk] = asyncio.Queue(QUEUE_CHUNKS)
        loop = asyncio.get_running_loop()
        next_scan = 0.0
        try:
            while not self._closed:
                if loop.time() >= next_scan:
                    paths = self._expand()
                    if not paths and not next_scan:  # a typo must not look like a quiet log
                        message = f"{self.pattern}: no file matches yet; watching for one"
                        self._events.append(message)
                        get_logger("logwatch.sources").warning("glob_matches_nothing",
                                                               pattern=self.pattern)
                    for path in paths:
                        if path not in self.files:
                            name = source_name(self.name_for(path))
                            source = FileSource(path, name=name,
                                                poll_interval=self.poll_interval,
                                                use_inotify=self.use_inotify,
                                                start_at="start" if next_scan
                                                else self.start_at)
                            source.resume = (self.resume.get(source.stream)
                                             or self.resume.get(name))
                            self.files[path] = source
                            self._pumps.append(asyncio.create_task(self._pump(source, queue)))
                            if next_scan:  # not the first expansion: say what appeared
                                self._events.append(f"{self.pattern}: now following {path}")
                    next_scan = loop.time() + self.rescan
                try:
                    chunk = await asyncio.wait_for(queue.get(), max(0.0, next_scan - loop.time()))
                except TimeoutError:
                    continue
                yield chunk
        finally:
            await self.close()

    async def close(self) -> None:
        self._closed = True
        for source in self.files.values():
            await source.close()
        for pump in self._pumps:
            pump.cancel()
        for pump in self._pumps:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump
        self._pumps.clear()
