"""The live daemon: its parts wired together, and the loop that runs them from start to stop.

asyncio wiring only; the decisions are the core's. Each source is read by its own task
(reading.py) into the streams being scanned (scan_streams.py); findings go to their launch
(live_launches.py) and, with the scanner's safe point, to the write path (writes.py), which
commits them together, so a crash at any moment neither loses nor doubles a finding. Here:
the batcher's tick (quiet sources settled, commits, the watchdog), a failed launch told to
the operator and the relaunches, and the run. Parts of their own: the library reload
(library_reload.py), the snapshots in force (snapshots_in_force.py), what status says
(status_view.py), the history's pruning and export (upkeep.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from logwatch.core.remedy.policy import CurrentLaunch
from logwatch.core.safe_text.visible import visible
from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from logwatch.daemon.library_reload import LibraryReload
from logwatch.daemon.library_watch import LibraryWatch
from logwatch.daemon.live_launches import LiveLaunches, Notice
from logwatch.daemon.notify import Notifier
from logwatch.daemon.reading import Readers
from logwatch.daemon.relaunches import Relaunches
from logwatch.daemon.scan_streams import (
    HOLD_SECONDS,
    LINE_HOLD_SECONDS,
    QUIET_SECONDS,
    ScanStreams,
    Stream,
)
from logwatch.daemon.snapshots_in_force import SnapshotsInForce
from logwatch.daemon.status_view import daemon_status, lag_bytes, signature_states, source_states
from logwatch.daemon.upkeep import export_every, keep_days
from logwatch.daemon.writes import Writes
from logwatch.host.launch_snapshot import LaunchSnapshots
from logwatch.host.targets import TargetSnapshot, TargetSnapshots
from logwatch.own_log import get as get_logger
from logwatch.sources.base import Chunk, Source
from logwatch.store.db import Store
from logwatch.store.live import LiveFinding, LiveWriter, launch_id

T = TypeVar("T")

# The batcher's housekeeping tick (quiet sources, positions, the watchdog); holds and
# pending findings wake it when they are due.
TICK_SECONDS = 0.25
# Exit status when stopped with findings the database never took.
EXIT_UNWRITTEN = 75  # EX_TEMPFAIL
# Exit status when a source's reader stopped on a fault of logwatch's (said in the log).
EXIT_READER_FAILED = 70  # EX_SOFTWARE


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
        # pages of failed launches the history holds that no page was decided for (the last
        # run stopped in between): decided once this run has started
        self.untold: list[dict[str, Any]] = []
        self.on_signal = on_signal  # `logwatch run`: SIGTERM/SIGINT go to the child instead
        self.targets = targets  # configured targets: snapshots retaken when a unit restarts
        self.notifier = notifier or Notifier()
        self.events: list[str] = []  # what the operator should know (reload results, ...)
        self.control: Any = None  # a ControlServer, when a socket is configured
        self.watch_dirs: list[Path] = []  # signature directories whose changes reload
        self.log = get_logger("logwatch.daemon")
        self.started = time.monotonic()
        self.sources = list(sources)
        # the library in force, reloaded on SIGHUP, a request or a signature file changed
        self.library_reload = LibraryReload(library, reload_library, self)
        self.writer = LiveWriter(store, library)
        self.resume = self.writer.checkpoints()
        # a stream followed under a new name keeps its launches: they take the name
        # (a file's or a journal's stream is its identity; stdin's `stream` is its pipe)
        named = [(s.name, getattr(s, "stream", None)) for s in sources]
        for old, new in self.writer.adopt([(n, st) for n, st in named
                                           if isinstance(st, str)]):
            self.log.info("source_renamed", source=new, was=old)
        # which start of vLLM each finding belongs to; a source's current one goes on
        # across a restart of the daemon
        self.launches = LiveLaunches(
            self.writer, launch_snapshots or LaunchSnapshots(),
            per_generation=[s.name for s in sources if not getattr(s, "replayable", True)],
            on_begin=lambda launch: self.log.info("launch", source=launch.source,
                                                  number=launch.number,
                                                  line=launch.start_line),
            signatures=library.by_id(),
            exiting=[s.name for s in sources if hasattr(s, "on_exit")])
        # findings and positions on their way into the history
        self.writes = Writes(self.writer, self.launches, self)
        # the snapshot of each source's or target's configuration its findings link to
        self.in_force = SnapshotsInForce(snapshots or {}, targets, self.writer, self.writes,
                                         self.launches, self)
        matcher = Matcher(library.signatures, on_disable=self.library_reload.signature_disabled,
                          vocabulary=library.vocabulary)
        matcher.warm()  # before the first finding, which would wait for it
        self.scan_streams = ScanStreams(
            matcher, self.resume, self.launches, self.writes, self.in_force, self,
            quiet_flush=quiet_flush, hold=hold, line_hold=line_hold)
        self._stop = asyncio.Event()
        self.readers = Readers(self.scan_streams, self.writes, self._stop, self.log)
        problem = library.vocabulary.read() if library.vocabulary is not None else ""
        if problem:  # said at start-up, once: the daemon goes on placing by frames and tags
            self.events.append(problem)
            self.log.warning("vocabulary_unreadable", problem=problem)
        self.metrics: Any = None  # a MetricsServer, when --metrics is given
        self.relaunches: Relaunches | None = None  # when a target's policy may act
        # why the control socket is needed, when nothing can go on without it (`run
        # --relaunch ask`: approvals come through it); then a socket that fails stops the start
        self.needs_socket: str | None = None
        self._last_beat = 0.0
        self._last_lines = 0

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

    # what was read and is being scanned, as the metrics, status and the tests read it
    @property
    def streams(self) -> dict[str, Stream]:
        return self.scan_streams.streams

    @property
    def lines(self) -> int:
        return self.scan_streams.lines

    @property
    def lines_by_source(self) -> dict[str, int]:
        return self.scan_streams.lines_by_source

    @property
    def read_positions(self) -> dict[str, tuple[str, int]]:
        return self.scan_streams.read_positions

    def handle(self, chunk: Chunk) -> None:
        """Scan a chunk read from a source (scan_streams.ScanStreams.handle)."""
        self.scan_streams.handle(chunk)

    # the library in force and the snapshots, as the socket, metrics and relaunches read them
    @property
    def library(self) -> Library:
        return self.library_reload.library

    @property
    def snapshots(self) -> dict[str, str]:
        """Source or target name -> hash of the recorded snapshot of its configuration."""
        return self.in_force.digests

    def reload(self) -> None:
        """SIGHUP, the socket's `reload`, a signature file changed: see LibraryReload.reload."""
        self.library_reload.reload()

    def record_snapshot(self, snapshot: TargetSnapshot) -> None:
        """See SnapshotsInForce.record_snapshot (any thread)."""
        self.in_force.record_snapshot(snapshot)

    def retake_snapshots(self) -> None:
        """See SnapshotsInForce.retake_snapshots (a relaunch's thread, after its restart)."""
        self.in_force.retake_snapshots()

    # what the socket's status and metrics ask (status_view.py)
    @property
    def scan_failures(self) -> dict[str, int]:
        return self.scan_streams.scan_failures

    def status(self) -> dict[str, Any]:
        return daemon_status(self)

    def source_states(self) -> list[dict[str, Any]]:
        return source_states(self)

    def signature_states(self) -> dict[str, Any]:
        return signature_states(self.library, self.scan_streams.matcher)

    def lag_bytes(self) -> dict[str, int]:
        return lag_bytes(self.read_positions)

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

    def written_all(self) -> bool:
        """Everything read is written and told: no finding pending, no launch due, no
        commit in flight (a failed launch has reached the relaunches by then)."""
        return not self.pending and not self.launches.changed and self.writes.idle

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

    async def _batcher(self) -> None:
        writes = self.writes
        while True:
            await writes.flush_now.wait(TICK_SECONDS)
            writes.flush_now.clear()
            self.scan_streams.settle()
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
        if self.alerts is not None and notice.page is not None:  # [[notify]]: one page
            self._page(notice.page)
        if self.relaunches is not None:
            source = str(fields["source"])
            analysis = self.launches.newest(source)
            root = (analysis.root_incident if analysis is not None
                    and launch_id(analysis.launch) == fields["id"] else None)
            self.relaunches.launch_failed(fields, root.problem if root else None,
                                          self.in_force.snapshot_for(source))

    def current_launch(self, source: str) -> CurrentLaunch | None:
        """What a source runs now, for the relaunch's recheck."""
        launch = self.launches.book.current(source)
        if launch is None:
            return None
        return CurrentLaunch(launch_id(launch), self.in_force.snapshot_for(source), launch.outcome,
                             frozenset(i.problem for i in launch.book.incidents.values()))

    def signature_status(self, signature: str) -> str:
        """A signature's status in the library loaded now ("unknown" when it is not)."""
        found = next((s for s in self.library.signatures if s.id == signature), None)
        return found.status if found is not None else "unknown"

    def _page(self, page: dict[str, Any]) -> None:
        """[[notify]] decides the page of a failed launch; that it did is recorded with the
        next commit, so a restart neither pages it again nor misses it."""
        self.alerts.launch_failed(page)
        self.writes.page_decided(str(page["launch"]), str(page["source"]),
                                 page.get("root_cause"))

    def in_store(self, fn: Callable[[Store], T]) -> T:
        """`fn` with the daemon's store, one DuckDB call at a time (any thread)."""
        with self.writes.lock:
            return fn(self.writer.store)

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
        if self.watch_dirs and self.library_reload.load is not None and not watch.start():
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
        if self.alerts is not None:
            for page in self.untold:
                self._page(page)
        self.untold = []
        readers = [asyncio.create_task(self.readers.read(s)) for s in self.sources]
        all_read = asyncio.create_task(self.readers.read_all(readers))
        batcher = asyncio.create_task(self._batcher())
        watcher = (asyncio.create_task(self.in_force.watch_targets(self.targets))
                   if self.targets is not None and self.targets.watched else None)
        stopper = asyncio.create_task(self._stop.wait())
        keeper = (asyncio.create_task(keep_days(self, self.keep_days))
                  if self.keep_days > 0 else None)
        exporter = (asyncio.create_task(export_every(self, *self.export))
                    if self.export is not None else None)
        died: list[asyncio.Task[None]] = []
        try:
            await asyncio.wait([stopper, all_read], return_when=asyncio.FIRST_COMPLETED)
            for source, reader in zip(self.sources, readers, strict=True):
                if reader.done() and not reader.cancelled() and reader.exception() is not None:
                    died.append(reader)
                    self.log.error("reader_failed", source=source.name,
                                   error=repr(reader.exception())[:500])
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
            self.scan_streams.settle(everything=True)
            unwritten = await self.writes.last_commit()
            if self.control is not None:
                await self.control.close()
            if self.metrics is not None:
                await self.metrics.close()
            if self.alerts is not None:
                await self.alerts.close()
            self.log.info("stopped", lines=self.lines, findings=self.committed)
        if unwritten:
            return EXIT_UNWRITTEN
        return EXIT_READER_FAILED if died else 0
