"""Reading the sources: one task per source feeds its chunks to the streams being scanned, in
slices, yielding to the loop between them and waiting while the writes lag behind.

A slice the scan fails on outside any one record (a fault of logwatch's; one record's fault
costs that record only: core/signatures/block_scan.py) is said in the daemon's log with its
source and byte range, counted in `status`, and passed over: reading goes on, so no line can
stop the source (the failures counted are the ones to report as bugs).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from logwatch.daemon.scan_streams import ScanStreams
from logwatch.daemon.writes import MAX_PENDING, Writes
from logwatch.sources.base import Chunk, Source, slices

# A chunk is scanned in slices of about this size (~30 ms each on a backlog where every other
# line is a finding; smaller slices cost a clean backlog's throughput: 64 KiB ran at 160 MB/s
# where 256 KiB runs at 230),
# with a pause of PAUSE_SECONDS after every BUSY_SECONDS of scanning (see `_breathe`).
SLICE_BYTES = 256 << 10
BUSY_SECONDS = 0.05
PAUSE_SECONDS = 0.002


class Readers:
    def __init__(self, scan_streams: ScanStreams, writes: Writes, stopped: asyncio.Event,
                 log: Any) -> None:
        """`stopped`: set when the daemon stops; a reader ends after the chunk it is on."""
        self.scan_streams = scan_streams
        self.writes = writes
        self.stopped = stopped
        self.log = log
        self._busy = 0.0  # seconds of scanning since the readers last paused (see _breathe)

    async def read(self, source: Source) -> None:
        log = self.log.bind(source=source.name)
        seen = 0
        # a file or a journal can be read again later; a pipe's writer blocks when unread
        replayable = getattr(source, "replayable", True)
        if hasattr(source, "on_exit"):  # each child of `logwatch run`, as it ends
            source.on_exit = lambda code: self.scan_streams.exited(source.name, code)
        async for chunk in source.chunks():
            if chunk.new_generation:
                log.info("reading", generation=chunk.generation, offset=chunk.offset)
            # a backlog comes as one big chunk after another with no wait between: scan it
            # in slices, letting the socket, the batcher and the watchdog run between them,
            # and wait while the writes lag behind
            for piece in slices(chunk, SLICE_BYTES):
                began = time.monotonic()
                try:
                    self.scan_streams.handle(piece)
                except Exception as exc:  # a fault of ours must not stop the source
                    self._scan_failed(piece, exc)
                await self._breathe(time.monotonic() - began)
                while not self.writes.room.is_set() and (
                        replayable or len(self.writes.pending) >= MAX_PENDING):
                    await self.writes.room.wait()
            events = getattr(source, "events", [])
            for event in events[seen:]:
                log.info("source_event", detail=event)
            seen = len(events)
            if self.stopped.is_set():
                break

    def _scan_failed(self, piece: Chunk, exc: Exception) -> None:
        self.scan_streams.scan_failed(
            piece.source, f"{piece.generation} bytes {piece.offset}-"
            f"{piece.offset + len(piece.data)}", f"{type(exc).__name__}: {str(exc)[:300]}")

    async def _breathe(self, busy: float) -> None:
        """After a slice of `busy` seconds of scanning: yield to the loop, and after
        BUSY_SECONDS of scanning, pause briefly. A request on the socket needs a few turns
        of the loop (accept, read, answer); with a reader ready at every turn each would
        wait a slice, so the pause lets them all run at once."""
        self._busy += busy
        if self._busy < BUSY_SECONDS:
            await asyncio.sleep(0)
            return
        self._busy = 0.0
        await asyncio.sleep(PAUSE_SECONDS)

    @staticmethod
    async def read_all(readers: list[asyncio.Task[None]]) -> None:
        await asyncio.gather(*readers)
