"""The daemon's writes: findings and the checkpoints that produced them, in one transaction.

A finding's id is (generation, line, signature): replaying lines after a crash inserts nothing
twice; the checkpoint is committed with the findings, so nothing read is ever skipped either.
Incidents are re-aggregated from their findings for every incident a batch touched.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from logwatch.core.findings import Finding, evidence_text
from logwatch.core.incidents import incident_key
from logwatch.core.library import Library
from logwatch.store.db import Store


def _id(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    source: str  # the configured source name
    generation: str
    offset: int
    line: int
    cursor: str | None = None  # journald: the last whole entry before `offset`


@dataclass(frozen=True, slots=True)
class LiveFinding:
    finding: Finding
    generation: str
    identity: str | None = None  # journald: "cursor#line-in-entry", stable across re-reads
    snapshot_hash: str | None = None  # the configuration in force (known for `logwatch run`)


class LiveWriter:
    def __init__(self, store: Store, library: Library) -> None:
        self.store = store
        self.library = library

    def checkpoints(self) -> dict[str, Checkpoint]:
        rows = self.store.query("SELECT source_id, generation, position, line, cursor "
                                "FROM checkpoints WHERE generation IS NOT NULL")
        return {r[0]: Checkpoint(r[0], r[1], int(r[2]), int(r[3]), r[4]) for r in rows}

    def record_snapshot(self, digest: str, body: dict[str, Any]) -> None:
        from logwatch.store.record import snapshot_row

        self.store.insert("snapshots", [snapshot_row(digest, body, datetime.now())])

    def commit(self, found: Sequence[LiveFinding], checkpoints: Sequence[Checkpoint]) -> int:
        """Write a batch atomically; returns how many findings were new."""
        now = datetime.now()
        rows: list[dict[str, Any]] = []
        incidents: dict[str, LiveFinding] = {}
        for item in found:
            f = item.finding
            incident_id = _id(item.generation, f.signature.id, "|".join(incident_key(f)))
            incidents.setdefault(incident_id, item)
            rows.append({
                "id": _id(item.generation, item.identity or f.lineno, f.signature.id),
                "incident_id": incident_id, "source_id": item.generation, "line": f.lineno,
                "signature": f.signature.id, "signature_version": f.signature.version,
                "library_version": self.library.version, "snapshot_hash": item.snapshot_hash,
                "time": f.time, "process": f.process, "pid": f.pid, "rank": f.rank,
                "captures": json.dumps(f.captures, sort_keys=True),
                "text": evidence_text(f.matched)})
        points = [{"source_id": c.source, "position": c.offset, "cursor": c.cursor,
                   "fingerprint": c.generation, "updated": now, "generation": c.generation,
                   "line": c.line} for c in checkpoints]
        con = self.store.con
        before = int(self.store.query("SELECT count(*) FROM findings")[0][0])
        con.execute("BEGIN TRANSACTION")
        try:
            self.store.insert("findings", rows)
            self.store.insert("checkpoints", points, conflict="REPLACE")
            if incidents:
                self._aggregate(incidents)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return int(self.store.query("SELECT count(*) FROM findings")[0][0]) - before

    def _aggregate(self, incidents: dict[str, LiveFinding]) -> None:
        stats = self.store.query(
            "SELECT incident_id, count(*), min(line), max(line), min(time), max(time), "
            "list(DISTINCT process) FILTER (WHERE process IS NOT NULL), "
            "list(DISTINCT rank) FILTER (WHERE rank IS NOT NULL), any_value(source_id) "
            "FROM findings WHERE incident_id IN (SELECT unnest(?)) GROUP BY incident_id",
            [list(incidents)])
        rows = []
        for incident_id, count, first, last, first_t, last_t, procs, ranks, source in stats:
            item = incidents[incident_id]
            f, sig = item.finding, item.finding.signature
            rows.append({
                "id": incident_id, "scan_id": None, "snapshot_hash": item.snapshot_hash,
                "signature": sig.id,
                "signature_version": sig.version, "library_version": self.library.version,
                "category": sig.category, "severity": sig.severity, "fatal": sig.fatal,
                "root_cause": False, "count": int(count), "first_source": source,
                "first_line": first, "first_time": first_t, "last_line": last,
                "last_time": last_t, "processes": sorted(procs or []),
                "ranks": sorted(ranks or []),
                "captures": json.dumps(f.captures, sort_keys=True), "title": sig.title,
                "explanation": sig.explain(f.captures)})
        self.store.insert("incidents", rows, conflict="REPLACE")
