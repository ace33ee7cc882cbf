"""The daemon's writes: findings and the checkpoints that produced them, in one transaction.

A finding's id is (generation, line, signature): replaying lines after a crash inserts nothing
twice; the checkpoint is committed with the findings, so nothing read is ever skipped either.
Incidents belong to a launch and are folded forward from the findings a batch actually
inserted (a replay adds nothing to their counts). The launches a batch touched are written
with it: their outcome, root cause and diagnoses, as core.diagnosis.analysis found them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import duckdb

from logwatch.core.diagnosis.analysis import LaunchAnalysis
from logwatch.core.launches.incidents import incident_key, problem_key
from logwatch.core.launches.lifecycle import Launch
from logwatch.core.launches.unrecognised import synthetic
from logwatch.core.signatures.fallback import is_generic
from logwatch.core.signatures.findings import Finding, evidence_text
from logwatch.core.signatures.library import Library
from logwatch.core.snapshot.model import Snapshot
from logwatch.store.db import Store
from logwatch.store.quarantine import Refused, culprits, is_content_error, rolled_back
from logwatch.store.record import snapshot_row
from logwatch.store.schema import LAUNCH_SEQ

# A stream's `sources` row is refreshed (its last_seen) at most this often; each statement of
# a commit costs DuckDB 1.5-4 ms, and a watcher waits for the commit of every finding.
SOURCE_REFRESH_SECONDS = 5.0
KNOWN_INCIDENTS_KEPT = 100_000  # incident ids known stored (~100 bytes each), then asked again
LAUNCH_DIGESTS_KEPT = 1024  # launches whose snapshot hash is remembered for their findings
DIGESTS_KEPT = 256  # snapshot objects whose hash is remembered (one per launch state)
# incidents a commit folds into stored ones by an UPDATE each (_fold_into), at most; more go
# in one upsert
FOLDED_ONE_BY_ONE = 4
# How a stored incident takes in the findings of a commit: each column's new value from its
# stored one ({old}) and the commit's ({new}), for the upsert and for _fold_into's UPDATE
_FOLD = (("count", "{old} + {new}"), ("first_line", "least({old}, {new})"),
         ("last_line", "greatest({old}, {new})"), ("first_time", "least({old}, {new})"),
         ("last_time", "greatest({old}, {new})"), ("library_version", "{new}"),
         ("processes", "list_sort(list_distinct(list_concat({old}, {new})))"),
         ("ranks", "list_sort(list_distinct(list_concat({old}, {new})))"))
_UPSERT_FOLD = ", ".join(f"{c} = " + rule.format(old=f"incidents.{c}", new=f"excluded.{c}")
                         for c, rule in _FOLD)
_UPDATE_FOLD = ("UPDATE incidents SET "
                + ", ".join(f"{c} = " + rule.format(old=c, new="?") for c, rule in _FOLD)
                + " WHERE id = ?")


def _id(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    source: str  # the configured source name (what status and metrics show)
    generation: str
    offset: int
    line: int
    cursor: str | None = None  # journald: the last whole entry before `offset`
    # the stream read (a path, a journal; see sources/base.py), which the stored row is
    # keyed by; "" for a source without one (a pipe, a child): its name stands in
    stream: str = ""

    @property
    def key(self) -> str:
        return self.stream or self.source


@dataclass(frozen=True, slots=True)
class LiveFinding:
    finding: Finding
    generation: str
    identity: str | None = None  # journald: "cursor#line-in-entry", stable across re-reads
    snapshot_hash: str | None = None  # the configuration in force (known for `logwatch run`)
    launch: str | None = None  # the id of its launch (launch_id)
    copy: bool = False  # a copy of a report already counted (raw stderr after the logger)


@dataclass(slots=True)
class _Landing:
    """What a commit tells the writer of the history once it lands (LiveWriter._commit)."""

    incidents: list[str] = field(default_factory=list)  # stored
    sources: dict[str, float] = field(default_factory=dict)  # rows written, when
    digests: dict[str, str] = field(default_factory=dict)  # launches written: their hash
    unhashed: dict[str, list[str]] = field(default_factory=dict)  # findings with none yet


def launch_id(launch: Launch) -> str:
    """A live launch's id: the generation it began in, its source and first line (computed
    once: the launch keeps it)."""
    if not launch.key:
        launch.key = _id("launch", launch.generation, launch.source, launch.start_line)
    return launch.key


@dataclass(frozen=True, slots=True)
class LaunchWritten:
    """What a commit wrote about a launch: its row, and the diagnoses it has now."""

    row: dict[str, Any]
    diagnoses: list[dict[str, Any]]
    analysis: LaunchAnalysis


@dataclass(frozen=True, slots=True)
class StoredLaunch:
    """The newest launch of a source, as stored (a restarted daemon goes on with it)."""

    id: str
    source: str
    generation: str
    number: int
    start_line: int
    last_line: int
    seen_start: bool
    outcome: str
    started: datetime | None


class LiveWriter:
    def __init__(self, store: Store, library: Library) -> None:
        self.store = store
        self.library = library
        # the last commit's new findings: (signature, version, incident id, fatal)
        self.last_new: list[tuple[str, int, str, bool]] = []
        self.last_launches: list[LaunchWritten] = []  # the last commit's launches
        # snapshots hashed (by object: a launch's is built once) and those stored already
        self._digests: dict[int, tuple[Snapshot, str]] = {}
        self._stored: set[str] = set()
        # what the history holds for sure, so a commit need not ask or write it again: the
        # incidents stored (a finding folded into one of them skips the lookup), and when
        # each stream's `sources` row was last written (its last_seen is refreshed at most
        # every SOURCE_REFRESH_SECONDS). Each commit's additions are kept once it lands;
        # all is forgotten after a prune (`forget_stored`).
        self._known_incidents: set[str] = set()
        self._sources_written: dict[str, float] = {}
        # each launch's snapshot hash as last written, for its findings committed before
        # it (a launch goes in the commit after its findings'); the findings written with
        # no hash yet, by launch, given theirs when the launch is written
        self._launch_digests: dict[str, str] = {}
        self._unhashed: dict[str, list[str]] = {}
        self._landing = _Landing()
        # the last commit's new incidents: id -> (problem, launch id)
        self.new_incidents: dict[str, tuple[str, str | None]] = {}
        self.last_quarantined: list[Refused] = []  # the last commit's refused records

    def latest_launches(self) -> list[StoredLaunch]:
        """Each source's newest launch."""
        rows = self.store.query(
            "SELECT id, source, source_id, number, start_line, last_line, seen_start, "
            "outcome, started FROM launches WHERE source_id IS NOT NULL "
            "QUALIFY row_number() OVER (PARTITION BY source ORDER BY number DESC) = 1")
        return [StoredLaunch(r[0], r[1], r[2] or "", int(r[3] or 1), int(r[4]), int(r[5] or 0),
                             bool(r[6]), r[7], r[8]) for r in rows]

    def adopt(self, followed: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """Launches of a stream stored under another source name (a unit first followed with
        `--journal-user-unit`, now a configured target's; a file moved into a target) take
        the name it is followed under now: one history, its numbering, open incidents and
        pages going on. `followed`: (source name, stream). The launch rows say which stream
        they read: a journal's launches its stream (their source_id), a file's its path at
        the end of their name (`file:/p`, `TARGET:file:/p`). Returns (old name, new name)
        for each name taken over."""
        moved: list[tuple[str, str]] = []
        for name, stream in followed:
            if not stream or (stream == name and not stream.startswith("file:")):
                continue  # nothing to resume (a pipe, a child): its name is its identity
            if stream.startswith("journal:"):
                match, args = "source_id = ?", [stream]
            else:
                match, args = "(source = ? OR ends_with(source, ?))", [stream, f":{stream}"]
            old = [r[0] for r in self.store.query(
                f"SELECT DISTINCT source FROM launches WHERE {match} AND source <> ?",
                [*args, name])]
            if not old:
                continue
            self.store.con.execute(f"UPDATE launches SET source = ? WHERE {match} AND "
                                   "source <> ?", [name, *args, name])
            self.store.con.execute("UPDATE sources SET label = ? WHERE list_contains(?, label)",
                                   [name, old])
            moved += [(label, name) for label in old]
        return moved

    def recent_failures(self, seconds: float) -> list[tuple[str, str, float]]:
        """(source, launch id, when it was written as a wall-clock time) of the launches
        that failed within the last `seconds`, oldest first: a crash loop the daemon goes on
        watching."""
        since = datetime.now() - timedelta(seconds=seconds)  # `updated` is local time
        rows = self.store.query("SELECT source, id, updated FROM launches WHERE outcome = "
                                "'failed' AND updated >= ? ORDER BY updated", [since])
        return [(str(r[0]), str(r[1]), r[2].timestamp()) for r in rows]

    def recent_fatal(self, seconds: float) -> list[tuple[str, str, float]]:
        """(source, root cause, when it was told, wall clock) of the failed launches whose
        page [[notify]] decided within the last `seconds`: what was paged lately."""
        since = datetime.now() - timedelta(seconds=seconds)
        rows = self.store.query(
            "SELECT source, root_cause, max(told) FROM told WHERE told >= ? "
            "GROUP BY source, root_cause", [since])
        return [(str(r[0]), str(r[1]), r[2].timestamp()) for r in rows]

    def record_told(self, launch: str, source: str, root_cause: str | None) -> None:
        """[[notify]] decided the page of a failed launch (sent it, or held it back)."""
        self.store.insert("told", [{"launch_id": launch, "source": source,
                                    "root_cause": root_cause, "told": datetime.now()}],
                          conflict="REPLACE")

    def untold_failures(self, seconds: float) -> list[dict[str, Any]]:
        """The launches that failed within the last `seconds` and that no page was decided
        for (the daemon stopped between recording the failure and paging it), oldest first,
        as the history kept them (alerts.history_page makes their pages)."""
        since = datetime.now() - timedelta(seconds=seconds)
        rows = self.store.query("""
            SELECT l.source, l.id, l.number, r.title, l.root_signature, r.category,
                   (SELECT d.summary FROM diagnoses d WHERE d.incident_id = l.root_cause
                    ORDER BY d.confidence DESC LIMIT 1),
                   l.failed_before, l.exit_code
            FROM launches l LEFT JOIN incidents r ON r.id = l.root_cause
            WHERE l.outcome = 'failed' AND l.updated >= ?
              AND l.id NOT IN (SELECT launch_id FROM told)
            ORDER BY l.seq""", [since])
        keys = ("source", "id", "number", "title", "root_cause", "category", "remedy",
                "failed_before", "exit_code")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def launch_findings(self, launch: str) -> list[tuple[Any, ...]]:
        """The first and last finding of each incident of a launch, in line order:
        (signature, captures JSON, line, time, process, pid, rank, text, incident count)."""
        return self.store.query("""
            SELECT signature, captures, line, time, process, pid, rank, text, count FROM (
                SELECT f.signature, f.captures, f.line, f.time, f.process, f.pid, f.rank,
                       f.text, i.count,
                       row_number() OVER (PARTITION BY i.id ORDER BY f.line) AS first,
                       row_number() OVER (PARTITION BY i.id ORDER BY f.line DESC) AS last
                FROM incidents i JOIN findings f ON f.incident_id = i.id
                WHERE i.launch_id = ?)
            WHERE first = 1 OR last = 1 ORDER BY line""", [launch])

    def seen_problems(self) -> set[str]:
        return {r[0] for r in self.store.query(
            "SELECT DISTINCT problem FROM incidents WHERE problem IS NOT NULL")}

    def checkpoints(self) -> dict[str, Checkpoint]:
        """Committed positions by stream (rows older versions wrote are keyed by the source's
        name: readers look a stream up first, then its source's name)."""
        rows = self.store.query("SELECT source_id, generation, position, line, cursor "
                                "FROM checkpoints WHERE generation IS NOT NULL")
        return {r[0]: Checkpoint(r[0], r[1], int(r[2]), int(r[3]), r[4], r[0]) for r in rows}

    def record_snapshot(self, digest: str, body: dict[str, Any]) -> None:
        self.store.insert("snapshots", [snapshot_row(digest, body, datetime.now())])

    def commit(self, found: Sequence[LiveFinding], checkpoints: Sequence[Checkpoint],
               analyses: Sequence[LaunchAnalysis] = ()) -> int:
        """Write a batch atomically; returns how many findings were new. `analyses`: the
        launches the batch touched, analysed (their findings' snapshot is theirs).

        A batch the history refuses for what a record holds is written without the records
        that fail on their own, each stored as quarantined instead (`last_quarantined`), so
        the positions move past them; any other failure (the store cannot be written) is
        raised, and the whole batch is the caller's to try again."""
        self.last_quarantined = []
        try:
            return self._commit(found, checkpoints, analyses, [])
        except duckdb.Error as exc:
            if not is_content_error(exc):
                raise
            refused_batch = exc
        con = self.store.con
        points = list(checkpoints)
        # the positions alone must go in: if they do not, the store is the problem
        rolled_back(con, lambda: self._write_batch([], points, [], [], datetime.now()))
        bad_found = culprits(list(found), lambda part: rolled_back(
            con, lambda: self._write_batch(part, [], [], [], datetime.now())))
        bad_launches = culprits(list(analyses), lambda part: rolled_back(
            con, lambda: self._write_batch([], [], part, [], datetime.now())))
        if not bad_found and not bad_launches:
            raise refused_batch  # only the batch as a whole fails: tried again as it is
        refused = [Refused(item.finding.source, item.generation, item.finding.lineno,
                           "finding", item.finding.signature.id,
                           evidence_text(item.finding.matched), error)
                   for item, error in bad_found]
        refused += [Refused(a.launch.source, a.launch.generation, a.launch.start_line,
                            "launch", None, f"launch #{a.launch.number}", error)
                    for a, error in bad_launches]
        dropped = {id(item) for item, _ in bad_found} | {id(a) for a, _ in bad_launches}
        written = self._commit([f for f in found if id(f) not in dropped], points,
                               [a for a in analyses if id(a) not in dropped], refused)
        self.last_quarantined = refused
        return written

    def _commit(self, found: Sequence[LiveFinding], checkpoints: Sequence[Checkpoint],
                analyses: Sequence[LaunchAnalysis], refused: Sequence[Refused]) -> int:
        """One transaction: the batch, and the records refused from it as quarantined."""
        now = datetime.now()
        con = self.store.con
        con.execute("BEGIN TRANSACTION")
        try:
            rows, items, digests, inserted, written = self._write_batch(
                found, checkpoints, analyses, refused, now)
            con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):  # a failed COMMIT ended it already
                con.execute("ROLLBACK")
            raise
        new_rows = [r for r in rows if r["id"] in inserted]
        self.last_new = [(r["signature"], r["signature_version"], r["incident_id"],
                          items[r["id"]].finding.signature.fatal) for r in new_rows]
        self._stored.update(digests.values())
        landing = self._landing
        if len(self._known_incidents) + len(landing.incidents) > KNOWN_INCIDENTS_KEPT:
            self._known_incidents.clear()
        self._known_incidents.update(landing.incidents)
        self._sources_written.update(landing.sources)
        for lid, digest in landing.digests.items():
            self._launch_digests.pop(lid, None)
            self._launch_digests[lid] = digest
            self._unhashed.pop(lid, None)
        while len(self._launch_digests) > LAUNCH_DIGESTS_KEPT:
            self._launch_digests.pop(next(iter(self._launch_digests)))
        for lid, ids in landing.unhashed.items():
            if lid not in landing.digests:
                self._unhashed.setdefault(lid, []).extend(ids)
        self.last_launches = written
        return len(inserted)

    def forget_stored(self) -> None:
        """The history lost rows this writer did not delete (a prune): what it knew was
        stored is asked again, or written again."""
        self._stored.clear()
        self._known_incidents.clear()
        self._sources_written.clear()
        self._launch_digests.clear()

    def _write_batch(self, found: Sequence[LiveFinding], checkpoints: Sequence[Checkpoint],
                     analyses: Sequence[LaunchAnalysis], refused: Sequence[Refused],
                     now: datetime) -> tuple[list[dict[str, Any]], dict[str, LiveFinding],
                                             dict[str, str], set[Any], list[LaunchWritten]]:
        """The batch's statements, in the caller's transaction: (finding rows, findings by
        id, snapshot digests by launch, the ids inserted, the launches written)."""
        self._landing = landing = _Landing()
        digests = {launch_id(a.launch): self._digest(a.snapshot) for a in analyses}
        rows: list[dict[str, Any]] = []
        items: dict[str, LiveFinding] = {}  # finding id -> the finding
        for item in found:
            f = item.finding
            incident_id = self.incident_id(item)
            finding_id = _id(item.generation, item.identity or f.lineno, f.signature.id)
            items.setdefault(finding_id, item)
            lid = item.launch or ""
            digest = item.snapshot_hash or digests.get(lid) or self._launch_digests.get(lid)
            if digest is None and item.launch:  # its launch not written yet: it gives it
                landing.unhashed.setdefault(item.launch, []).append(finding_id)
            rows.append({
                "id": finding_id,
                "incident_id": incident_id, "source_id": item.generation, "line": f.lineno,
                "signature": f.signature.id, "signature_version": f.signature.version,
                "library_version": self.library.version,
                "snapshot_hash": digest,
                "time": f.time, "process": f.process, "pid": f.pid, "rank": f.rank,
                "captures": json.dumps(f.captures, sort_keys=True),
                "text": evidence_text(f.matched)})
        # one row per stream: two sources reading the same stream (a path given twice) share
        # it, and one statement may not write a row twice
        latest = {c.key: c for c in checkpoints}
        points = [{"source_id": key, "position": c.offset, "cursor": c.cursor,
                   "fingerprint": c.generation, "updated": now, "generation": c.generation,
                   "line": c.line} for key, c in latest.items()]
        # each stream that gave a finding: the `sources` row its findings' source_id names
        # (the stream's generation), labelled with the source it belongs to
        streams = {item.generation: item.finding.source for item in found}
        clock = time.monotonic()
        streams = {generation: label for generation, label in streams.items()
                   if clock - self._sources_written.get(generation, -SOURCE_REFRESH_SECONDS)
                   >= SOURCE_REFRESH_SECONDS}
        landing.sources = dict.fromkeys(streams, clock)
        sources = [{"id": generation, "kind": label.split(":", 1)[0] if ":" in label
                    else "file", "label": label, "size": None, "first_seen": now,
                    "last_seen": now} for generation, label in streams.items()]
        self.store.upsert("sources", sources, "last_seen = excluded.last_seen")
        inserted = self.store.insert_new("findings", rows)
        # read again after a restart: kept as first written, a snapshot hash they lacked then
        # (their launch was not written before the stop) is given now
        again = [(r["id"], r["snapshot_hash"]) for r in rows
                 if r["id"] not in inserted and r["snapshot_hash"] is not None]
        if again:
            self.store.con.execute(
                "UPDATE findings SET snapshot_hash = v.hash FROM (SELECT unnest(?) AS id, "
                "unnest(?) AS hash) v WHERE findings.id = v.id AND findings.snapshot_hash "
                "IS NULL", [[i for i, _ in again], [h for _, h in again]])
        self._write_positions(points)
        new_rows = [r for r in rows if r["id"] in inserted]
        self.new_incidents = self._aggregate(new_rows, items, digests)
        written = [self._launch(a, digests, now) for a in analyses]
        self.store.insert("quarantined", [r.row(now) for r in refused])
        return rows, items, digests, inserted, written

    def _fold_into(self, row: dict[str, Any]) -> bool:
        """Fold an incident row into the stored one as the upsert in _aggregate does, by an
        UPDATE of that row (DuckDB 2.0: 1.6 ms against 4.4 for the upsert of one row);
        False when no row was there to update (deleted behind the writer)."""
        updated = self.store.con.execute(
            _UPDATE_FOLD, [*(row[c] for c, _ in _FOLD), row["id"]]).fetchone()
        return updated is not None and bool(updated[0])

    def _write_positions(self, points: list[dict[str, Any]]) -> None:
        """The streams' rows in `checkpoints`. A daemon on one source moves one position a
        commit, and its row is there after the first: an UPDATE of it costs DuckDB (2.0) a
        third of what INSERT OR REPLACE does (0.6 against 2.1 ms, the statement that most
        delays a finding's commit); a row not there (the first commit, a prune) is
        inserted."""
        if len(points) != 1 or not self.store.update_row("checkpoints", points[0],
                                                        key="source_id"):
            self.store.insert("checkpoints", points, conflict="REPLACE")

    def _digest(self, snapshot: Snapshot) -> str:
        known = self._digests.get(id(snapshot))
        if known is None:
            if len(self._digests) >= DIGESTS_KEPT:
                self._digests.pop(next(iter(self._digests)))
            known = self._digests[id(snapshot)] = (snapshot, snapshot.content_hash())
        return known[1]

    @staticmethod
    def incident_id(item: LiveFinding) -> str:
        f = item.finding
        return _id(item.launch or item.generation, f.signature.id, "|".join(incident_key(f)))

    def _launch(self, analysis: LaunchAnalysis, digests: dict[str, str],
                now: datetime) -> LaunchWritten:
        """A launch's row, its incidents' root cause flag and its diagnoses, replaced."""
        launch = analysis.launch
        lid = launch_id(launch)
        digest = digests[lid]
        if digest not in self._stored:  # rolled back with the commit? stored again next time
            self.store.insert("snapshots", [snapshot_row(digest, analysis.snapshot.to_dict(),
                                                         now)])
        ids = [_id(lid, i.signature.id, "|".join(i.key)) for i in analysis.incidents]
        root = analysis.root_incident
        root_id = ids[analysis.root] if analysis.root is not None else None
        there, stored, following = self.store.query(LAUNCH_SEQ, [lid])[0]
        seq = int(stored if stored is not None else following)
        failed_before = 0
        if root is not None:
            # launches recorded before this one (never by log time: it can go back)
            failed_before = int(self.store.query(
                "SELECT count(*) FROM launches WHERE root_problem = ? AND id <> ? "
                "AND seq < ?", [root.problem, lid, seq])[0][0])
        row = {"id": lid, "source_id": launch.generation, "source": launch.source,
               "number": launch.number, "start_line": launch.start_line,
               "last_line": launch.last_line, "seen_start": launch.seen_start,
               "started": launch.started, "snapshot_hash": digest,
               "outcome": launch.outcome, "exit_code": launch.exit_code,
               "root_cause": root_id, "root_signature": root.signature.id if root else None,
               "root_problem": root.problem if root else None,
               "fatal_incidents": sum(1 for i in analysis.incidents if i.signature.fatal),
               "failed_before": failed_before, "updated": now, "seq": seq}
        if not there:  # in this transaction
            self.store.insert_fresh("launches", [row])
        elif not self.store.update_row("launches", row):
            self.store.insert("launches", [row], conflict="REPLACE")
        self._landing.digests[lid] = digest
        unhashed = self._unhashed.get(lid)
        if unhashed:  # its findings committed before it
            self.store.con.execute("UPDATE findings SET snapshot_hash = ? WHERE id IN "
                                   "(SELECT unnest(?))", [digest, unhashed])
        self._synthetic_incidents(analysis, ids, lid, digest)
        settled = [[ids[n], i.signature.fatal] for n, i in enumerate(analysis.incidents)
                   if is_generic(i.signature)]  # the fallback's verdict, as the scan records
        if settled:
            self.store.con.executemany("UPDATE incidents SET fatal = ? WHERE id = ?",
                                       [[fatal, iid] for iid, fatal in settled])
        self.store.con.execute("UPDATE incidents SET root_cause = coalesce(id = ?, false), "
                               "snapshot_hash = ? "
                               "WHERE launch_id = ?", [root_id, digest, lid])
        diagnoses = []
        for diag in analysis.diagnoses:
            body = diag.to_dict()
            anchor = ids[diag.incident] if diag.incident is not None else None
            diagnoses.append({
                "id": _id(anchor or lid, diag.cause), "incident_id": anchor,
                "launch_id": lid, "snapshot_hash": digest, "cause": diag.cause,
                "title": diag.title, "summary": diag.summary, "confidence": diag.confidence,
                "body": json.dumps(body, sort_keys=True, default=str), "recorded": now})
        self.store.con.execute("DELETE FROM diagnoses WHERE launch_id = ? AND NOT list_contains"
                               "(?, id)", [lid, [d["id"] for d in diagnoses]])
        self.store.insert("diagnoses", diagnoses, conflict="REPLACE")
        return LaunchWritten(row, diagnoses, analysis)

    def _synthetic_incidents(self, analysis: LaunchAnalysis, ids: list[str], lid: str,
                             digest: str) -> None:
        """Incidents the analysis made without a finding (a `run` child's failure status
        nothing recognised): their rows, so the launch's root cause names a stored one."""
        rows: list[dict[str, Any]] = []
        for index, inc in enumerate(analysis.incidents):
            if inc not in synthetic([inc]):
                continue
            sig = inc.signature
            rows.append({
                "id": ids[index], "scan_id": None, "snapshot_hash": digest,
                "signature": sig.id, "signature_version": sig.version,
                "library_version": self.library.version, "category": sig.category,
                "severity": sig.severity, "fatal": sig.fatal, "root_cause": False,
                "count": inc.count, "first_source": analysis.launch.generation,
                "first_line": inc.first.lineno, "first_time": None,
                "last_line": inc.last.lineno, "last_time": None, "processes": [], "ranks": [],
                "captures": json.dumps(inc.captures, sort_keys=True), "title": sig.title,
                "explanation": sig.explain(inc.captures), "launch_id": lid,
                "problem": inc.problem})
        if rows:
            self.store.insert("incidents", rows, conflict="REPLACE")

    def _aggregate(self, new: list[dict[str, Any]], items: dict[str, LiveFinding],
                   digests: dict[str, str]) -> dict[str, tuple[str, str | None]]:
        """Fold the findings just inserted into their incidents: counts add up, line and time
        ranges widen, processes and ranks merge. Cost grows with the batch, not the history.
        Returns the incidents that are new: id -> (problem, launch id)."""
        groups: dict[str, list[dict[str, Any]]] = {}
        for row in new:
            groups.setdefault(row["incident_id"], []).append(row)
        out = []
        for incident_id, members in groups.items():
            item = items[members[0]["id"]]
            f, sig = item.finding, item.finding.signature
            times = [m["time"] for m in members if m["time"] is not None]
            out.append({
                "id": incident_id, "scan_id": None,
                "snapshot_hash": item.snapshot_hash or digests.get(item.launch or ""),
                "signature": sig.id,
                "signature_version": sig.version, "library_version": self.library.version,
                "category": sig.category, "severity": sig.severity, "fatal": sig.fatal,
                "root_cause": False, "count": sum(1 for m in members if not items[m["id"]].copy),
                "first_source": members[0]["source_id"],
                "first_line": min(m["line"] for m in members),
                "first_time": min(times, default=None),
                "last_line": max(m["line"] for m in members),
                "last_time": max(times, default=None),
                "processes": sorted({m["process"] for m in members if m["process"]}),
                "ranks": sorted({m["rank"] for m in members if m["rank"]}),
                "captures": json.dumps(f.captures, sort_keys=True), "title": sig.title,
                "explanation": sig.explain(f.captures), "launch_id": item.launch,
                "problem": problem_key(sig.id, incident_key(f))})
        if not out:
            return {}
        asked = [r["id"] for r in out if r["id"] not in self._known_incidents]
        known = {r[0] for r in self.store.query(
            "SELECT id FROM incidents WHERE list_contains(?, id)", [asked])} if asked else set()
        known.update(r["id"] for r in out if r["id"] in self._known_incidents)
        self._landing.incidents.extend(r["id"] for r in out)
        # new ones (not there in this transaction) inserted as they are; a few stored ones
        # folded in by an UPDATE each, more in one upsert
        self.store.insert_fresh("incidents", [r for r in out if r["id"] not in known])
        rest = [r for r in out if r["id"] in known]
        if len(rest) <= FOLDED_ONE_BY_ONE:
            rest = [r for r in rest if not self._fold_into(r)]
        self.store.upsert("incidents", rest, _UPSERT_FOLD)
        return {r["id"]: (r["problem"], r["launch_id"]) for r in out if r["id"] not in known}
