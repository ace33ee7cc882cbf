"""Open, migrate and write the DuckDB history (operator SQL: store/operator_sql.py).

DuckDB lets one process hold the file: the daemon owns it; the CLI opens it only when no
daemon runs. Writes are bulk (`INSERT ... SELECT unnest(?)...`), never row by row.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from shlex import quote
from typing import Any

import duckdb

from logwatch.paths import DB_FILENAME as DB_FILENAME  # re-exported
from logwatch.paths import default_db_path as default_db_path  # re-exported
from logwatch.store.errors import DatabaseError as DatabaseError  # re-exported
from logwatch.store.errors import DatabaseInUse
from logwatch.store.schema import MIGRATIONS, SCHEMA_VERSION, VIEWS

# what DuckDB says of a file whose bytes are not what it wrote (a checksum, the header)
DAMAGE_MARKERS = ("corrupt database file", "not a valid duckdb database")


def is_damage(exc: BaseException) -> bool:
    return any(marker in str(exc).lower() for marker in DAMAGE_MARKERS)


def damaged(path: str | Path | None, exc: BaseException) -> DatabaseError:
    """The operator's way out of a damaged file: move it aside, and a new history starts."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if path is None:
        return DatabaseError(f"the database file is damaged ({detail}); move it aside and "
                             "restart logwatch to start a new history")
    return DatabaseError(
        f"{path}: the database file is damaged and logwatch cannot use it (DuckDB: {detail}). "
        f"logwatch leaves it as it is: move it aside (mv {quote(str(path))} "
        f"{quote(str(path) + '.damaged')}) and run again "
        "to start a new history there; keep the old file to recover what it held.")


def database_error(path: str | Path | None, exc: BaseException, doing: str) -> DatabaseError:
    """A DuckDB error as an operator reads it: the file, what was being done, what to do."""
    if is_damage(exc):
        return damaged(path, exc)
    return DatabaseError(f"{path or 'the database'}: {doing} failed: {exc}")


class Store:
    """A read-write connection with the schema at the current version."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path,
                 config: dict[str, Any] | None = None) -> None:
        self.con = con
        self.path = path
        self.config = config
        self._lock = threading.Lock()
        self._readers: set[duckdb.DuckDBPyConnection] = set()  # handed out, not closed yet
        self._stopping = False
        self.left_open = False  # closed with a query still running (see close)

    @contextlib.contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection of its own for a query from another thread (socket clients)."""
        with self._lock:
            if self._stopping:
                raise DatabaseError("logwatch is shutting down: no more queries")
            cursor = self.con.cursor()
            self._readers.add(cursor)
        try:
            yield cursor
        finally:
            with self._lock:
                self._readers.discard(cursor)
            cursor.close()

    @property
    def readers(self) -> int:
        """Readers handed out and not closed yet."""
        return len(self._readers)

    def interrupt_readers(self, wait: float = 2.0) -> int:
        """Stop every query running on a reader, and refuse new ones (shutting down); how
        many readers there were. An interrupt only reaches a query already running, so it is
        repeated until the readers are closed or `wait` seconds have passed."""
        with self._lock:
            self._stopping = True
            count = len(self._readers)
        deadline = time.monotonic() + wait
        while True:
            with self._lock:
                readers = list(self._readers)
            if not readers or time.monotonic() >= deadline:
                return count
            for cursor in readers:
                with contextlib.suppress(duckdb.Error):
                    cursor.interrupt()
            time.sleep(0.02)

    def recycle(self) -> bool:
        """Close and reopen the connection, unless a reader is using it. DuckDB keeps about
        250 bytes per small commit that only closing the connection gives back (measured:
        40,000 commits, +25 MiB resident, back to the start after a reopen), so a process
        that commits for months reopens now and then. Call between transactions."""
        with self._lock:
            if self._readers:
                return False
            self.con.close()
            self.con = connect(self.path, read_only=False, config=self.config)
            return True

    def close(self) -> None:
        """Close the connection, unless a query still runs on a reader that no interrupt
        could stop: then it is left to the end of the process (`left_open`), which must not
        wait for it (see cli/daemon_command.leave_now)."""
        with self._lock:
            if self._readers:
                self.left_open = True
                return
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]],
               conflict: str = "IGNORE") -> int:
        """Bulk insert (`OR IGNORE` keeps the first copy, `OR REPLACE` the newest); returns
        how many rows went in (those `OR IGNORE` skipped are not counted)."""
        if not rows:
            return 0
        result = self._bulk(f"INSERT OR {conflict} INTO {table}", rows).fetchone()
        return int(result[0]) if result else len(rows)

    def insert_new(self, table: str, rows: Sequence[Mapping[str, Any]]) -> set[Any]:
        """Insert rows whose `id` is not there yet; the ids that went in."""
        if not rows:
            return set()
        return {r[0] for r in self._bulk(f"INSERT OR IGNORE INTO {table}", rows,
                                         " RETURNING id").fetchall()}

    def insert_fresh(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert rows known not to be there yet (read so in the same transaction): without
        a conflict clause, which costs DuckDB (2.0) a fifth of `INSERT OR REPLACE` for one
        row; a row there after all fails the statement, and with it the transaction."""
        if rows:
            self._bulk(f"INSERT INTO {table}", rows)

    def update_row(self, table: str, row: Mapping[str, Any], key: str = "id") -> bool:
        """Set every column of the row whose `key` is row[key] to `row`'s values, as
        `INSERT OR REPLACE` of it would (DuckDB 2.0: 0.6 ms against 2-4 for one row);
        False when no such row is there."""
        columns = [c for c in row if c != key]
        updated = self.con.execute(
            f"UPDATE {table} SET {', '.join(f'{c} = ?' for c in columns)} WHERE {key} = ?",
            [*(row[c] for c in columns), row[key]]).fetchone()
        return updated is not None and bool(updated[0])

    def upsert(self, table: str, rows: Sequence[Mapping[str, Any]], update: str) -> None:
        """Insert, or on an existing `id` run `update` (SQL written in the code, never data:
        `excluded.col` is the new row, `table.col` the stored one)."""
        if rows:
            self._bulk(f"INSERT INTO {table}", rows, f" ON CONFLICT (id) DO UPDATE SET {update}")

    def _bulk(self, verb: str, rows: Sequence[Mapping[str, Any]],
              tail: str = "") -> duckdb.DuckDBPyConnection:
        """One statement for many rows: each column travels as one list parameter."""
        columns = list(rows[0])
        values = [[row[c] for row in rows] for c in columns]
        selects = ", ".join(f"unnest(${i + 1}) AS {c}" for i, c in enumerate(columns))
        return self.con.execute(f"{verb} ({', '.join(columns)}) "
                                f"SELECT * FROM (SELECT {selects}){tail}", values)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.con.execute(sql, list(params)).fetchall()


def connect(path: Path, read_only: bool, config: dict[str, Any] | None = None
             ) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(path), read_only=read_only, config=config or {})
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise DatabaseInUse(f"{path}: in use by another process (the logwatch daemon owns "
                                "it while it runs; ask it through `logwatch sql`)") from exc
        raise database_error(path, exc, "opening") from exc
    except duckdb.Error as exc:
        if is_damage(exc):
            raise damaged(path, exc) from exc
        raise DatabaseError(f"{path}: not a usable DuckDB database: {exc}") from exc


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                        "WHERE table_schema = 'main'").fetchall()}
    if "meta" not in tables:
        return 0
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


# A long-running process (the daemon, `logwatch run`) answers SQL from socket clients and
# must not grow: queries may not read or write other files, DuckDB's buffer cache is bounded
# (it spills to `<db>.tmp` beyond it) and it runs few worker threads (its writes are small
# transactions; a socket client's query over a history of months still gets two).
SERVICE_SETTINGS: dict[str, Any] = {"enable_external_access": False, "memory_limit": "256MB",
                                    "threads": 2}

# A one-shot `scan --db` writes its findings in one transaction of bulk inserts, and exits.
# DuckDB's defaults (a thread per core, a cache of 80% of RAM) let those inserts grow the
# process by ~2 KiB per finding (measured: 52,000 findings, +105 MiB; 1,000,000, +300 MiB):
# one thread and a small cache keep it to ~30 MiB, beyond which DuckDB writes the rows to the
# file. The cache cannot be smaller than what the transaction's own primary-key index needs,
# which stays in memory until the commit (~80 bytes a finding: a limit of 64MB fails the commit
# of 1,000,000 findings, 96MB does not), so the limit grows with the findings to record, and
# more with the incidents and diagnoses, whose rows are wider (the crash-loop backlog of `make
# bench`, 40,291 findings, 33,935 incidents and 7,335 diagnoses, fails at 52MiB and not at
# 64MiB: a scan that fails is recorded again without the limit, which cost it twice the time).
SCAN_MEMORY_BASE = 32 << 20
SCAN_MEMORY_PER_FINDING = 128
SCAN_MEMORY_PER_ROW = 1024  # an incident or a diagnosis


def scan_settings(findings: int, rows: int = 0) -> dict[str, Any]:
    """The settings of the connection that records a scan of `findings` findings and `rows`
    incidents and diagnoses."""
    limit = (SCAN_MEMORY_BASE + SCAN_MEMORY_PER_FINDING * max(findings, 0)
             + SCAN_MEMORY_PER_ROW * max(rows, 0))
    return {"memory_limit": f"{-(-limit // (1 << 20))}MiB", "threads": 1}


PRIVATE_UMASK = 0o077


def keep_files_private() -> int:
    """From now on this process creates files 0600 and directories 0700, whatever umask it
    was started with: the history holds log lines, which may hold secrets. A umask rather
    than a chmod after the fact, because DuckDB creates files later from its own threads (the
    WAL at a commit, `<db>.tmp/` when it spills) and each must be private from its first byte.
    Not 0640: the group that may use the socket asks the daemon; the file is the daemon's.
    Returns the previous umask, for children that should not inherit ours (`logwatch run`)."""
    previous = os.umask(PRIVATE_UMASK)
    os.umask(previous | PRIVATE_UMASK)
    return previous


def open_store(path: str | Path, service: bool = False,
               settings: dict[str, Any] | None = None) -> Store:
    """Open (creating it and its directory if needed) and migrate forward; refuse a newer
    database rather than guess at its meaning. `service`: the SERVICE_SETTINGS above;
    `settings`: others (scan_settings)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    config = SERVICE_SETTINGS if service else settings
    con = connect(path, read_only=False, config=config)
    try:
        version = schema_version(con)
        if version > SCHEMA_VERSION:
            raise DatabaseError(
                f"{path}: schema version {version} is newer than this logwatch understands "
                f"({SCHEMA_VERSION}); upgrade logwatch, or point --db at another file")
        for target in range(version + 1, SCHEMA_VERSION + 1):
            con.execute("BEGIN TRANSACTION")
            for statement in MIGRATIONS[target]:
                con.execute(statement)
            con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                        [str(target)])
            con.execute("COMMIT")
        for name, body in VIEWS.items():
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {body}")
    except duckdb.Error as exc:
        con.close()
        raise database_error(path, exc, "opening") from exc
    except BaseException:
        con.close()
        raise
    return Store(con, path, config)
