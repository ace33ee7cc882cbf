"""What the daemon read, on its way into the history.

Findings, the positions that produced them and the launches they changed wait here and are
committed together on one database thread, in one transaction: a kill between two commits
then never leaves a position behind what was written (a restart after rotations read such
lines again from files renamed meanwhile, and recorded their findings twice) nor past a
launch not written. The first finding after a quiet spell goes at once, then at most one
batch per COMMIT_GAP_SECONDS (a DuckDB commit costs ~10 ms of CPU) unless BATCH_FINDINGS are
waiting, so a batch closes within 50 ms. Once a commit with launches has failed, findings
go in alone, so a launch the history cannot take does not hold them back; the launch and the
positions follow in the next commit, since a position goes in only with or after everything
read before it. Positions alone at most every CHECKPOINT_SECONDS: a restart re-reads at most
this much, and finding identities make the re-read insert nothing twice. A failed commit
keeps everything and is tried again with a growing pause; readers wait while the database
fails or too much waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from logwatch.core.launches.lifecycle import Launch
from logwatch.core.safe_text.visible import visible
from logwatch.core.write_health import WriteHealth
from logwatch.daemon.live_launches import LiveLaunches, Notice
from logwatch.daemon.notify import Notifier
from logwatch.daemon.wakeup import Wakeup
from logwatch.store.live import (
    Checkpoint,
    LaunchWritten,
    LiveFinding,
    LiveWriter,
    launch_id,
)
from logwatch.store.quarantine import Refused

COMMIT_GAP_SECONDS = 0.05
CHECKPOINT_SECONDS = 5.0  # each commit costs ~2.5 ms of CPU and memory DuckDB keeps until a reopen
BATCH_FINDINGS = 500
# The DuckDB connection is reopened after this many commits (see Store.recycle): every
# 5,000 commits is about every 7 hours of positions alone, sooner while findings come.
RECYCLE_COMMITS = 5_000
# Readers wait while this many findings wait to be written (a backlog full of failures, or
# a database that cannot be written): memory stays bounded, and what is not read yet stays
# in the file or the journal.
MAX_PENDING = 10_000
# A failed commit is retried after 0.5 s, then twice as long each time, at most this long.
RETRY_MAX_SECONDS = 30.0


class Told(Protocol):
    """What the writes tell the rest of the daemon."""

    events: list[str]  # what the operator should know
    log: Any
    notifier: Notifier

    def publish(self, kind: str, **fields: Any) -> None: ...  # to socket subscribers

    def launch_failed(self, notice: Notice) -> None: ...

    def status_now(self) -> None: ...  # a STATUS= line at the next beat


class Writes:
    def __init__(self, writer: LiveWriter, launches: LiveLaunches, told: Told) -> None:
        self.writer = writer
        self.launches = launches
        self.told = told
        self.pending: list[LiveFinding] = []
        self.checkpoints: dict[str, Checkpoint] = {}
        self.committed = 0
        # for metrics: new findings per (signature, version), incidents recorded into (by
        # fatal), when each position was committed (wall time)
        self.findings_by_signature: Counter[tuple[str, int]] = Counter()
        self.incidents_seen: dict[bool, set[str]] = {}
        self.checkpoint_times: dict[str, float] = {}
        self._problems = writer.seen_problems()  # incidents seen in earlier launches
        # for subscribers: (incident id, signature, fatal, launch id, seen in an earlier
        # launch, the source of the launch)
        self._new_incidents: list[tuple[str, str, bool, str | None, bool, str | None]] = []
        self._new_launches: list[LaunchWritten] = []
        self._new_quarantined: list[Refused] = []
        self._analysis_failures: list[tuple[str, int, str]] = []
        # pages [[notify]] decided, recorded with the next commit (launch, source, root cause);
        # a deque: appended on the event loop, drained on the database thread
        self.paged: deque[tuple[str, str, str | None]] = deque()
        # records the history refused for their content, by source: (how many, the last line)
        self.quarantined: dict[str, tuple[int, int]] = {}
        self.flush_now = Wakeup()  # the batcher's: write or settle something now
        self.lock = threading.Lock()  # one DuckDB call at a time, whichever thread runs it
        # every write on one thread of its own, in order; socket clients' queries (their own
        # cursors) and the snapshot checks use the default pool
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="logwatch-db")
        self._inflight: asyncio.Future[None] | None = None
        # in flight: findings, positions, launches
        self._writing: tuple[list[LiveFinding], list[Checkpoint], list[Launch]] = ([], [], [])
        self._last_write = 0.0  # the last commit
        self._rest_due = False  # findings went without the launches they changed: those next
        # a commit with launches failed: the findings go alone until the launches are in
        self._launches_failing = False
        self._last_batch = 0.0  # the last commit with findings
        self._commits = 0  # since the connection was (re)opened
        self.recycle_commits = RECYCLE_COMMITS
        self._wake_at = float("-inf")  # the batcher's latest scheduled wake-up
        self.health = WriteHealth(RETRY_MAX_SECONDS)  # can the database be written?
        self.room = asyncio.Event()  # readers may go on: the database takes what is read
        self.room.set()

    # -- what comes in ----------------------------------------------------------------------
    def add(self, found: list[LiveFinding]) -> None:
        if found:
            self.pending.extend(found)
            self.soon()

    def position(self, point: Checkpoint) -> None:
        """Where a source's reading is safe up to (its findings are pending before it)."""
        self.checkpoints[point.source] = point
        if len(self.pending) >= BATCH_FINDINGS:
            self.flush_now.set()
        if len(self.pending) >= MAX_PENDING:
            self.update_room()

    def page_decided(self, launch: str, source: str, root_cause: str | None) -> None:
        """[[notify]] decided the page of a failed launch: recorded with the next commit."""
        self.paged.append((launch, source, root_cause))
        self.soon()

    def soon(self) -> None:
        """Wake the batcher for pending findings: now, or when the commit gap is over."""
        self.wake_at(self._last_batch + COMMIT_GAP_SECONDS)

    def wake_at(self, when: float) -> None:
        """Wake the batcher at `when` (monotonic; at once if past), unless a wake-up due by
        then is scheduled already."""
        now = time.monotonic()
        if when <= now:
            self.flush_now.set()
        elif not now <= self._wake_at <= when:
            with contextlib.suppress(RuntimeError):  # no loop: the final settle and commit
                asyncio.get_running_loop().call_later(when - now, self.flush_now.set)
                self._wake_at = when

    def update_room(self) -> None:
        """Readers go on while the database takes what is read and the backlog of
        findings to write is bounded; they wait otherwise."""
        if self.health.writable and len(self.pending) < MAX_PENDING:
            self.room.set()
        else:
            self.room.clear()

    def state(self) -> dict[str, Any]:
        """The database as `status` shows it."""
        state = {"path": str(self.writer.store.path), **self.health.state(time.monotonic())}
        if not self.health.writable:
            state["reading"] = (f"paused for files and journals; pipes until "
                                f"{MAX_PENDING:,} findings wait")
        return state

    @property
    def idle(self) -> bool:
        """No commit in flight."""
        return self._inflight is None

    # -- writing ----------------------------------------------------------------------------
    async def turn(self) -> None:
        """One turn of the batcher: write what is due, on the database thread."""
        now = time.monotonic()
        if self.health.waiting(now):
            due = False  # the database failed: wait for the next try
        elif self.pending or self.launches.changed:
            due = (now - self._last_batch >= COMMIT_GAP_SECONDS
                   or len(self.pending) >= BATCH_FINDINGS or not self.health.writable)
            if not due:
                self.soon()
        else:
            due = (now - self._last_write >= CHECKPOINT_SECONDS
                   or (not self.health.writable and bool(self.checkpoints)))
        if not due:
            return
        points: list[Checkpoint] = []
        launches: list[Launch] = []
        if (self.pending and self.launches.changed and self._launches_failing
                and not self._rest_due):
            # The findings alone (see the module's docstring): the launches they changed go
            # in the next turn, and the positions read past them with those, never before
            # (a restart must read the lines again to rebuild a launch not written)
            batch, self.pending = self.pending, []
            self._rest_due = True
        else:
            batch, points, launches = self._take()
            self._rest_due = False
        if not (batch or points or launches or self.paged):
            return
        self._last_write = time.monotonic()  # shielded, so a stop waits for it
        if batch:
            self._last_batch = self._last_write
        self._writing = (batch, points, launches)
        self._inflight = asyncio.get_running_loop().run_in_executor(
            self.thread, self._write, batch, points, launches)
        try:
            await asyncio.shield(self._inflight)
        except Exception as exc:  # any failure: keep it all, retry
            self._failed(batch, points, launches, exc)
            self._launches_failing = bool(launches)
        else:
            self._written(batch)
            if launches:
                self._launches_failing = False
            if self._rest_due:
                self.soon()
        self._inflight, self._writing = None, ([], [], [])

    def _take(self, everything: bool = False
              ) -> tuple[list[LiveFinding], list[Checkpoint], list[Launch]]:
        """The pending batch, taken on the event-loop thread (where findings are added):
        findings, positions, and the launches that changed (frozen copies)."""
        batch, points = self.pending, list(self.checkpoints.values())
        self.pending, self.checkpoints = [], {}
        return batch, points, self.launches.take(everything)

    def _write(self, batch: list[LiveFinding], points: list[Checkpoint],
               launches: list[Launch]) -> None:
        with self.lock:
            if not (batch or points or launches or self.paged):
                return
            analyses = self.launches.analyse(launches)
            self.committed += self.writer.commit(batch, points, analyses)
            while self.paged:  # once the batch is in: a failed commit keeps them for the next
                self.writer.record_told(*self.paged[0])
                self.paged.popleft()
            new = self.writer.new_incidents
            sources = {lf.launch: lf.finding.source for lf in batch if lf.launch}
            sources.update((launch_id(a.launch), a.launch.source) for a in analyses)
            for signature, version, incident, fatal in self.writer.last_new:
                self.findings_by_signature[(signature, version)] += 1
                seen = self.incidents_seen.setdefault(fatal, set())
                if incident not in seen:
                    seen.add(incident)
                    if incident in new:  # published from the loop, after this
                        problem, launch = new[incident]
                        self._new_incidents.append((incident, signature, fatal, launch,
                                                    problem in self._problems,
                                                    sources.get(launch or "")))
            self._problems.update(problem for problem, _ in new.values())
            self._new_launches.extend(self.writer.last_launches)
            self._new_quarantined.extend(self.writer.last_quarantined)
            self._analysis_failures.extend(self.launches.analysis_failures)
            self.launches.analysis_failures.clear()
            wall = time.time()
            for point in points:
                self.checkpoint_times[point.source] = wall
            self._commits += 1
            if self._commits >= self.recycle_commits and self.writer.store.recycle():
                self._commits = 0

    def _written(self, batch: list[LiveFinding]) -> None:
        """A commit landed: tell the watchers, and the operator if the database is back."""
        told = self.told
        outage = self.health.landed(time.monotonic())
        if outage is not None:
            seconds, tries = outage
            told.log.info("database_writable_again", after_s=round(seconds, 1),
                          failed_tries=tries)
            told.events.append(f"database writable again after {tries} failed commit(s); "
                               "reading resumed")
            told.status_now()
        self.update_room()
        self._tell_quarantined()
        for where, number, error in self._analysis_failures:
            self.told.log.error("analysis_failed", source=where, launch=number,
                                error=visible(error), recorded="without its snapshot")
        self._analysis_failures = []
        for incident, signature, fatal, launch, again, source in self._new_incidents:
            told.publish("incident", id=incident, signature=signature, fatal=fatal,
                         launch=launch, again=again, source=source)
            if fatal:  # at error priority: `journalctl -p err -u logwatch` lists them
                told.log.error("fatal_incident", signature=signature, incident=incident,
                               launch=launch, again=again, source=source)
        self._new_incidents = []
        for written in self._new_launches:
            for notice in self.launches.written(written):
                if notice.failure is not None:
                    told.launch_failed(notice)
                if notice.publish:
                    told.publish(notice.kind, **notice.fields)
        self._new_launches = []
        if batch:  # durable now: tell the watchers
            told.publish("committed", count=len(batch), findings=[
                {"source": lf.finding.source, "line": lf.finding.lineno,
                 "signature": lf.finding.signature.id} for lf in batch[:1000]])

    def _tell_quarantined(self) -> None:
        """Records the history refused (their content, not the store): said once each, by
        source and line; the source has moved on past them."""
        told = self.told
        for refused in self._new_quarantined:
            count, _ = self.quarantined.get(refused.source, (0, 0))
            self.quarantined[refused.source] = (count + 1, refused.line)
            what = f"{refused.kind} {refused.signature}" if refused.signature else refused.kind
            error = visible(refused.error[:300])
            told.log.error("record_quarantined", source=refused.source, line=refused.line,
                           record=what, error=error)
            told.events.append(f"{refused.source}: line {refused.line} quarantined, the "
                               f"history refused its {what} ({error}); reading went on")
        self._new_quarantined = []

    def _failed(self, batch: list[LiveFinding], points: list[Checkpoint],
                launches: list[Launch], exc: BaseException) -> None:
        """A commit failed (disk full, I/O error, ...): nothing of it is lost. Its findings go
        back before those read since, a source's position goes back unless a newer one came
        (it covers the findings kept), files and journals stop being read, and it is tried
        again after a growing pause."""
        told = self.told
        self.pending[:0] = batch
        for point in points:
            self.checkpoints.setdefault(point.source, point)
        self.launches.give_back(launches)
        health = self.health
        delay = health.failed(f"{type(exc).__name__}: {str(exc)[:500]}", time.monotonic())
        self.wake_at(health.retry_at)
        self.update_room()
        log = told.log.error if health.failures == 1 else told.log.warning
        log("database_unwritable", db=str(self.writer.store.path), error=health.error,
            failed_tries=health.failures, pending=len(self.pending), retry_in_s=delay)
        if health.failures == 1:
            told.events.append(f"database {self.writer.store.path} unwritable "
                               f"({health.error}); findings kept, files and journals "
                               "paused, retrying")
        told.notifier.status(f"DATABASE UNWRITABLE ({visible(str(health.error)[:100])}): "
                             f"{len(self.pending):,} findings waiting, reading paused, "
                             f"retry {health.failures} in {delay:g} s")
        if "invalidated" in str(exc).lower():  # DuckDB's fatal errors need a new connection
            try:
                self.writer.store.recycle()
            except Exception as reopen:  # the next failure says it again
                told.log.warning("database_reopen_failed", error=str(reopen)[:500])

    # -- stopping ---------------------------------------------------------------------------
    async def land(self) -> None:
        """Let a batch being written land (its failure keeps it for the last commit)."""
        if self._inflight is not None:
            try:
                await self._inflight
            except Exception as exc:  # kept for the last try
                self._failed(*self._writing, exc=exc)

    async def last_commit(self, tries: int = 4) -> int:
        """Write what is pending before stopping, trying a few times over ~2 s (a stop must
        not wait for a disk to be freed); the findings left unwritten, said loudly."""
        try:
            for attempt in range(tries):
                batch, points, launches = self._take(everything=True)
                try:
                    self._write(batch, points, launches)
                    self._written(batch)
                    return 0
                except Exception as exc:  # retried, then reported
                    self._failed(batch, points, launches, exc)
                    if attempt + 1 < tries:
                        await asyncio.sleep(0.25 * 2 ** attempt)
            told = self.told
            told.log.error("stopped_with_unwritten_findings", findings=len(self.pending),
                           db=str(self.writer.store.path), error=self.health.error)
            told.events.append(f"stopped with {len(self.pending):,} finding(s) the database "
                               f"never took ({self.health.error}); their lines are read again "
                               "at the next start where the source allows (files, journald)")
            return len(self.pending)
        finally:
            self.thread.shutdown(wait=False)  # idle: the last write has landed
