"""The history as Parquet for a fleet: launches, incidents, diagnoses, actions (with their
moves) and snapshots, each a directory partitioned by host and day (`TABLE/host=H/day=D/`),
so the exports of many hosts copied side by side are one dataset for DuckDB itself, Trino or
Spark. Idempotent: a day's partition of a host is written whole, under a fixed file name,
each time it is exported; `since` limits an export to the days from then on (incremental).

The history is opened read-only; nothing read from a log reaches the SQL text (the host name
is checked to be a plain name, the directory is the operator's, quoted)."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from logwatch.store.db import DatabaseError, connect

# table -> the time that decides its day
TABLES = {"launches": "started", "incidents": "first_time", "diagnoses": "recorded",
          "actions": "created", "action_transitions": "time", "snapshots": "first_recorded"}
HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


@dataclass(frozen=True, slots=True)
class Exported:
    table: str
    rows: int


def default_host() -> str:
    return socket.gethostname().split(".")[0] or "localhost"


def export_parquet(db: Path, out: Path, host: str, since: date | None = None
                   ) -> list[Exported]:
    """Write each table's rows under `out/TABLE/host=HOST/day=DAY/`; what was written."""
    if not HOST.fullmatch(host):
        raise ValueError(f"host {host!r}: letters, digits, '.', '_' and '-' only")
    if not db.exists():
        raise DatabaseError(f"{db}: no database yet (record one with `logwatch scan --db`)")
    out.mkdir(parents=True, exist_ok=True)
    con = connect(db, read_only=True)
    try:
        done = []
        for table, when in TABLES.items():
            day = f"coalesce(CAST({when} AS DATE), DATE '1970-01-01')"
            where = f"WHERE {day} >= DATE '{since.isoformat()}'" if since else ""
            rows = con.execute(f"SELECT count(*) FROM {table} {where}").fetchone()
            count = int(rows[0]) if rows else 0
            if count:
                target = str(out / table).replace("'", "''")
                con.execute(
                    f"COPY (SELECT *, '{host}' AS host, {day} AS day FROM {table} {where}) "
                    f"TO '{target}' (FORMAT parquet, PARTITION_BY (host, day), "
                    "OVERWRITE_OR_IGNORE true, FILENAME_PATTERN 'part_{i}')")
            done.append(Exported(table, count))
        return done
    finally:
        con.close()
