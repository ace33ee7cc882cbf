"""The daemon's writes: findings and the checkpoints that produced them, in one transaction.

A finding's id is (generation, line, signature): replaying lines after a crash inserts nothing
twice; the checkpoint is committed with the findings, so nothing read is ever skipped either.
Incidents are folded forward from the findings a batch actually inserted (a replay adds
nothing to their counts).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

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
        # the last commit's new findings: (signature, version, incident id, fatal)
        self.last_new: list[tuple[str, int, str, bool]] = []

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
        items: dict[str, LiveFinding] = {}  # finding id -> the finding
        for item in found:
            f = item.finding
            incident_id = _id(item.generation, f.signature.id, "|".join(incident_key(f)))
            finding_id = _id(item.generation, item.identity or f.lineno, f.signature.id)
            items.setdefault(finding_id, item)
            rows.append({
                "id": finding_id,
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
        con.execute("BEGIN TRANSACTION")
        try:
            inserted = self.store.insert_new("findings", rows)
            self.store.insert("checkpoints", points, conflict="REPLACE")
            self._aggregate([r for r in rows if r["id"] in inserted], items)
            con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):  # a failed COMMIT ended it already
                con.execute("ROLLBACK")
            raise
        self.last_new = [(r["signature"], r["signature_version"], r["incident_id"],
                          items[r["id"]].finding.signature.fatal)
                         for r in rows if r["id"] in inserted]
        return len(inserted)

    def _aggregate(self, new: list[dict[str, Any]], items: dict[str, LiveFinding]) -> None:
        """Fold the findings just inserted into their incidents: counts add up, line and time
        ranges widen, processes and ranks merge. Cost grows with the batch, not the history."""
        groups: dict[str, list[dict[str, Any]]] = {}
        for row in new:
            groups.setdefault(row["incident_id"], []).append(row)
        out = []
        for incident_id, members in groups.items():
            item = items[members[0]["id"]]
            f, sig = item.finding, item.finding.signature
            times = [m["time"] for m in members if m["time"] is not None]
            out.append({
                "id": incident_id, "scan_id": None, "snapshot_hash": item.snapshot_hash,
                "signature": sig.id,
                "signature_version": sig.version, "library_version": self.library.version,
                "category": sig.category, "severity": sig.severity, "fatal": sig.fatal,
                "root_cause": False, "count": len(members),
                "first_source": members[0]["source_id"],
                "first_line": min(m["line"] for m in members),
                "first_time": min(times, default=None),
                "last_line": max(m["line"] for m in members),
                "last_time": max(times, default=None),
                "processes": sorted({m["process"] for m in members if m["process"]}),
                "ranks": sorted({m["rank"] for m in members if m["rank"]}),
                "captures": json.dumps(f.captures, sort_keys=True), "title": sig.title,
                "explanation": sig.explain(f.captures)})
        merged = ", ".join(f"{c} = list_sort(list_distinct(list_concat(incidents.{c}, "
                           f"excluded.{c})))" for c in ("processes", "ranks"))
        self.store.upsert("incidents", out,
                          "count = incidents.count + excluded.count, "
                          "first_line = least(incidents.first_line, excluded.first_line), "
                          "last_line = greatest(incidents.last_line, excluded.last_line), "
                          "first_time = least(incidents.first_time, excluded.first_time), "
                          "last_time = greatest(incidents.last_time, excluded.last_time), "
                          f"library_version = excluded.library_version, {merged}")
