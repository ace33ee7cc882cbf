"""The live daemon: follow sources, scan as lines arrive, hand findings and positions on.

asyncio wiring only; the decisions are the core's. Each source's chunks feed a BlockScanner
per file generation; findings go to their launch (live_launches.py) and, with the scanner's
safe point, to the write path (writes.py), which commits them together, so a crash at any
moment neither loses nor doubles a finding. A source quiet for `quiet_flush` seconds is
settled (a writer that died mid-traceback still gets its findings recorded). Here: the
readers, the streams being scanned, the library reload, status, the watchdog and the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from logwatch import __version__
from logwatch.core.remedy.policy import CurrentLaunch
from logwatch.core.safe_text.redact import redact_head
from logwatch.core.safe_text.visible import visible
from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.findings import Finding
from logwatch.core.signatures.library import Library, LibraryError
from logwatch.core.signatures.matcher import Matcher
from logwatch.core.signatures.signature import Signature
from logwatch.daemon.library_watch import LibraryWatch
from logwatch.daemon.live_launches import LiveLaunches, Notice
from logwatch.daemon.notify import Notifier
from logwatch.daemon.protocol.base import PROTOCOL_VERSION
from logwatch.daemon.relaunches import Relaunches
from logwatch.daemon.source_states import Observed, judge
from logwatch.daemon.writes import MAX_PENDING, Writes
from logwatch.host.launch_snapshot import LaunchSnapshots
from logwatch.host.targets import TargetSnapshot, TargetSnapshots
from logwatch.own_log import get as get_logger
from logwatch.sources.base import Chunk, Source, slices
from logwatch.store.db import Store
from logwatch.store.live import Checkpoint, LiveFinding, LiveWriter, launch_id

T = TypeVar("T")

# The batcher's housekeeping tick (quiet sources, positions, the watchdog); holds and
# pending findings wake it when they are due.
TICK_SECONDS = 0.25
PRUNE_EVERY_SECONDS = 3600.0  # [database] keep_days: how often the history is pruned
# A source silent this long is settled: records still open are closed as they stand. A
# traceback arrives as one burst of writes; a dying vLLM goes silent after its last line.
QUIET_SECONDS = 0.5
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
# A chunk is scanned in slices of about this size (~30 ms each on a backlog where every other
# line is a finding; smaller slices cost a clean backlog's throughput: 64 KiB ran at 160 MB/s
# where 256 KiB runs at 230),
# with a pause of PAUSE_SECONDS after every BUSY_SECONDS of scanning (see `_breathe`).
SLICE_BYTES = 256 << 10
BUSY_SECONDS = 0.05
PAUSE_SECONDS = 0.002
# Exit status when stopped with findings the database never took.
EXIT_UNWRITTEN = 75  # EX_TEMPFAIL


@dataclass(slots=True)
class _Stream:
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


class Daemon:
    def __init__(self, sources: Sequence[Source], library: Library, store: Store,
                 quiet_flush: float = QUIET_SECONDS, hold: float = HOLD_SECONDS,
                 line_hold: float = LINE_HOLD_SECONDS,
                 until_idle: float | None = None,
                 reload_library: Callable[[], Library] | None = None,
                 notifier: Notifier | None = None,
                 on_signal: Callable[[int], None] | None = None,
                 snapshots: dict[str, str] | None = None,
                 targets: TargetSnapshots | None = None,
                 launch_snapshots: LaunchSnapshots | None = None) -> None:
        """`until_idle`: stop once no source has produced data for that many seconds.
        `reload_library`: loads and checks the library again (SIGHUP)."""
        self.until_idle = until_idle
        self.keep_days = 0.0  # [database] keep_days: 0 keeps everything
        # [export]: (directory, host, minutes between exports), None: no export
        self.export: tuple[Path, str, float] | None = None
        self.alerts: Any = None  # daemon.alerts.Alerts, with [[notify]] entries
        self.reload_library = reload_library
        self.on_signal = on_signal  # `logwatch run`: SIGTERM/SIGINT go to the child instead
        # source or target name -> hash of the recorded snapshot of its configuration
        self.snapshots = snapshots or {}
        self.targets = targets  # configured targets: snapshots retaken when a unit restarts
        self.notifier = notifier or Notifier()
        self.events: list[str] = []  # what the operator should know (reload results, ...)
        self.control: Any = None  # a ControlServer, when a socket is configured
        self.watch_dirs: list[Path] = []  # signature directories whose changes reload
        self.log = get_logger("logwatch.daemon")
        self.started = time.monotonic()
        self.sources = list(sources)
        self.library = library
        self.matcher = Matcher(library.signatures, on_disable=self._signature_disabled)
        self._reloading: asyncio.Task[None] | None = None  # the reload running, if any
        self._reload_again = False  # asked for while it runs: one more after it
        self.writer = LiveWriter(store, library)
        self.quiet_flush = quiet_flush
        self.hold = hold
        self.line_hold = line_hold
        self.resume = self.writer.checkpoints()
        # which start of vLLM each finding belongs to; a source's current one goes on
        # across a restart of the daemon
        self.launches = LiveLaunches(
            self.writer, launch_snapshots or LaunchSnapshots(),
            per_generation=[s.name for s in sources if not getattr(s, "replayable", True)],
            on_begin=lambda launch: self.log.info("launch", source=launch.source,
                                                  number=launch.number,
                                                  line=launch.start_line),
            signatures={s.id: s for s in library.signatures},
            exiting=[s.name for s in sources if hasattr(s, "on_exit")])
        # findings and positions on their way into the history
        self.writes = Writes(self.writer, self.launches, self)
        self.streams: dict[str, _Stream] = {}
        # for metrics: per-source lines and read positions
        self.lines_by_source: dict[str, int] = {}
        self.read_positions: dict[str, tuple[str, int]] = {}
        self.metrics: Any = None  # a MetricsServer, when --metrics is given
        self.relaunches: Relaunches | None = None  # when a target's policy may act
        # why the control socket is needed, when nothing can go on without it (`run
        # --relaunch ask`: approvals come through it); then a socket that fails stops the start
        self.needs_socket: str | None = None
        self.lines = 0
        self._stop = asyncio.Event()
        self._last_beat = 0.0
        self._last_lines = 0
        self._busy = 0.0  # seconds of scanning since the readers last paused (see _breathe)

    # what the writes hold, as the metrics and the command line read it
    @property
    def pending(self) -> list[LiveFinding]:
        return self.writes.pending

    @property
    def committed(self) -> int:
        return self.writes.committed

    @property
    def findings_by_signature(self) -> Counter[tuple[str, int]]:
        return self.writes.findings_by_signature

    @property
    def incidents_seen(self) -> dict[bool, set[str]]:
        return self.writes.incidents_seen

    @property
    def checkpoint_times(self) -> dict[str, float]:
        return self.writes.checkpoint_times

    @property
    def recycle_commits(self) -> int:
        return self.writes.recycle_commits

    @recycle_commits.setter
    def recycle_commits(self, value: int) -> None:
        self.writes.recycle_commits = value

    # what the writes tell (writes.Told)
    def publish(self, kind: str, **fields: Any) -> None:
        if self.control is not None:
            self.control.publish(kind, **fields)
        if self.alerts is not None:  # [[notify]]: hooks and webhooks
            self.alerts.consider(kind, fields)

    def status_now(self) -> None:
        self._last_beat = 0.0  # a STATUS= line at the next beat

    def stop(self) -> None:
        self._stop.set()

    def reload(self) -> None:
        """Load and check the library again off the loop (in a child process with a deadline:
        a hostile signature cannot stall ingestion), then swap it in on the loop; keep the
        running one on any problem. Requests while a reload runs make one more after it."""
        if self.reload_library is None:
            return
        if self._reloading is not None:
            self._reload_again = True
            return
        self._reload_again = False
        self._reloading = asyncio.get_running_loop().create_task(self._reload())

    async def _reload(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    library, matcher = await loop.run_in_executor(None, self._load_library)
                except (LibraryError, OSError) as exc:
                    self._refuse_library(exc)
                else:
                    self._swap_library(library, matcher)
                if not self._reload_again:
                    return
                self._reload_again = False
        finally:
            self._reloading = None

    def _load_library(self) -> tuple[Library, Matcher]:
        """In a worker thread: the bounded load, and compiling what it checked."""
        assert self.reload_library is not None
        library = self.reload_library()
        return library, Matcher(library.signatures, on_disable=self._signature_disabled)

    def _refuse_library(self, exc: LibraryError | OSError) -> None:
        self.events.append(f"reload refused, keeping library {self.library.version}: {exc}")
        self.log.error("reload_refused", library=self.library.version,
                       problems=str(exc).splitlines()[:20])
        self.notifier.status("reload refused: " + visible(str(exc).splitlines()[0][:120]))
        if self.control is not None:
            self.control.publish("library", loaded=False, version=self.library.version,
                                 error=str(exc)[:4000])

    def _swap_library(self, library: Library, matcher: Matcher) -> None:
        """Scanners built from now on use the new library."""
        self.library, self.matcher = library, matcher
        self.writer.library = library
        for source, stream in list(self.streams.items()):  # settle, then new scanners
            self._collect(source, stream, stream.scanner.flush())
            safe_bytes, safe_line = stream.scanner.safe_point()
            stream.scanner = BlockScanner(self.matcher, source, datetime.now(),
                                          start_line=safe_line)
            stream.base_offset = stream.generation_offset(safe_bytes)
            stream.cuts = [(end - safe_bytes, extra) for end, extra in stream.cuts
                           if end > safe_bytes]
            stream.fed -= safe_bytes
        self.events.append(f"library {library.version} loaded")
        if self.control is not None:
            self.control.publish("library", loaded=True, version=library.version,
                                 signatures=len(library.signatures))
        self.log.info("library_loaded", library=library.version,
                      signatures=len(library.signatures))

    def _signature_disabled(self, signature: Signature, reason: str) -> None:
        """The matcher gave up on a signature that kept running over its budget."""
        self.events.append(f"signature {signature.id} ({signature.path}) disabled: {reason}")
        self.log.warning("signature_disabled", signature=signature.id, path=signature.path,
                         reason=reason)
        if self.control is not None:
            self.control.publish("signature_disabled", signature=signature.id,
                                 path=signature.path, reason=reason)

    # -- scanning ---------------------------------------------------------------------------
    def _stream_for(self, chunk: Chunk) -> _Stream:
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
        stream = _Stream(chunk.generation, scanner, chunk.offset, next_line=start_line,
                         key=key)
        self.streams[chunk.source] = stream
        return stream

    @staticmethod
    def _identity(stream: _Stream, line: int) -> str | None:
        """journald: the entry holding a line (by cursor) and the line's place in it."""
        for _, first_line, end_line, cursor in stream.marks:
            if first_line <= line < end_line:
                return f"{cursor}#{line - first_line}"
        return None

    def lag_bytes(self) -> dict[str, int]:
        """How far each file source is behind its writer (bytes not read yet)."""
        lag = {}
        for source, (path, offset) in self.read_positions.items():
            with contextlib.suppress(OSError):
                lag[source] = max(0, os.stat(path).st_size - offset)
        return lag

    def _observe(self, source: Any) -> list[Observed]:
        """What status says of a configured source (a glob: itself, then each file)."""
        from logwatch.sources.files import FileSource
        from logwatch.sources.globbed import GlobSource
        from logwatch.sources.process import ProcessSource

        stream = self.streams.get(source.name)
        idle = None if stream is None else time.monotonic() - stream.last_data
        if isinstance(source, GlobSource):
            return [Observed(source.name, "glob", source.pattern, matched=len(source.files)),
                    *(o for f in list(source.files.values()) for o in self._observe(f))]
        if isinstance(source, FileSource):
            try:
                st = os.stat(source.path)
            except OSError:
                st = None
            read = self.read_positions.get(source.name)
            checkpoint = self.resume.get(source.stream) or self.resume.get(source.name)
            read_to = (read[1] if read is not None
                       else checkpoint.offset if checkpoint is not None else None)
            regular = st is not None and stat.S_ISREG(st.st_mode)
            return [Observed(source.name, "file", str(source.path), exists=st is not None,
                             refused=source.refused or (None if regular or st is None
                                                        else "not a regular file"),
                             size=st.st_size if regular and st else None, read_to=read_to,
                             idle_s=idle, writes_behind=not self.writes.room.is_set())]
        if isinstance(source, ProcessSource):
            return [Observed(source.name, "run", running=source.running(),
                             returncode=source.returncode, idle_s=idle)]
        kind = "journal" if hasattr(source, "selector") else "stdin"
        return [Observed(source.name, kind, idle_s=idle)]

    def source_states(self) -> list[dict[str, Any]]:
        """Every configured source with its state (source_states.judge), and what was read
        of it since the daemon started."""
        held = self.writes.state().get("writable") is False
        out = []
        for observed in (o for s in self.sources for o in self._observe(s)):
            stream = self.streams.get(observed.name)
            out.append({"name": observed.name, "kind": observed.kind,
                        **({"path": observed.path} if observed.path else {}),
                        **judge(observed, held),
                        "generation": stream.generation if stream else None,
                        "next_line": stream.next_line if stream else 0,
                        "idle_s": None if observed.idle_s is None else round(observed.idle_s,
                                                                             1),
                        "vllm_output": observed.name in self.launches.recognised})
        return out

    def status(self) -> dict[str, Any]:
        sources = self.source_states()
        followed = {source["name"] for source in sources}
        return {
            "version": __version__, "protocol": PROTOCOL_VERSION,
            "library": self.library.version, "reloading": self._reloading is not None,
            "lines": self.lines,
            "findings_recorded": self.committed, "pending": len(self.pending),
            "uptime_s": round(time.monotonic() - self.started, 1),
            "database": self.writes.state(),
            "sources": sources,
            # the launches of what this daemon follows (a history also holds scans' and
            # earlier configurations' sources, which are not its to judge)
            "launches": [launch for launch in self.launches.status()
                         if launch["source"] in followed],
            "failed_launches": self.launches.failed,
            "last_failure": self.launches.last_failure,
            "events": self.events[-10:],
            **({"relaunch": self.relaunches.status()} if self.relaunches is not None else {}),
        }

    def signature_states(self) -> dict[str, Any]:
        """The library loaded now, one entry per signature (the `signatures` request)."""
        disabled = self.matcher.disabled
        return {"library": self.library.version,
                "signatures": [{"id": s.id, "version": s.version, "status": s.status,
                                "severity": s.severity, "fatal": s.fatal,
                                "category": s.category, "title": s.title, "path": s.path,
                                "disabled": disabled.get(s.id)}
                               for s in self.library.signatures]}

    def _snapshot_for(self, source: str) -> str | None:
        """The configuration in force for a source: by its name, else by its target's name
        (a glob target's files are named `TARGET:file:PATH`)."""
        digest = self.snapshots.get(source)
        return digest if digest is not None else self.snapshots.get(source.split(":", 1)[0])

    def record_snapshot(self, snapshot: TargetSnapshot) -> None:
        """Store a target's snapshot; its findings link to it from now on (any thread)."""
        with self.writes.lock:
            self.writer.record_snapshot(snapshot.digest, snapshot.body)
        self.snapshots[snapshot.target] = snapshot.digest
        if snapshot.snapshot is not None:  # launches from now on are judged against it
            self.launches.snapshots.configure(snapshot.target, snapshot.snapshot)

    def retake_snapshots(self) -> None:
        """Targets whose unit started again get their snapshot now, not at the next look (a
        relaunch calls it right after its restart, from its own thread, so that the
        relaunch's lines are linked to what it runs)."""
        if self.targets is None:
            return
        for snapshot in self.targets.changed():
            self.record_snapshot(snapshot)
            self.log.info("snapshot_retaken", target=snapshot.target, snapshot=snapshot.digest,
                          invocation=snapshot.invocation)

    async def _watch_targets(self, targets: TargetSnapshots) -> None:
        """Every `targets.interval`: a target whose unit started again gets a new snapshot."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(targets.interval)
            for snapshot in await loop.run_in_executor(None, targets.changed):
                await loop.run_in_executor(self.writes.thread, self.record_snapshot, snapshot)
                self.log.info("snapshot_retaken", target=snapshot.target,
                              snapshot=snapshot.digest, invocation=snapshot.invocation)
                if self.control is not None:
                    self.control.publish("snapshot", target=snapshot.target,
                                         hash=snapshot.digest, invocation=snapshot.invocation)

    def _collect(self, source: str, stream: _Stream, found: list[Finding]) -> None:
        if self.control is not None:
            for f in found:
                self.control.publish("finding", source=source, line=f.lineno,
                                     signature=f.signature.id, severity=f.signature.severity,
                                     fatal=f.signature.fatal, captures=f.captures)
        live = []
        for f in found:
            placed = self.launches.place(f, stream.generation)
            live.append(LiveFinding(
                f, stream.generation, self._identity(stream, f.lineno) if stream.marks
                else None, self._snapshot_for(source), placed.launch, placed.copy))
        if self.relaunches is not None and live:  # a relaunch is verified on these
            self.relaunches.watch.observe(source, ((lf.finding, lf.launch or "")
                                                   for lf in live))
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
        entry_first = stream.next_line
        for end, cursor in chunk.marks:
            line = stream.next_line + chunk.data.count(b"\n", 0, end - chunk.offset)
            stream.marks.append((end, entry_first, line, cursor))
            entry_first = line
        for offset in chunk.launches:  # the unit was started again: a launch from there
            self.launches.restarted(chunk.source, stream.next_line + chunk.data.count(
                b"\n", 0, offset - chunk.offset), chunk.generation)
        lines = chunk.data.count(b"\n")
        self.lines += lines
        self.lines_by_source[chunk.source] = self.lines_by_source.get(chunk.source, 0) + lines
        span = len(chunk.data) if chunk.span is None else chunk.span
        if chunk.path is not None:
            self.read_positions[chunk.source] = (chunk.path, chunk.offset + span)
        if self.control is not None and self.control.wants("lines"):
            text = redact_head(chunk.data, LINES_EVENT_BYTES)
            self.control.publish("lines", source=chunk.source, first_line=stream.next_line,
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

    def _hold_ends(self, stream: _Stream) -> float | None:
        """When the hit a stream's scanner holds back is to be settled as it stands."""
        kind = stream.scanner.holding
        if kind is None or stream.holding_since is None:
            return None
        return stream.holding_since + (self.line_hold if kind == "line" else self.hold)

    def _wake_when_held(self, stream: _Stream) -> None:
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

    # -- the loop ---------------------------------------------------------------------------
    async def _read(self, source: Source) -> None:
        log = self.log.bind(source=source.name)
        seen = 0
        # a file or a journal can be read again later; a pipe's writer blocks when unread
        replayable = getattr(source, "replayable", True)
        if hasattr(source, "on_exit"):  # each child of `logwatch run`, as it ends
            source.on_exit = lambda code: self._exited(source.name, code)
        async for chunk in source.chunks():
            if chunk.new_generation:
                log.info("reading", generation=chunk.generation, offset=chunk.offset)
            # a backlog comes as one big chunk after another with no wait between: scan it
            # in slices, letting the socket, the batcher and the watchdog run between them,
            # and wait while the writes lag behind
            for piece in slices(chunk, SLICE_BYTES):
                began = time.monotonic()
                self.handle(piece)
                await self._breathe(time.monotonic() - began)
                while not self.writes.room.is_set() and (
                        replayable or len(self.pending) >= MAX_PENDING):
                    await self.writes.room.wait()
            events = getattr(source, "events", [])
            for event in events[seen:]:
                log.info("source_event", detail=event)
            seen = len(events)
            if self._stop.is_set():
                break

    def _exited(self, source: str, code: int) -> None:
        """A child of `logwatch run` ended: so did its launch (after what its last lines
        held back, a traceback's end, is placed in it)."""
        stream = self.streams.get(source)
        if stream is not None and not stream.settled:
            self._collect(source, stream, stream.scanner.flush())
            stream.settled, stream.holding_since = True, None
        self.launches.exited(source, code)
        self.writes.soon()

    def written_all(self) -> bool:
        """Everything read is written and told: no finding pending, no launch due, no
        commit in flight (a failed launch has reached the relaunches by then)."""
        return not self.pending and not self.launches.changed and self.writes.idle

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

    def _beat(self) -> None:
        """WATCHDOG=1 from the ingestion loop, STATUS= with rate and findings."""
        now = time.monotonic()
        if now - self._last_beat < 1.0:
            return
        rate = (self.lines - self._last_lines) / (now - self._last_beat)
        self._last_beat, self._last_lines = now, self.lines
        self.notifier.watchdog()
        if not self.writes.health.writable:
            return  # STATUS= says the database is unwritable (see writes) until it is not
        fatal = len(self.incidents_seen.get(True, ()))
        last = self.launches.last_failure
        failure = f"; {visible(last[:200])}" if last else ""
        self.notifier.status(f"{rate:,.0f} lines/s, {self.committed:,} findings recorded, "
                             f"{fatal} fatal incident(s), library {self.library.version}"
                             f"{failure}")

    @staticmethod
    async def _read_all(readers: list[asyncio.Task[None]]) -> None:
        await asyncio.gather(*readers)

    async def _batcher(self) -> None:
        writes = self.writes
        while True:
            await writes.flush_now.wait(TICK_SECONDS)
            writes.flush_now.clear()
            self.settle()
            await writes.turn()
            self._beat()
            if self.until_idle is not None:
                last = max((st.last_data for st in self.streams.values()), default=self.started)
                if time.monotonic() - last >= self.until_idle and writes.health.writable:
                    self.stop()

    def launch_failed(self, notice: Notice) -> None:
        """Tell the operator: the log, the daemon's events, a STATUS= line now."""
        assert notice.failure is not None
        self.events.append(notice.failure)
        fields = notice.fields
        self.log.error("launch_failed", source=fields["source"], launch=fields["id"],
                         root_cause=fields["root_cause"],
                         failed_before=fields["failed_before"])
        self.status_now()
        if self.relaunches is not None:
            source = str(fields["source"])
            analysis = self.launches.newest(source)
            root = (analysis.root_incident if analysis is not None
                    and launch_id(analysis.launch) == fields["id"] else None)
            self.relaunches.launch_failed(fields, root.problem if root else None,
                                          self._snapshot_for(source))

    def current_launch(self, source: str) -> CurrentLaunch | None:
        """What a source runs now, for the relaunch's recheck."""
        launch = self.launches.book.current(source)
        if launch is None:
            return None
        return CurrentLaunch(launch_id(launch), self._snapshot_for(source), launch.outcome,
                             frozenset(i.problem for i in launch.book.incidents.values()))

    def signature_status(self, signature: str) -> str:
        """A signature's status in the library loaded now ("unknown" when it is not)."""
        found = next((s for s in self.library.signatures if s.id == signature), None)
        return found.status if found is not None else "unknown"

    def in_store(self, fn: Callable[[Store], T]) -> T:
        """`fn` with the daemon's store, one DuckDB call at a time (any thread)."""
        with self.writes.lock:
            return fn(self.writer.store)

    async def _keep_days(self, days: float) -> None:
        """`[database] keep_days`: the history pruned at start and every hour after, on the
        database's thread between commits (store.retention)."""
        from logwatch.store.retention import prune

        loop = asyncio.get_running_loop()
        while True:
            try:
                pruned = await loop.run_in_executor(
                    self.writes.thread, lambda: self.in_store(lambda store: prune(store, days)))
            except Exception as exc:  # the database's trouble: said, tried again next hour
                self.log.error("prune_failed", error=str(exc))
            else:
                self.log.info("pruned", keep_days=days, **pruned.removed)
            await asyncio.sleep(PRUNE_EVERY_SECONDS)

    async def _export_every(self, out: Path, host: str, minutes: float) -> None:
        """`[export]`: the history as Parquet for a fleet (store.export), at start and every
        `minutes`: a copy made between commits, exported off the database's thread. After
        the first, each export rewrites the days that can still change (from the day
        before the last export on, and the days of launches and actions changed since)."""
        from datetime import date, timedelta

        from logwatch.store.export import copy_for_export, export_copy

        loop = asyncio.get_running_loop()
        scratch = self.writer.store.path.with_name(self.writer.store.path.name + ".export")
        since: date | None = None
        exported: datetime | None = None  # when the copy last exported was taken
        while True:
            today, copied = date.today(), datetime.now()
            try:
                await loop.run_in_executor(self.writes.thread, lambda: self.in_store(
                    lambda store: copy_for_export(store, scratch)))
                written = await loop.run_in_executor(None, export_copy, scratch, out, host,
                                                     since, exported)
            except Exception as exc:  # a full disk, a directory gone: said, tried again
                self.log.error("export_failed", directory=str(out), error=str(exc))
            else:
                self.log.info("exported", directory=str(out), host=host,
                              since=since and since.isoformat(),
                              rows={w.table: w.rows for w in written})
                since, exported = today - timedelta(days=1), copied
            await asyncio.sleep(minutes * 60)

    async def run(self) -> int:
        """Until stopped (SIGTERM/SIGINT) or every source has ended; then settle and commit."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            # outside the main thread (tests) there are no signal handlers: stop() is called
            handler = (lambda s=sig: self.on_signal(s)) if self.on_signal else self.stop  # type: ignore[misc]
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, handler)
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGHUP, self.reload)
        if self.control is not None:
            try:
                await self.control.start()
            except OSError as exc:  # ingestion matters more than the socket: go on without
                self.events.append(f"control socket {self.control.path}: {exc}")
                self.log.error("control_socket_failed", path=str(self.control.path),
                               error=str(exc))
                self.control = None
                if self.needs_socket:  # nothing started yet: refuse rather than run blind
                    self.events.append(f"not starting: {self.needs_socket}")
                    return 2
        if self.relaunches is not None:  # what an earlier daemon left unfinished
            try:
                await self.relaunches.recover()
            except Exception as exc:  # the history is told again on the next move
                self.log.exception("relaunch_recovery_failed")
                self.events.append(f"unfinished relaunch actions were not recovered: {exc}")
        watch = LibraryWatch(self.watch_dirs, self.reload, loop)
        if self.watch_dirs and self.reload_library is not None and not watch.start():
            self.events.append("signature directories are not watched (no inotify): "
                               "reload with SIGHUP")
        if self.metrics is not None:
            try:
                await self.metrics.start()
            except OSError as exc:
                self.events.append(f"metrics on {self.metrics.host}:{self.metrics.port}: {exc}")
                self.log.error("metrics_failed", error=str(exc))
                self.metrics = None
        self.notifier.ready(f"following {len(self.sources)} source(s), library "
                            f"{self.library.version}")
        self.log.info("started", sources=[s.name for s in self.sources],
                      library=self.library.version, resume=len(self.resume),
                      database=str(self.writer.store.path),
                      socket=str(self.control.path) if self.control is not None else None)
        readers = [asyncio.create_task(self._read(s)) for s in self.sources]
        all_read = asyncio.create_task(self._read_all(readers))
        batcher = asyncio.create_task(self._batcher())
        watcher = (asyncio.create_task(self._watch_targets(self.targets))
                   if self.targets is not None and self.targets.watched else None)
        stopper = asyncio.create_task(self._stop.wait())
        keeper = (asyncio.create_task(self._keep_days(self.keep_days))
                  if self.keep_days > 0 else None)
        exporter = (asyncio.create_task(self._export_every(*self.export))
                    if self.export is not None else None)
        try:
            await asyncio.wait([stopper, all_read], return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.notifier.stopping()
            if self.control is not None:  # a query running on the history must not hold us
                await self.control.stop_queries()
            if self.relaunches is not None:
                await self.relaunches.close()
            for task in (*readers, stopper):
                task.cancel()
            batcher.cancel()
            if watcher is not None:
                watcher.cancel()
            for periodic in (keeper, exporter):
                if periodic is not None:
                    periodic.cancel()
            await asyncio.gather(all_read, batcher, stopper, *([watcher] if watcher else []),
                                 return_exceptions=True)
            for source in self.sources:
                await source.close()
            await self.writes.land()  # a batch being written lands first
            watch.stop()
            self.settle(everything=True)
            unwritten = await self.writes.last_commit()
            if self.control is not None:
                await self.control.close()
            if self.metrics is not None:
                await self.metrics.close()
            if self.alerts is not None:
                await self.alerts.close()
            self.log.info("stopped", lines=self.lines, findings=self.committed)
        return EXIT_UNWRITTEN if unwritten else 0
