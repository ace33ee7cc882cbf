"""The history as Parquet for a fleet: launches, incidents, diagnoses, actions (with their
moves) and snapshots, each a directory partitioned by host and day (`TABLE/host=H/day=D/`),
so the exports of many hosts copied side by side are one dataset for DuckDB itself, Trino or
Spark. Idempotent: a day's partition of a host is written whole, under a fixed file name,
each time it is exported; `since` limits an export to the days from then on (incremental).

The history is opened read-only; nothing read from a log reaches the SQL text (the host name
is checked to be a plain name, the directory is the operator's, quoted). The directory must
be one nobody else can write or link (`writable_only_by_us`): it is refused otherwise."""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from logwatch.core.settings.config import valid_host
from logwatch.store.db import DatabaseError, connect

# table -> the time that decides its day
TABLES = {"launches": "started", "incidents": "first_time", "diagnoses": "recorded",
          "actions": "created", "action_transitions": "time", "snapshots": "first_recorded"}


@dataclass(frozen=True, slots=True)
class Exported:
    table: str
    rows: int


def default_host() -> str:
    return socket.gethostname().split(".")[0] or "localhost"


# the oldest day (as each table's day is written) of a row that changed after $1: a launch
# updated since (its incidents and diagnoses with it), an action updated since
_CHANGED = """SELECT min(day) FROM (
    SELECT {launch} AS day FROM launches WHERE updated >= $1
    UNION ALL SELECT {incident} FROM incidents
        WHERE launch_id IN (SELECT id FROM launches WHERE updated >= $1)
    UNION ALL SELECT {diagnosis} FROM diagnoses
        WHERE launch_id IN (SELECT id FROM launches WHERE updated >= $1)
    UNION ALL SELECT {action} FROM actions WHERE updated >= $1)"""


def _day(when: str) -> str:
    return f"coalesce(CAST({when} AS DATE), DATE '1970-01-01')"


def writable_only_by_us(out: Path) -> None:
    """Refuse (UnsafePath) an export directory someone else could control: DuckDB writes
    its files by name, following links, so a directory in a world-writable place that
    another user made, or a link they put there, would take root's Parquet wherever they
    chose. Every directory on the path must be ours or root's and writable by nobody else (a
    sticky /tmp above it is fine), the directory itself no link."""
    from logwatch.host.trusted_dirs import check_directory

    check_directory(out, label="export directory")


def export_parquet(db: Path, out: Path, host: str, since: date | None = None,
                   changed_after: datetime | None = None) -> list[Exported]:
    """Write each table's rows under `out/TABLE/host=HOST/day=DAY/`; what was written.
    `changed_after` (with `since`): the days of rows changed after it are written too (a
    launch that started days ago and failed now)."""
    if not valid_host(host):
        raise ValueError(f"host {host!r}: letters, digits, '.', '_' and '-' only")
    if not db.exists():
        raise DatabaseError(f"{db}: no database yet (record one with `logwatch scan --db`)")
    con = connect(db, read_only=True)
    try:
        out.mkdir(parents=True, exist_ok=True)  # once the history could be opened
        writable_only_by_us(out)
        if since is not None and changed_after is not None:
            row = con.execute(_CHANGED.format(  # each table's day, as TABLES decides it
                launch=_day(TABLES["launches"]), incident=_day(TABLES["incidents"]),
                diagnosis=_day(TABLES["diagnoses"]), action=_day(TABLES["actions"])),
                [changed_after]).fetchone()
            if row and row[0] is not None and row[0] < since:
                since = row[0]
        done = []
        for table, when in TABLES.items():
            day = _day(when)
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


# copies a file in a process of its own (see copy_for_export), into a file it creates: never
# through a link or over a file someone else put at the copy's path
_COPY = ("import os, shutil, sys; fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | "
         "os.O_EXCL | os.O_NOFOLLOW, 0o600); src = open(sys.argv[1], 'rb'); "
         "shutil.copyfileobj(src, os.fdopen(fd, 'wb'), 1 << 20)")


def copy_for_export(store: Any, scratch: Path) -> None:
    """A consistent copy of a history the caller holds (the daemon, between its commits,
    under its writes lock): checkpointed, so the file alone is the whole history, then
    copied. The copy is then exported with no lock held, by a connection of its own (the
    daemon's own connection may not write files: enable_external_access is off).

    The copy is made by a child process: DuckDB's lock on the file is a POSIX record lock,
    which the kernel drops when the process that holds it closes *any* descriptor of the
    file; a copy made here released it, and another process could then open the history
    while the daemon wrote it (seen: `logwatch export` read it after the first export)."""
    store.con.execute("CHECKPOINT")
    scratch.unlink(missing_ok=True)  # a copy left by a crash, or a link someone put there
    try:
        done = subprocess.run([sys.executable, "-c", _COPY, str(store.path), str(scratch)],
                              capture_output=True, text=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        scratch.unlink(missing_ok=True)
        raise
    if done.returncode != 0:  # a full disk: the part copied goes, the history needs the room
        scratch.unlink(missing_ok=True)
        raise OSError(f"copying {store.path} for the export: "
                      f"{done.stderr.strip().splitlines()[-1:] or done.returncode}")


def export_copy(scratch: Path, out: Path, host: str, since: date | None,
                changed_after: datetime | None = None) -> list[Exported]:
    """`export_parquet` of a copy made by `copy_for_export`, which is removed after."""
    try:
        return export_parquet(scratch, out, host, since, changed_after)
    finally:
        for leftover in (scratch, scratch.with_name(scratch.name + ".wal")):
            leftover.unlink(missing_ok=True)
