"""The streams being scanned: each source's current generation fed to a BlockScanner, its
findings placed in their launch and handed to the writes with the position they are safe from.

A source quiet for `quiet_flush` seconds is settled (a writer that died mid-traceback still
gets its findings recorded); a hit the scanner holds back, waiting for the lines after it to
prove where its record ends, is settled as it stands once its hold is over.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from logwatch.core.safe_text.redact import redact_head
from logwatch.core.safe_text.visible import visible
from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.findings import Finding
from logwatch.core.signatures.matcher import Matcher
from logwatch.daemon.live_launches import LiveLaunches
from logwatch.daemon.relaunches import Relaunches
from logwatch.daemon.snapshots_in_force import SnapshotsInForce
from logwatch.daemon.writes import Writes
from logwatch.sources.base import Chunk
from logwatch.store.live import Checkpoint, LiveFinding

# A source silent this long is settled: records still open are closed as they stand. A
# traceback arrives as one burst of writes; a dying vLLM goes silent after its last line.
QUIET_SECONDS = 0.5
MAX_FAILURES_LOGGED = 20  # scan faults said per source; status counts them all
# A hit whose record may still go on is reported after this long even while the log keeps
# flowing: the lines of one record (a traceback, interleaved ranks) arrive within
# milliseconds of each other; waiting for proof from later lines costs seconds at low rates.
HOLD_SECONDS = 0.05
# A logger line that nothing read so far joins, waiting only for the bytes after it to prove
# it alone, is settled right after the read that brought it: a logger writes a record whole
# (one write), and a read comes 2 ms after the first write of a burst (sources/inotify.py),
# so the rest of a record too long for one write has landed by then. Holding it longer
# without reading again would add latency and prove nothing.
LINE_HOLD_SECONDS = 0.0
LINES_EVENT_BYTES = 1 << 16  # the most text one `lines` event carries
MARKS_KEPT = 10_000  # journald entries remembered before the checkpoint


@dataclass(slots=True)
class Stream:
    """One source's current generation being scanned."""

    generation: str
    scanner: BlockScanner
    base_offset: int  # byte offset (in the generation) of the scanner's first byte
    next_line: int = 1  # number of the next line fed
    last_data: float = field(default_factory=time.monotonic)
    settled: bool = True  # nothing fed since the last flush
    holding_since: float | None = None  # when the scanner began holding back a hit
    # journald entries: (offset after, first line, line after, cursor)
    marks: list[tuple[int, int, int, str]] = field(default_factory=list)
    fed: int = 0  # bytes fed to the scanner
    # where a chunk's bytes and the generation's differ (a line cut, a newline added):
    # (bytes fed up to the end of that chunk, generation bytes minus bytes fed)
    cuts: list[tuple[int, int]] = field(default_factory=list)
    key: str = ""  # the stream read, which checkpoints are keyed by

    def generation_offset(self, fed: int) -> int:
        """The offset in the generation of the byte the scanner was fed as byte `fed`."""
        return self.base_offset + fed + sum(extra for end, extra in self.cuts if end <= fed)


class Listeners(Protocol):
    """Who hears of what is scanned, as the daemon has them now (each may come or go while
    it runs): the socket's subscribers, and the relaunches, which verify on findings."""

    @property
    def control(self) -> Any: ...  # a ControlServer, when a socket is configured

    @property
    def relaunches(self) -> Relaunches | None: ...

    @property
    def log(self) -> Any: ...  # the daemon's own log (a record the scan failed on)


class ScanStreams:
    """Every source's stream being scanned, and what was read of each since the start."""

    def __init__(self, matcher: Matcher, resume: Mapping[str, Checkpoint],
                 launches: LiveLaunches, writes: Writes, in_force: SnapshotsInForce,
                 listeners: Listeners, quiet_flush: float = QUIET_SECONDS,
                 hold: float = HOLD_SECONDS, line_hold: float = LINE_HOLD_SECONDS) -> None:
        """`resume`: the checkpoints a new generation's line numbers go on from.
        `in_force`: the snapshot each finding links to."""
        self.matcher = matcher  # new scanners are built with it (see `use`)
        self.resume = resume
        self.launches = launches
        self.writes = writes
        self.in_force = in_force
        self.listeners = listeners
        self.quiet_flush = quiet_flush
        self.hold = hold
        self.line_hold = line_hold
        self.streams: dict[str, Stream] = {}
        self.lines = 0
        # source -> records (or slices: reading.py) a fault of the scan's passed over
        self.scan_failures: dict[str, int] = {}
        # for metrics: per-source lines and read positions
        self.lines_by_source: dict[str, int] = {}
        self.read_positions: dict[str, tuple[str, int]] = {}

    def use(self, matcher: Matcher) -> None:
        """Scanners built from now on use `matcher` (a library reloaded): each stream is
        settled and goes on from its safe point with a new scanner."""
        self.matcher = matcher
        for source, stream in list(self.streams.items()):  # settle, then new scanners
            self._collect(source, stream, stream.scanner.flush())
            # what follows is fed on; runs of a repeating line start afresh (the new library
            # may judge them otherwise): the next stats line is reported again
            safe_bytes, safe_line = stream.scanner.settled_point()
            stream.scanner = BlockScanner(self.matcher, source, datetime.now(),
                                          start_line=safe_line)
            stream.base_offset = stream.generation_offset(safe_bytes)
            stream.cuts = [(end - safe_bytes, extra) for end, extra in stream.cuts
                           if end > safe_bytes]
            stream.fed -= safe_bytes

    def _stream_for(self, chunk: Chunk) -> Stream:
        stream = self.streams.get(chunk.source)
        if stream is not None and stream.generation == chunk.generation:
            return stream
        if stream is not None:  # the source moved to a new generation: settle the old one
            self._collect(chunk.source, stream, stream.scanner.flush())
        start_line = 1
        key = chunk.stream or chunk.source
        # by stream; a checkpoint an older version keyed by the source's name still counts
        point = self.resume.get(key) or self.resume.get(chunk.source)
        if point is not None and point.generation == chunk.generation \
                and point.offset == chunk.offset:
            start_line = point.line
        elif chunk.first_line is not None:
            start_line = chunk.first_line
        scanner = BlockScanner(self.matcher, chunk.source, datetime.now(),
                               start_line=start_line)
        self.launches.new_generation(chunk.source, chunk.generation, start_line)
        stream = Stream(chunk.generation, scanner, chunk.offset, next_line=start_line,
                        key=key)
        self.streams[chunk.source] = stream
        return stream

    @staticmethod
    def _identity(stream: Stream, line: int) -> str | None:
        """journald: the entry holding a line (by cursor) and the line's place in it."""
        for _, first_line, end_line, cursor in stream.marks:
            if first_line <= line < end_line:
                return f"{cursor}#{line - first_line}"
        return None

    def _collect(self, source: str, stream: Stream, found: list[Finding]) -> None:
        for line, error in stream.scanner.take_faults():
            self.scan_failed(source, f"line {line}", error)
        control, relaunches = self.listeners.control, self.listeners.relaunches
        live = []
        for found_here in found:
            placed = self.launches.place(found_here, stream.generation)
            f = placed.finding  # as it counts in its launch (a teardown's: context)
            if control is not None:
                control.publish("finding", source=source, line=f.lineno,
                                signature=f.signature.id, severity=f.signature.severity,
                                fatal=f.signature.fatal, captures=f.captures)
            live.append(LiveFinding(
                f, stream.generation, self._identity(stream, f.lineno) if stream.marks
                else None, self.in_force.snapshot_for(source), placed.launch, placed.copy))
        if relaunches is not None and live:  # a relaunch is verified on these
            relaunches.watch.observe(source, ((lf.finding, lf.launch or "") for lf in live))
        self.writes.add(live)
        safe_bytes, safe_line = stream.scanner.safe_point()
        safe = stream.generation_offset(safe_bytes)
        if stream.marks:  # journald: resume after the last whole entry before the safe point
            done = [m for m in stream.marks if m[0] <= safe]
            if not done:
                return
            offset, _, line, cursor = done[-1]
            keep = next(i for i, m in enumerate(stream.marks) if m is done[-1])
            stream.marks = stream.marks[max(0, keep - MARKS_KEPT):]  # later findings may
            # still name recent entries; older ones are settled
            self.writes.position(Checkpoint(source, stream.generation, offset, line, cursor,
                                            stream.key))
        else:
            self.writes.position(Checkpoint(source, stream.generation, safe, safe_line,
                                            stream=stream.key))

    def handle(self, chunk: Chunk) -> None:
        stream = self._stream_for(chunk)
        stream.scanner.reference = datetime.now()  # a line's year: the year it arrived in
        first_line = entry_first = stream.next_line
        for end, cursor in chunk.marks:
            line = stream.next_line + chunk.data.count(b"\n", 0, end - chunk.offset)
            stream.marks.append((end, entry_first, line, cursor))
            entry_first = line
        for ended in chunk.exits:  # the unit's main process ended: its launch, once placed
            self.launches.exited_at(chunk.source, first_line + chunk.data.count(
                b"\n", 0, ended.offset - chunk.offset) - 1, ended.status, ended.clean)
        for offset in chunk.launches:  # the unit was started again: a launch from there
            self.launches.restarted(chunk.source, stream.next_line + chunk.data.count(
                b"\n", 0, offset - chunk.offset), chunk.generation)
        lines = chunk.data.count(b"\n")
        self.lines += lines
        self.lines_by_source[chunk.source] = self.lines_by_source.get(chunk.source, 0) + lines
        span = len(chunk.data) if chunk.span is None else chunk.span
        if chunk.path is not None:
            self.read_positions[chunk.source] = (chunk.path, chunk.offset + span)
        control = self.listeners.control
        if control is not None:  # what a client that connects later is shown first
            control.recent.add(chunk.source, stream.next_line, chunk.data, lines)
        if control is not None and control.wants("lines"):
            text = redact_head(chunk.data, LINES_EVENT_BYTES)
            control.publish("lines", source=chunk.source, first_line=stream.next_line,
                            text=text, count=lines)
        stream.next_line += lines
        stream.fed += len(chunk.data)
        if span != len(chunk.data):
            stream.cuts.append((stream.fed, span - len(chunk.data)))
        found = stream.scanner.feed(chunk.data)
        stream.last_data, stream.settled = time.monotonic(), False
        if stream.scanner.holding is None:
            stream.holding_since = None
        else:
            if stream.holding_since is None:
                stream.holding_since = stream.last_data
            self._wake_when_held(stream)
        self._collect(chunk.source, stream, found)
        if chunk.exits:
            self._main_process_ended(chunk.source, stream)

    def _main_process_ended(self, source: str, stream: Stream) -> None:
        """The unit's manager said its main process ended (journald): what the scanner holds
        back is placed (nothing of that process comes after), then each exit not given out
        yet goes to the launch in force at its line."""
        self._collect(source, stream, stream.scanner.flush())
        stream.settled, stream.holding_since = True, None
        self.launches.settle_exits(source)
        self.writes.soon()

    def scan_failed(self, source: str, where: str, error: str) -> None:
        """A fault of the scan's passed over a record (or a slice) of `source`: counted, and
        said in the daemon's log (the first MAX_FAILURES_LOGGED of a source)."""
        count = self.scan_failures[source] = self.scan_failures.get(source, 0) + 1
        if count <= MAX_FAILURES_LOGGED:
            self.listeners.log.error("scan_failed", source=source, where=where,
                                     error=visible(error), passed_over=True)

    def _hold_ends(self, stream: Stream) -> float | None:
        """When the hit a stream's scanner holds back is to be settled as it stands."""
        kind = stream.scanner.holding
        if kind is None or stream.holding_since is None:
            return None
        return stream.holding_since + (self.line_hold if kind == "line" else self.hold)

    def _wake_when_held(self, stream: Stream) -> None:
        """Wake the batcher when the stream's hold ends."""
        due = self._hold_ends(stream)
        if due is not None:
            self.writes.wake_at(due)

    def settle(self, everything: bool = False) -> None:
        """Flush streams quiet for `quiet_flush` seconds, or holding a hit back for
        `hold` seconds (or all of them)."""
        now = time.monotonic()
        for source, stream in self.streams.items():
            if stream.settled:
                continue
            due = self._hold_ends(stream)
            if everything or (due is not None and now >= due) \
                    or now - stream.last_data >= self.quiet_flush:
                self._collect(source, stream, stream.scanner.flush())
                stream.settled, stream.holding_since = True, None
            elif due is not None:
                self.writes.wake_at(due)

    def exited(self, source: str, code: int) -> None:
        """A child of `logwatch run` ended: so did its launch (after what its last lines
        held back, a traceback's end, is placed in it)."""
        stream = self.streams.get(source)
        if stream is not None and not stream.settled:
            self._collect(source, stream, stream.scanner.flush())
            stream.settled, stream.holding_since = True, None
        self.launches.exited(source, code)
        self.writes.soon()
