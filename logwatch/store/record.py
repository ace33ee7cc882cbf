"""Record a scan in the history: sources, snapshots, incidents, findings, diagnoses.

Ids are derived from content (a source is the hash of its first 4 KiB; a finding is its
source, line and signature), so recording the same log twice adds nothing, and a log that
grew since adds only its new lines' findings.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import pickle
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from logwatch.core.launches.incidents import incident_key, problem_key
from logwatch.core.signatures.findings import Finding, evidence_text
from logwatch.store.errors import DatabaseError

if TYPE_CHECKING:  # DuckDB loads when the scan is written, not while it runs
    from logwatch.store.db import Store

FINGERPRINT_BYTES = 4096  # the start of a log (pids, timestamps) names it; growth keeps it


def _id(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:24]


@dataclass(slots=True)
class _Source:
    id: str
    kind: str
    label: str
    size: int | None
    scanned: int = 0


# Findings travel in batches of this many rows: held in memory, spooled to a temporary file,
# and read back; so memory does not grow with a log's number of findings.
RECORD_BATCH = 2_000
# ...and go into DuckDB this many rows to an INSERT: each column travels as one list
# parameter, which DuckDB converts value by value, so a statement's memory grows with its
# rows (measured with scan_settings, 52,000 findings: +59 MiB at 10,000 rows a statement,
# +34 MiB at 1,000 or 2,000, in the same time).
INSERT_ROWS = 2_000


class _FindingRow(NamedTuple):
    """What a finding contributes to its row, before its incident and snapshot are known."""
    source_label: str
    source_id: str
    line: int
    signature: str
    signature_version: int
    time: datetime | None
    process: str | None
    pid: int | None
    rank: str | None
    captures: str
    text: str
    key: str
    launch_line: int  # where its launch started in the source


@dataclass(slots=True)
class ScanRecorder:
    """Collects what a scan saw; `write` stores it in one transaction. Findings are held a
    batch at a time: full batches go to an anonymous temporary file (zlib-compressed)."""

    batch_size: int = RECORD_BATCH
    sources: dict[str, _Source] = field(default_factory=dict)  # by label
    snapshot_at: Callable[[str, int], str | None] = field(default=lambda source, line: None)
    spooled: int = 0  # batches written to the spool file
    _held: list[_FindingRow] = field(default_factory=list)
    _spool: IO[bytes] | None = None
    _count: int = 0

    def source(self, label: str, head: bytes, size: int | None, kind: str = "file") -> None:
        """`kind`: file, pipe or stdin."""
        digest = hashlib.sha256(head[:FINGERPRINT_BYTES]).hexdigest()[:24]
        self.sources[label] = _Source(digest, kind, label, size)

    def scanned(self, label: str, position: int) -> None:
        self.sources[label].scanned = position

    def finding(self, f: Finding, launch_line: int) -> None:
        """`launch_line`: the line its launch started at (launches.Launch.start_line)."""
        source = self.sources[f.source]
        self._held.append(_FindingRow(
            f.source, source.id, f.lineno, f.signature.id, f.signature.version, f.time,
            f.process, f.pid, f.rank, json.dumps(f.captures, sort_keys=True),
            evidence_text(f.matched), "|".join(incident_key(f)), launch_line))
        self._count += 1
        if len(self._held) >= self.batch_size:
            self._spill()

    @property
    def findings(self) -> int:
        """Findings collected (spooled and held) and not written or dropped yet."""
        return self._count

    @property
    def held(self) -> int:
        """Findings held in memory now (never more than a batch)."""
        return len(self._held)

    def _spill(self) -> None:
        # the spool is this process's own unlinked file: pickle reads back only what it wrote
        data = zlib.compress(pickle.dumps(self._held, protocol=pickle.HIGHEST_PROTOCOL), 1)
        try:
            if self._spool is None:
                # open across calls until write() or close(); unlinked already, gone at exit
                self._spool = tempfile.TemporaryFile(prefix="logwatch-scan-")  # noqa: SIM115
            self._spool.write(len(data).to_bytes(8, "little") + data)
        except OSError as exc:  # not the input's fault: say where the spool is
            raise DatabaseError(f"cannot hold the findings to record in a temporary file in "
                                f"{tempfile.gettempdir()} ({exc.strerror or exc}); set TMPDIR "
                                "to a directory with space") from exc
        self.spooled += 1
        self._held = []

    def _batches(self) -> Iterator[list[_FindingRow]]:
        """Every finding, a batch at a time, in the order they were seen."""
        if self._spool is not None:
            self._spool.seek(0)
            while size := int.from_bytes(self._spool.read(8), "little"):
                yield pickle.loads(zlib.decompress(self._spool.read(size)))
        if self._held:
            yield self._held

    def close(self) -> None:
        """Drop the findings held and spooled (written already, or not wanted any more)."""
        self._held = []
        self._count = 0
        if self._spool is not None:
            self._spool.close()
            self._spool = None

    def write(self, store: Store, report: dict[str, Any]) -> dict[str, int]:
        """Store everything; returns how many new rows each table gained. A DuckDB error
        (a damaged file, a full disk) rolls it all back and raises DatabaseError. One that
        ran out of the connection's memory limit (scan_settings, an estimate) is tried once
        more without the limit: a scan is recorded at the cost of memory, never lost to it."""
        import duckdb

        from logwatch.store.db import database_error

        try:
            try:
                return self._write(store, report)
            except duckdb.Error as exc:
                if not out_of_memory(exc) or "memory_limit" not in (store.config or {}):
                    raise
            store.con.execute("RESET memory_limit")
            return self._write(store, report)
        except duckdb.Error as exc:
            raise database_error(store.path, exc, "recording the scan") from exc
        finally:
            self.close()

    def _write(self, store: Store, report: dict[str, Any]) -> dict[str, int]:
        """One transaction. The report's incidents and diagnoses are read once, in order, and
        inserted a few thousand rows at a time (a spooled report's are EncodedJson text, read
        back from disk: a backlog's are never all in memory); of each incident only what
        its launch's and its diagnoses' rows name is kept."""
        import duckdb

        now = datetime.now()
        library = report["library_version"]
        scan_id = _id(now.isoformat(), *sorted(s.id for s in self.sources.values()))
        launches = report.get("launches", [])
        launch_ids = [_id(self.sources[entry["source"]].id, entry["start_line"])
                      for entry in launches]
        # each incident: (id, signature, problem, snapshot)
        incidents: list[tuple[str, str, str, str | None]] = []

        def incident_rows() -> Iterator[dict[str, Any]]:
            for index, item in enumerate(report["incidents"]):
                inc = json.loads(item) if isinstance(item, str) else item
                first = inc["first_seen"]
                launch = launches[inc["launch"]]
                key = "|".join(inc["key"])
                incident_id = _id(launch_ids[inc["launch"]], inc["signature"], key)
                problem = problem_key(inc["signature"], inc["key"])
                incidents.append((incident_id, inc["signature"], problem, inc.get("snapshot")))
                yield {
                    "id": incident_id, "scan_id": scan_id, "snapshot_hash": inc.get("snapshot"),
                    "signature": inc["signature"],
                    "signature_version": inc["signature_version"],
                    "library_version": library, "category": inc["category"],
                    "severity": inc["severity"], "fatal": inc["fatal"],
                    "root_cause": index == launch["root_cause"], "count": inc["count"],
                    "first_source": self.sources[first["source"]].id,
                    "first_line": first["line"], "first_time": _time(first["time"]),
                    "last_line": inc["last_seen"]["line"],
                    "last_time": _time(inc["last_seen"]["time"]),
                    "processes": inc["processes"], "ranks": inc["ranks"],
                    "captures": json.dumps(inc["captures"], sort_keys=True),
                    "title": inc["title"], "explanation": inc["explanation"],
                    "launch_id": launch_ids[inc["launch"]], "problem": problem}

        def launch_rows() -> list[dict[str, Any]]:
            rows = []
            for launch_id, entry in zip(launch_ids, launches, strict=True):
                root = entry["root_cause"]
                root_id, root_signature, root_problem, _ = (
                    incidents[root] if root is not None else (None, None, None, None))
                rows.append({
                    "id": launch_id, "source_id": self.sources[entry["source"]].id,
                    "source": entry["source"], "number": entry["number"],
                    "start_line": entry["start_line"], "last_line": entry["last_line"],
                    "seen_start": entry["seen_start"], "started": _time(entry["started"]),
                    "snapshot_hash": entry["snapshot"], "outcome": entry["outcome"],
                    "exit_code": entry["exit_code"], "root_cause": root_id,
                    "root_signature": root_signature, "root_problem": root_problem,
                    "fatal_incidents": entry["fatal_incidents"],
                    "failed_before": entry["failed_before"], "updated": now})
            return rows

        def diagnosis_rows() -> Iterator[dict[str, Any]]:
            for item in report.get("diagnoses", []):
                diag = json.loads(item) if isinstance(item, str) else item
                index = diag.get("incident")
                incident = incidents[index] if index is not None else None
                anchor = incident[0] if incident else None
                launch = diag.get("launch")
                launch_id = launch_ids[launch] if launch is not None else None
                yield {
                    "id": _id(anchor or launch_id or json.dumps(diag["config"],
                                                                 sort_keys=True),
                              diag["cause"]),
                    "incident_id": anchor, "launch_id": launch_id,
                    "snapshot_hash": incident[3] if incident else (
                        launches[launch]["snapshot"] if launch is not None else None),
                    "cause": diag["cause"], "title": diag["title"], "summary": diag["summary"],
                    "confidence": diag["confidence"], "body": json.dumps(diag, sort_keys=True),
                    "recorded": now}

        source_rows = [{"id": s.id, "kind": s.kind, "label": s.label, "size": s.size,
                        "first_seen": now, "last_seen": now} for s in self.sources.values()]
        checkpoint_rows = [{"source_id": s.id, "position": s.scanned, "cursor": None,
                            "fingerprint": s.id, "updated": now} for s in self.sources.values()]
        stats = {**report["stats"], "incomplete": report.get("incomplete", [])}
        before = _counts(store)
        store.con.execute("BEGIN TRANSACTION")
        try:
            store.insert("sources", source_rows)
            store.con.execute("UPDATE sources SET last_seen = ? WHERE id IN (SELECT unnest(?))",
                              [now, [s.id for s in self.sources.values()]])
            store.insert("checkpoints", checkpoint_rows, conflict="REPLACE")
            store.insert("scans", [{"id": scan_id, "started": now, "library_version": library,
                                    "inputs": [s.label for s in self.sources.values()],
                                    "stats": json.dumps(stats, default=str)}])
            for chunk in _chunks(incident_rows()):
                store.insert("incidents", chunk, conflict="REPLACE")
            known = {incident[0] for incident in incidents}
            rows = launch_rows()
            _sequence(store, rows)
            for chunk in _chunks(iter(rows)):
                store.insert("launches", chunk, conflict="REPLACE")
            del rows
            for batch in self._batches():
                for start in range(0, len(batch), INSERT_ROWS):
                    store.insert("findings", [self._finding_row(f, known, library)
                                              for f in batch[start:start + INSERT_ROWS]])
            # after the findings: snapshot_at adds the snapshot of each finding it resolves
            store.insert("snapshots", [snapshot_row(digest, body, now) for digest, body
                                       in report.get("snapshots", {}).items()])
            for chunk in _chunks(diagnosis_rows()):
                store.insert("diagnoses", chunk, conflict="REPLACE")
            store.con.execute("COMMIT")
        except BaseException:
            # on a damaged file the rollback may fail too; the first error is the one to report
            with contextlib.suppress(duckdb.Error):
                store.con.execute("ROLLBACK")
            raise
        after = _counts(store)
        return {table: after[table] - before[table] for table in after}

    def _finding_row(self, f: _FindingRow, incidents: set[str],
                     library: str) -> dict[str, Any]:
        """The finding's row; its incident the one of its launch with its signature and key,
        where the report has it."""
        incident = _id(_id(f.source_id, f.launch_line), f.signature, f.key)
        return {"id": _id(f.source_id, f.line, f.signature),
                "incident_id": incident if incident in incidents else None,
                "source_id": f.source_id, "line": f.line, "signature": f.signature,
                "signature_version": f.signature_version, "library_version": library,
                "snapshot_hash": self.snapshot_at(f.source_label, f.line), "time": f.time,
                "process": f.process, "pid": f.pid, "rank": f.rank, "captures": f.captures,
                "text": f.text}


def _chunks(rows: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Rows INSERT_ROWS at a time."""
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= INSERT_ROWS:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def out_of_memory(exc: BaseException) -> bool:
    """DuckDB ran out of its memory limit: in a statement, or in the commit (which reports it
    as a failed commit)."""
    import duckdb

    text = str(exc).lower()
    return isinstance(exc, duckdb.OutOfMemoryException) or (
        isinstance(exc, duckdb.TransactionException) and "could not allocate" in text)


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _counts(store: Store) -> dict[str, int]:
    tables = ("sources", "snapshots", "launches", "incidents", "findings", "diagnoses")
    return {t: int(store.query(f"SELECT count(*) FROM {t}")[0][0]) for t in tables}


def snapshot_row(digest: str, body: dict[str, Any], now: datetime) -> dict[str, Any]:
    model = body.get("model") or {}
    quant = model.get("quant") or {}
    mtp = model.get("mtp") or {}
    launch = body.get("launch") or {}
    spec = launch.get("speculative_config") or {}
    method = str(spec.get("method", "")).lower() if isinstance(spec, dict) else ""
    tp = launch.get("tensor_parallel_size")
    return {"hash": digest, "first_recorded": now,
            "model": model.get("path") or launch.get("model"),
            "quant_method": quant.get("method") or launch.get("quantization"),
            "quant_scheme": quant.get("scheme"),
            "tensor_parallel_size": _integer(tp),
            "uses_mtp": method == "mtp" or method.endswith("_mtp"),
            "mtp_covered": mtp.get("covered") if mtp else None,
            "gpu_name": (body.get("gpu") or {}).get("name"),
            "gpu_capability": _integer((body.get("gpu") or {}).get("capability")),
            "vllm_version": body.get("vllm_version"),
            "body": json.dumps(body, sort_keys=True, default=str)}


def _integer(value: Any) -> int | None:
    """A value for an INTEGER column: an int it holds, else None (a snapshot keeps what was
    read whole in its body)."""
    return value if isinstance(value, int) and -(1 << 31) <= value < (1 << 31) else None


def _sequence(store: Store, launch_rows: list[dict[str, Any]]) -> None:
    """Each launch's `seq` (schema 6): the one it had, else the next, in start order."""
    known = dict(store.query("SELECT id, seq FROM launches WHERE list_contains(?, id)",
                             [[row["id"] for row in launch_rows]]))
    last = int(store.query("SELECT coalesce(max(seq), 0) FROM launches")[0][0])
    for row in sorted(launch_rows, key=lambda r: r["number"]):
        if known.get(row["id"]) is None:
            last += 1
        row["seq"] = known.get(row["id"]) or last
