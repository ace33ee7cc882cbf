"""The daemon's launches: which start of vLLM each finding belongs to, what changed since the
last commit, the analysis of each changed launch (on the database thread), and what to tell
watchers and the operator once a commit made it durable."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from logwatch.core.diagnosis.analysis import LaunchAnalysis, analyse
from logwatch.core.launches.lifecycle import (
    CRASHED,
    FAILED,
    REPLACED,
    SERVING,
    SERVING_SIGNATURES,
    Launch,
    LaunchBook,
)
from logwatch.core.signatures.findings import Finding
from logwatch.core.signatures.signature import Signature
from logwatch.core.snapshot.model import Snapshot
from logwatch.daemon.alerts import failure_page
from logwatch.host.launch_snapshot import LaunchSnapshots
from logwatch.store.live import LaunchWritten, LiveWriter, StoredLaunch, launch_id

PUBLISHED_KEPT = 1000  # launches whose last `launch` event is remembered
# A launch whose findings only added to incidents it had is analysed again at most this
# often (a backlog of a failing launch commits every 50 ms); a new launch, a new incident,
# a new outcome or an exit is analysed at the next commit.
ANALYSE_SECONDS = 1.0
# a failed launch of a source with no exit to wait for (a file, a journal) is told as a
# failure once no finding joined it for this long: its root cause is often printed after the
# first fatal line (the TP workers' "failed to start", then their tracebacks)
SETTLE_SECONDS = 3.0
# a source is in a crash loop while this many of its launches failed within this many
# minutes and none served since (the [[notify]] crash_loop defaults: one meaning everywhere)
CRASH_LOOP_LAUNCHES = 3
CRASH_LOOP_MINUTES = 10.0


@dataclass(frozen=True, slots=True)
class Placed:
    """Where a finding went: its launch's id, whether it is a copy already counted, and the
    finding as it counts there (a teardown's report is context: lifecycle.torn_down)."""

    launch: str
    copy: bool
    finding: Finding


@dataclass(frozen=True, slots=True)
class Notice:
    """Something a commit made durable: an event for subscribers (`kind`, `fields`), and for
    a launch that failed, the line the operator reads (`failure`)."""

    kind: str
    fields: dict[str, Any]
    failure: str | None = None
    publish: bool = True  # False: only the failure is new (its event went out before)
    page: dict[str, Any] | None = None  # with a failure: what [[notify]] pages (alerts)


class LiveLaunches:
    def __init__(self, writer: LiveWriter, snapshots: LaunchSnapshots,
                 per_generation: Iterable[str], on_begin: Callable[[Launch], None],
                 signatures: Mapping[str, Signature] | None = None,
                 exiting: Iterable[str] = ()) -> None:
        """`per_generation`: sources whose every generation is a new start of vLLM (a `run`
        child, a stdin run). `on_begin`: told of each new launch. `signatures`: the library's,
        to rebuild the incidents of launches an earlier run of the daemon left going.
        `exiting`: sources that report their child's exit (`exited`); a failed launch of
        one is told as a failure (what a relaunch is planned from) only once its child
        ended, when every line it printed has been read: the first fatal line is seldom
        the root cause, and a plan made from it is made from half the evidence."""
        self.snapshots = snapshots
        self.book = LaunchBook()
        # (source, launch number, error) of analyses that failed (told by the write path)
        self.analysis_failures: list[tuple[str, int, str]] = []
        # source -> (generation, line): findings up to there were counted before a restart
        # of the daemon (it reads again from its last checkpoint, a little before)
        self._replayed: dict[str, tuple[str, int]] = {}
        for stored in writer.latest_launches():  # each source's current one goes on
            self._go_on_with(stored, writer, signatures or {})
        self._per_generation = frozenset(per_generation)
        self._on_begin = on_begin
        self._dirty: dict[str, Launch] = {}  # changed since the last commit, by id
        self._urgent: set[str] = set()  # of those, the ones to write at the next commit
        self._analysed: dict[str, float] = {}  # when each was last taken (monotonic)
        self._lock = threading.Lock()  # analyses are kept on the database thread
        self.analyses: dict[str, LaunchAnalysis] = {}  # each source's newest, by source
        self.recognised: set[str] = set()  # sources that gave a finding (vLLM output seen)
        self._published: dict[str, tuple[Any, ...]] = {}  # launch id -> its last event's state
        self._exiting = frozenset(exiting)
        self._failures: set[str] = set()  # launch ids whose failure was told
        self._last_found: dict[str, float] = {}  # launch id -> when a finding last joined it
        self._final = False  # the last commit before stopping: every failure is told
        self._diagnoses: set[str] = set()  # diagnosis ids published
        # source -> when (wall clock) each of its recent launches was told failed, seeded
        # from the history so that a loop goes on across a restart of the daemon
        self._failed_at: dict[str, deque[float]] = {}
        for source, _, when in writer.recent_failures(CRASH_LOOP_MINUTES * 60):
            self._failed_at.setdefault(source, deque(maxlen=100)).append(when)
        self.failed = 0  # launches seen failing since the daemon started
        self.last_failure: str | None = None  # the newest, as the operator reads it

    @property
    def changed(self) -> bool:
        """Whether a launch is due to be written (see `take`)."""
        return bool(self._urgent) or any(self._due(lid, time.monotonic())
                                         for lid in self._dirty)

    def _due(self, lid: str, now: float) -> bool:
        return lid in self._urgent or now - self._analysed.get(lid, -ANALYSE_SECONDS) \
            >= ANALYSE_SECONDS

    def _go_on_with(self, stored: StoredLaunch, writer: LiveWriter,
                    signatures: Mapping[str, Signature]) -> None:
        """A launch stored by an earlier run of the daemon is still its source's current one:
        later findings join it. Its incidents are rebuilt from the first and last finding of
        each (with their stored counts) and its start lines' captures, so its analysis after
        a restart is the one it had."""
        launch = self.book.begin(stored.source, stored.start_line, stored.generation,
                                 stored.seen_start)
        launch.key = stored.id  # its id, whatever its source is called now (LiveWriter.adopt)
        self.book.renumber(launch, stored.number)
        for sig_id, captures, line, when, process, pid, rank, text, count in \
                writer.launch_findings(stored.id):
            signature = signatures.get(sig_id)
            if signature is None:  # gone from the library since
                continue
            finding = Finding.restored(signature, json.loads(captures), stored.source,
                                       line, text, when, process, pid, rank)
            incident = self.book.restore(launch, finding)
            incident.count = max(incident.count, int(count))
        self._replayed[stored.source] = (stored.generation, stored.last_line)
        launch.outcome, launch.started, launch.last_line = (stored.outcome, stored.started,
                                                            max(launch.last_line,
                                                                stored.last_line))
        # a stored launch that serves, or crashed after serving, came up (a stopped one may
        # have: the lifecycle lines restored say so)
        launch.served = launch.served or stored.outcome in (SERVING, CRASHED) or any(
            i.signature.id in SERVING_SIGNATURES for i in launch.book.incidents.values())
        self.book.settle_restored(launch)

    def new_generation(self, source: str, generation: str, line: int) -> None:
        """A source began a generation: for a `run` child or a stdin run, a new launch."""
        if source in self._per_generation:
            self._begin(self.book.begin(source, line, generation, seen_start=False))

    def restarted(self, source: str, line: int, generation: str) -> None:
        """The program behind a source was started again at `line` (journald)."""
        self.book.restarted(source, line, generation)

    def _begin(self, launch: Launch) -> None:
        previous = self.book.previous(launch)
        if previous is not None and previous.outcome in (CRASHED, REPLACED):
            # closed by this start (core.launches.lifecycle): written with it
            self._dirty[launch_id(previous)] = previous
            self._urgent.add(launch_id(previous))
        self.book.forget(launch.source)  # older ones are stored; memory stays bounded
        self._dirty[launch_id(launch)] = launch
        self._urgent.add(launch_id(launch))
        self._on_begin(launch)

    def place(self, finding: Finding, generation: str) -> Placed:
        replayed = self._replayed.get(finding.source)
        if replayed is not None:
            current = self.book.current(finding.source)
            if replayed[0] == generation and finding.lineno <= replayed[1] \
                    and current is not None:
                return Placed(launch_id(current), True, finding)  # counted before the restart
            del self._replayed[finding.source]
        self.settle_exits(finding.source, finding.record_lineno - 1)  # ended before it
        change = self.book.observe(finding, generation)
        self.recognised.add(finding.source)
        if change.new_launch:
            self._begin(change.launch)
        lid = launch_id(change.launch)
        self._dirty[lid] = change.launch
        self._last_found[lid] = time.monotonic()
        if change.new_incident or change.outcome_changed:
            self._urgent.add(lid)
        return Placed(lid, change.copy, change.finding)

    def exited(self, source: str, code: int) -> None:
        """A `run` child ended with `code`: so did its launch."""
        launch = self.book.exited(source, code)
        if launch is not None:
            self._dirty[launch_id(launch)] = launch
            self._urgent.add(launch_id(launch))

    def exited_at(self, source: str, line: int, status: int, clean: bool) -> None:
        """The manager said the main process of the launch in force at `line` ended: given
        to it once the findings before `line` are placed (`place`, `settle_exits`)."""
        self.book.exited_at(source, line, status, clean)

    def settle_exits(self, source: str, through: int | None = None) -> None:
        for launch in self.book.settle_exits(source, through):
            self._dirty[launch_id(launch)] = launch
            self._urgent.add(launch_id(launch))

    def take(self, everything: bool = False) -> list[Launch]:
        """Frozen copies of the changed launches that are due (all of them with
        `everything`: the last commit before stopping). Event-loop thread."""
        now = time.monotonic()
        self._final = self._final or everything
        due = [lid for lid in self._dirty if everything or self._due(lid, now)]
        launches = [self._dirty.pop(lid).frozen() for lid in due]
        for lid in due:
            self._analysed[lid] = now
            self._urgent.discard(lid)
        if len(self._analysed) > PUBLISHED_KEPT:
            for lid in list(self._analysed)[:PUBLISHED_KEPT // 2]:
                del self._analysed[lid]
        return launches

    def give_back(self, launches: list[Launch]) -> None:
        """A commit failed: its launches are written again, as they are by then."""
        live = {launch_id(launch): launch for launch in self.book.launches()}
        for frozen in launches:
            lid = launch_id(frozen)
            self._dirty.setdefault(lid, live.get(lid, frozen))
            self._urgent.add(lid)

    def analyse(self, launches: list[Launch]) -> list[LaunchAnalysis]:
        """On the database thread: each launch judged against its snapshot. Whatever taking
        the snapshot or judging raises (a fault of ours, a model path the log names that
        cannot be read here) is kept in `analysis_failures` and the launch is written all
        the same, judged without a snapshot, or with its incidents alone: what a log says
        never keeps its launch from the history (a failure here used to read as the
        history being unwritable, and held the source for good)."""
        return [self._judged(launch) for launch in launches]

    def _judged(self, launch: Launch) -> LaunchAnalysis:
        try:
            return analyse(launch, self.snapshots.for_launch(launch.source, launch.captures))
        except Exception as exc:
            failed = f"{type(exc).__name__}: {str(exc)[:300]}"
        self.analysis_failures.append((launch.source, launch.number, failed))
        bare = Snapshot(problems=(f"no snapshot: {failed}",))
        try:
            return analyse(launch, bare)
        except Exception:
            incidents = list(launch.book.incidents.values())
            return LaunchAnalysis(launch, incidents, None, [], bare)

    def written(self, written: LaunchWritten) -> list[Notice]:
        """A launch's state is durable (event-loop thread): what to tell."""
        row, analysis = written.row, written.analysis
        with self._lock:
            self.analyses[row["source"]] = analysis
        notices = []
        state = (row["outcome"], row["root_signature"], row["failed_before"])
        changed = state != self._published.get(row["id"])
        self._published[row["id"]] = state
        failure = page = None
        if row["outcome"] == FAILED and row["id"] not in self._failures:
            if self._settled(row):
                self._failures.add(row["id"])
                failure, page = self._failed(row, analysis), failure_page(row, analysis)
            else:  # written again after ANALYSE_SECONDS (or when the next launch begins)
                current = self.book.current(row["source"])
                self._dirty.setdefault(row["id"], current if current is not None
                                       and launch_id(current) == row["id"]
                                       else analysis.launch)
        if row["outcome"] == "serving":  # a launch that serves ends its source's loop
            self._failed_at.pop(row["source"], None)
        if changed or failure is not None:
            notices.append(Notice("launch", {
                "id": row["id"], "source": row["source"], "start_line": row["start_line"],
                "outcome": row["outcome"], "snapshot": row["snapshot_hash"],
                "root_cause": row["root_signature"], "failed_before": row["failed_before"]},
                failure, publish=changed, page=page))
        for diag in written.diagnoses:
            if diag["id"] not in self._diagnoses:
                self._diagnoses.add(diag["id"])
                notices.append(Notice("diagnosis", {
                    "launch": row["id"], "incident": diag["incident_id"],
                    "cause": diag["cause"], "title": diag["title"],
                    "summary": diag["summary"], "confidence": diag["confidence"]}))
        if len(self._published) > PUBLISHED_KEPT:  # old launches: their events are long out
            for key in list(self._published)[:PUBLISHED_KEPT // 2]:
                del self._published[key]
        if len(self._failures) > PUBLISHED_KEPT:
            self._failures &= set(self._published)
        if len(self._last_found) > PUBLISHED_KEPT:
            for key in list(self._last_found)[:PUBLISHED_KEPT // 2]:
                del self._last_found[key]
        return notices

    def _settled(self, row: dict[str, Any]) -> bool:
        """Whether every line of a failed launch is in: its child exited (a source that
        reports exits), else no finding joined it for SETTLE_SECONDS; or a later launch of
        its source began, or the daemon stops."""
        if self._final:
            return True
        current = self.book.current(row["source"])
        if current is not None and launch_id(current) != row["id"]:
            return True  # a later launch of the source began: this one is over
        if row["source"] in self._exiting:
            return row["exit_code"] is not None
        quiet = time.monotonic() - self._last_found.get(row["id"], float("-inf"))
        return quiet >= SETTLE_SECONDS

    def _failed(self, row: dict[str, Any], analysis: LaunchAnalysis) -> str:
        self.failed += 1
        self._failed_at.setdefault(row["source"], deque(maxlen=100)).append(time.time())
        root = analysis.root_incident
        why = root.signature.title if root is not None else (
            f"exit code {row['exit_code']}" if row["exit_code"] is not None else "unknown")
        again = (f" again ({row['failed_before']} time(s) before)"
                 if row["failed_before"] else "")
        self.last_failure = f"{row['source']} launch #{row['number']} failed{again}: {why}"
        return self.last_failure

    def crash_loop(self, source: str, now: float | None = None) -> dict[str, Any] | None:
        """A source's crash loop, when it is in one: how many launches failed within
        CRASH_LOOP_MINUTES with none serving since, and that window."""
        now = time.time() if now is None else now
        recent = [t for t in self._failed_at.get(source, ())
                  if now - t <= CRASH_LOOP_MINUTES * 60]
        if len(recent) < CRASH_LOOP_LAUNCHES:
            return None
        return {"failed": len(recent), "minutes": CRASH_LOOP_MINUTES}

    def newest(self, source: str) -> LaunchAnalysis | None:
        """The newest analysis of a source's launch (for `logwatch run`'s triage)."""
        with self._lock:
            return self.analyses.get(source)

    def _analysis_of(self, source: str, lid: str) -> LaunchAnalysis | None:
        """A launch's latest analysis, when it is its source's newest."""
        analysis = self.newest(source)
        return analysis if analysis is not None and launch_id(analysis.launch) == lid else None

    def status(self) -> list[dict[str, Any]]:
        """Each source's current launch."""
        out = []
        for launches in self.book.by_source.values():
            if not launches:
                continue
            launch = launches[-1]
            lid = launch_id(launch)
            published = self._published.get(lid)
            analysis = self._analysis_of(launch.source, lid)
            out.append({"id": lid, "source": launch.source, "number": launch.number,
                        "start_line": launch.start_line, "outcome": launch.outcome,
                        "root_cause": published[1] if published else None,
                        "failed_before": published[2] if published else 0,
                        "fatal_incidents": sum(1 for i in analysis.incidents
                                               if i.signature.fatal) if analysis else 0,
                        "latent": [d.title for d in analysis.latent] if analysis else [],
                        "crash_loop": self.crash_loop(launch.source)})
        return out
