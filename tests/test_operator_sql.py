"""Operator SQL is read-only by construction: an adversarial list of every kind of statement
DuckDB has, wrapped every way it can be, run against a real database held read-write as the
daemon holds it; afterwards every table, the schema version and the WAL are as they were."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import duckdb
import pytest

from logwatch.store.db import DatabaseError, Store, open_store
from logwatch.store.operator_sql import QueryLimits, check_read_only, run_read_only

WRITES = [
    "INSERT INTO meta VALUES ('x', 'y')",
    "UPDATE meta SET value = '99' WHERE key = 'schema_version'",
    "DELETE FROM findings",
    "MERGE INTO meta USING (SELECT 'k' AS key) s ON meta.key = s.key "
    "WHEN NOT MATCHED THEN INSERT VALUES (s.key, 'v')",
    "CREATE TABLE evil (a INT)",
    "CREATE TEMP TABLE evil (a INT)",
    "CREATE MACRO evil(a) AS a + 1",
    "CREATE MACRO evil_t() AS TABLE SELECT 1",
    "CREATE SEQUENCE evil_seq",
    "CREATE VIEW evil AS SELECT 1",
    "CREATE OR REPLACE VIEW failures_by_config AS SELECT 1",
    "CREATE TYPE evil AS ENUM ('a')",
    "CREATE INDEX evil ON findings (line)",
    "CREATE SECRET evil (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "ALTER TABLE findings ADD COLUMN evil INT",
    "DROP TABLE checkpoints",
    "DROP VIEW incident_timeline",
    "TRUNCATE findings",
    "COPY findings TO '/tmp/logwatch-evil.csv'",
    "COPY findings FROM '/etc/passwd'",
    "EXPORT DATABASE '/tmp/logwatch-evil'",
    "IMPORT DATABASE '/tmp/logwatch-evil'",
    "ATTACH '/tmp/logwatch-evil.duckdb' AS evil",
    "DETACH evil",
    "USE evil",
    "INSTALL httpfs",
    "LOAD httpfs",
    "UPDATE EXTENSIONS",
    "SET threads = 64",
    "SET GLOBAL memory_limit = '100GB'",
    "RESET memory_limit",
    "SET VARIABLE evil = 1",
    "PRAGMA enable_profiling",
    "PRAGMA force_checkpoint",
    "CALL pragma_version()",
    "CALL checkpoint()",
    "CHECKPOINT",
    "FORCE CHECKPOINT",
    "VACUUM",
    "ANALYZE",
    "BEGIN TRANSACTION",
    "COMMIT",
    "ROLLBACK",
    "PREPARE evil AS DELETE FROM findings",
    "EXECUTE evil",
    "DEALLOCATE evil",
    "PIVOT findings ON signature",  # creates an ENUM type first: more than a SELECT
    # EXPLAIN ANALYZE executes its statement
    "EXPLAIN ANALYZE DELETE FROM findings",
    "EXPLAIN ANALYZE UPDATE meta SET value = '99' WHERE key = 'schema_version'",
    "EXPLAIN ANALYZE DROP TABLE checkpoints",
    "EXPLAIN ANALYZE INSERT INTO incidents (id, fatal) VALUES ('forged', true)",
    "explain /* hidden */ analyze delete from findings",
    "EXPLAIN\n\tANALYSE DELETE FROM findings",
    "EXPLAIN (ANALYZE) DELETE FROM findings",
    "EXPLAIN (ANALYZE, FORMAT json) SELECT 1",
    "EXPLAIN DELETE FROM findings",  # harmless, but not a SELECT
    "EXPLAIN EXPLAIN ANALYZE DELETE FROM findings",
    # a write inside what looks like a query
    "WITH gone AS (DELETE FROM findings RETURNING *) SELECT * FROM gone",
    "SELECT * FROM checkpoint()",
    "SELECT * FROM force_checkpoint()",
    "SELECT * FROM main.checkpoint()",
    'SELECT * FROM "checkpoint"()',
    "SELECT * FROM (SELECT * FROM checkpoint())",
    "WITH c AS (SELECT * FROM checkpoint()) SELECT * FROM c",
    "SELECT (SELECT count(*) FROM force_checkpoint())",
    "SELECT * FROM findings WHERE EXISTS (SELECT * FROM checkpoint())",
    "FROM query('DELETE FROM findings')",
    "FROM query('SELECT * FROM checkpoint()')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/shadow')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT nextval('evil_seq')",
    # more than one statement
    "SELECT 1; DELETE FROM findings",
    "SELECT 1; SELECT 2",
    "DELETE FROM findings; SELECT 1",
    "",
    ";",
    "SELEC 1",
]

# every statement above again, as what EXPLAIN and EXPLAIN ANALYZE would show or run
WRAPPED = [f"{wrap} {statement}" for statement in WRITES
           if statement.strip(" ;") and not statement.upper().startswith("EXPLAIN")
           for wrap in ("EXPLAIN", "EXPLAIN ANALYZE", "explain analyse")]

READS = [
    ("SELECT count(*) FROM findings", [(3,)]),
    ("FROM meta SELECT value WHERE key = 'schema_version'", None),
    ("WITH x AS (SELECT 1 AS a) SELECT a FROM x", [(1,)]),
    ("VALUES (1), (2)", [(1,), (2,)]),
    ("(SELECT 1) UNION ALL (SELECT 2)", [(1,), (2,)]),
    ("SELECT * FROM range(3)", [(0,), (1,), (2,)]),
    ("SELECT count(*) FROM duckdb_tables()", None),
    ("DESCRIBE findings", None),
    ("SHOW TABLES", None),
    ("SUMMARIZE findings", None),
    ("PIVOT findings ON signature IN ('a', 'b') USING count(*)", None),
    ("EXPLAIN SELECT * FROM findings", None),
    ("EXPLAIN (SELECT 1)", None),
    ("SELECT 1;", [(1,)]),
    ("-- a comment\nSELECT 1", [(1,)]),
]


def _state(store: Store) -> tuple[object, ...]:
    """Everything a write could change: every table's rows, the views' text, the catalog."""
    con = store.con
    tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() "
                                        "ORDER BY ALL").fetchall()]
    rows = tuple(tuple(sorted(map(str, con.execute(f'SELECT * FROM "{t}"').fetchall())))
                 for t in tables)
    catalog = con.execute("SELECT type, name FROM (SELECT 'view' AS type, view_name AS name "
                          "FROM duckdb_views() WHERE NOT internal UNION ALL SELECT 'seq', "
                          "sequence_name FROM duckdb_sequences() UNION ALL SELECT 'macro', "
                          "function_name FROM duckdb_functions() WHERE function_type LIKE "
                          "'%macro%' AND NOT internal UNION ALL SELECT 'index', index_name "
                          "FROM duckdb_indexes() UNION ALL SELECT 'type', type_name FROM "
                          "duckdb_types() WHERE NOT internal) ORDER BY ALL").fetchall()
    views = con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal ORDER BY ALL"
                        ).fetchall()
    settings = con.execute("SELECT name, value FROM duckdb_settings() WHERE name IN "
                           "('threads', 'memory_limit', 'enable_external_access')").fetchall()
    return tuple(tables), rows, tuple(catalog), tuple(views), tuple(settings)


@pytest.fixture
def held(tmp_path: Path) -> Store:
    """A history held read-write with the daemon's settings, with a WAL not yet folded in."""
    store = open_store(tmp_path / "h.duckdb", service=True)
    store.con.execute("CHECKPOINT")
    store.con.execute("INSERT INTO findings (id, signature, line) VALUES ('a', 's', 1), "
                      "('b', 's', 2), ('c', 't', 3)")
    return store


@pytest.mark.slow
def test_no_statement_of_any_kind_changes_anything(held: Store, tmp_path: Path) -> None:
    before = _state(held)
    wal = tmp_path / "h.duckdb.wal"
    wal_size = wal.stat().st_size
    assert wal_size > 0  # a checkpoint would fold it into the file: the test would see that
    for statement in WRITES + WRAPPED:
        with held.reader() as cursor, pytest.raises(DatabaseError):
            run_read_only(cursor, statement)
        assert _state(held) == before, statement
        assert wal.stat().st_size == wal_size, f"{statement} checkpointed the database"
    assert not Path("/tmp/logwatch-evil.csv").exists()


@pytest.mark.parametrize(("query", "expected"), READS)
def test_reading_queries_run(held: Store, query: str, expected: list[tuple[int]] | None
                             ) -> None:
    with held.reader() as cursor:
        result = run_read_only(cursor, query)
    assert result.truncated is None
    if expected is not None:
        assert result.rows == expected


def test_the_refusal_says_why(held: Store) -> None:
    con = held.con
    for query, why in [("EXPLAIN ANALYZE DELETE FROM findings", "EXPLAIN ANALYZE runs"),
                       ("DELETE FROM findings", "this is DELETE"),
                       ("SELECT * FROM checkpoint()", r"checkpoint\(\) is not one that only"),
                       ("SELECT 1; SELECT 2", "one statement at a time, got 2"),
                       ("SELEC 1", "cannot parse the query")]:
        with pytest.raises(DatabaseError, match=why):
            check_read_only(con, query)


def test_a_write_that_slipped_past_the_parser_is_refused_by_the_transaction(held: Store
                                                                            ) -> None:
    """The second gate alone: nextval() is a write DuckDB refuses in a read-only
    transaction (the first gate lets it through: it is a scalar function in a SELECT)."""
    held.con.execute("CREATE SEQUENCE s")
    with held.reader() as cursor, pytest.raises(DatabaseError, match="read-only mode"):
        run_read_only(cursor, "SELECT nextval('s')")
    assert held.con.execute("SELECT nextval('s')").fetchone() == (1,)


def test_rows_are_cut_while_fetching(held: Store) -> None:
    limits = QueryLimits(rows=1000)
    with held.reader() as cursor:
        result = run_read_only(cursor, "SELECT * FROM range(1000000000000)", limits=limits)
    assert len(result.rows) == 1000 and result.truncated == "row limit 1,000 reached"
    with held.reader() as cursor:  # exactly at the limit: nothing was cut
        result = run_read_only(cursor, "SELECT * FROM range(1000)", limits=limits)
    assert len(result.rows) == 1000 and result.truncated is None


def test_bytes_and_cells_are_bounded(held: Store) -> None:
    limits = QueryLimits(bytes=1 << 20, cell_bytes=1000)
    with held.reader() as cursor:
        result = run_read_only(cursor, "SELECT repeat('x', 999) FROM range(5000)",
                               limits=limits)
    assert result.truncated == "size limit 1 MiB reached" and 1000 <= len(result.rows) < 1100
    with held.reader() as cursor:
        (cell,), = run_read_only(cursor, "SELECT repeat('y', 5000)", limits=limits).rows
    assert cell.startswith("y" * 1000) and cell.endswith("(5,000 characters, cut)")


@pytest.mark.slow
def test_a_query_over_its_time_limit_is_interrupted(held: Store) -> None:
    started = time.monotonic()
    with held.reader() as cursor, pytest.raises(DatabaseError, match=r"time limit of 0\.5 s"):
        run_read_only(cursor, "SELECT count(*) FROM range(1000000000000) a",
                      limits=QueryLimits(seconds=0.5))
    assert time.monotonic() - started < 30  # uninterrupted it runs for hours


def test_interrupting_readers_stops_their_queries(held: Store) -> None:
    errors: list[str] = []

    def run() -> None:
        with held.reader() as cursor:
            try:
                run_read_only(cursor, "SELECT count(*) FROM range(1000000000000) a")
            except DatabaseError as exc:
                errors.append(str(exc))

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 10
    while not held.readers:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert held.interrupt_readers(wait=30) == 1
    thread.join(30)
    assert not thread.is_alive() and errors == [
        "the query was stopped (logwatch is shutting down)"]


def test_the_file_is_read_only_to_the_cli_too(tmp_path: Path) -> None:
    from logwatch.store.operator_sql import read_only_query

    db = tmp_path / "h.duckdb"
    open_store(db).close()
    with pytest.raises(DatabaseError):
        read_only_query(db, "EXPLAIN ANALYZE DELETE FROM meta")
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM meta").fetchone() == (1,)
    con.close()


def test_a_write_hidden_in_a_cte_is_refused_by_the_parser(held: Store) -> None:
    for query in ["WITH gone AS (DELETE FROM findings RETURNING *) SELECT * FROM gone",
                  "WITH x AS (INSERT INTO meta VALUES ('k', 'v') RETURNING *) FROM x",
                  "WITH x AS (UPDATE meta SET value = '9' RETURNING *) FROM x",
                  "SELECT 1 UNION ALL (WITH g AS (DELETE FROM findings RETURNING 1) FROM g)"]:
        with pytest.raises(DatabaseError, match="this query holds a"):
            check_read_only(held.con, query)


def doubling_ctes(levels: int) -> str:
    """Each CTE names the one before it twice: DuckDB's binder inlines 2**levels copies,
    and no interrupt reaches it while it does (30 s and 4 GB at 22 levels, from 1.5 KB)."""
    ctes = ["a0 AS NOT MATERIALIZED (SELECT 1 AS x)"] + [
        f"a{i} AS NOT MATERIALIZED (SELECT x FROM a{i - 1} UNION ALL SELECT x FROM a{i - 1})"
        for i in range(1, levels)]
    return "WITH " + ", ".join(ctes) + f" SELECT count(*) FROM a{levels - 1}"


def test_a_query_that_grows_when_its_ctes_are_inlined_is_refused_before_binding(
        held: Store) -> None:
    started = time.monotonic()
    for levels in (16, 22, 40):
        with held.reader() as cursor, pytest.raises(DatabaseError, match="once its CTEs are"):
            run_read_only(cursor, doubling_ctes(levels))
    assert time.monotonic() - started < 10  # refused from the syntax tree, never bound
    with held.reader() as cursor:  # a few levels are an ordinary query
        assert run_read_only(cursor, doubling_ctes(6)).rows == [(32,)]
    with held.reader() as cursor:  # a recursive CTE names itself: counted once
        assert run_read_only(cursor, "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 "
                                     "FROM r WHERE n < 5) SELECT max(n) FROM r").rows == [(5,)]


def test_a_query_nested_too_deeply_is_refused_not_a_crash(held: Store) -> None:
    query = "SELECT " + "(" * 5000 + "1" + ")" * 5000
    with held.reader() as cursor, pytest.raises(DatabaseError):
        run_read_only(cursor, query)


def test_closing_with_a_query_still_running_leaves_it_to_the_process_end(held: Store
                                                                         ) -> None:
    """A query no interrupt reached must not turn the daemon's last step into a traceback
    ("connection is busy"): the store says so, and the process ends without waiting."""
    done = threading.Event()

    def run() -> None:
        with held.reader() as cursor, contextlib.suppress(DatabaseError):
            run_read_only(cursor, "SELECT count(*) FROM range(1000000000000) a")
        done.set()

    threading.Thread(target=run, daemon=True).start()
    deadline = time.monotonic() + 10
    while not held.readers:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    held.close()  # no exception
    assert held.left_open
    held.interrupt_readers(wait=30)
    assert done.wait(30)
    held.close()  # nothing runs now: this one closes
    with pytest.raises(duckdb.ConnectionException):
        held.con.execute("SELECT 1")
