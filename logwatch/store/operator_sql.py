"""Operator SQL, read-only by construction and bounded in time, rows and bytes.

A query typed by an operator (`logwatch sql`, the control socket, later the TUI) passes three
gates, none of which looks at the text itself:
1. DuckDB's own parser classifies it: one statement, a SELECT (which covers WITH, FROM-first,
   VALUES, DESCRIBE, SHOW, SUMMARIZE and PIVOT with an IN list), or an EXPLAIN of one without
   ANALYZE (EXPLAIN ANALYZE executes its statement). Its syntax tree (`json_serialize_sql`) may
   hold only reading query nodes (a CTE can hide a DELETE), name only table functions that
   read (`checkpoint()` and `query()` are refused), and must stay small with its CTEs inlined
   (DuckDB's binder, which does that work, cannot be interrupted).
2. It runs in a `BEGIN TRANSACTION READ ONLY` that is always rolled back: DuckDB itself
   refuses any write (a sequence's `nextval` included), whatever got past the first gate.
3. The connection has file access off (`enable_external_access = false`): no `read_csv`,
   `COPY`, `ATTACH` of another file.
Results are fetched as they stream, never all at once: at most `rows` rows and `bytes` bytes
are kept, a cell is cut at `cell_bytes`, and a query still running after `seconds` is
interrupted. What was cut is said in `QueryResult.truncated`.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from logwatch.store.db import DatabaseError, connect, damaged, is_damage

# Table functions a query may call: generators and the catalog (all read). Anything else is
# refused, whether it writes (checkpoint, force_checkpoint), runs SQL given as a string that
# no gate has seen (query, query_table), or reads files (read_csv, glob; also off by setting).
READING_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest", "json_each",
                                     "json_tree", "repeat", "repeat_row"})
READING_TABLE_PREFIXES = ("duckdb_", "pragma_")
# Query nodes that read; a CTE may hold a DELETE/INSERT/UPDATE node ("WITH gone AS (DELETE
# ... RETURNING *) SELECT ...") inside what the parser calls a SELECT statement.
READING_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE",
                           "CTE_NODE"})
# A query may hold at most this many syntax nodes with its CTEs inlined (see _expanded_size);
# a screenful of SQL has a few thousand, and DuckDB binds 500,000 in about 0.3 s.
MAX_EXPANDED_NODES = 500_000


@dataclass(frozen=True, slots=True)
class QueryLimits:
    seconds: float = 10.0
    rows: int = 10_000
    bytes: int = 16 << 20  # of values kept, as JSON text, all rows together
    cell_bytes: int = 64 << 10  # a longer value is cut, with its length said


DEFAULT_LIMITS = QueryLimits()


@dataclass(frozen=True, slots=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: str | None = None  # why the rows stop early, e.g. "row limit 10,000 reached"


def _refuse(why: str) -> DatabaseError:
    return DatabaseError(f"only read-only queries (SELECT, WITH, FROM, VALUES, DESCRIBE, "
                         f"SHOW, SUMMARIZE, EXPLAIN) are allowed here; {why}")


def _one_statement(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.Statement:
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise DatabaseError(f"cannot parse the query: {exc}") from exc
    if len(statements) != 1:
        raise DatabaseError(f"one statement at a time, got {len(statements)}")
    return statements[0]


def _kind(statement: duckdb.Statement) -> str:
    try:
        return statement.type.name
    except ValueError:  # a statement type newer than this DuckDB's Python enum
        return "a kind of statement that is not a query"


def _explained(sql: str) -> str:
    """The statement an EXPLAIN shows, found with DuckDB's tokenizer; refused when EXPLAIN
    would run it (ANALYZE) or takes options."""
    tokens = [(pos, kind) for pos, kind in duckdb.tokenize(sql)
              if kind != duckdb.token_type.comment]
    if len(tokens) < 2 or sql[tokens[0][0]:tokens[0][0] + 7].upper() != "EXPLAIN":
        raise _refuse("this EXPLAIN could not be read")
    start = tokens[1][0]
    word = sql[start:tokens[2][0] if len(tokens) > 2 else len(sql)].strip().upper()
    if tokens[1][1] == duckdb.token_type.keyword and word in ("ANALYZE", "ANALYSE"):
        raise _refuse("EXPLAIN ANALYZE runs its statement (use EXPLAIN)")
    return sql[start:]


def _parts(node: Any) -> Iterator[tuple[str, str]]:
    """('table', name) for every table function call and ('node', type) for every query
    node in a serialized syntax tree."""
    if isinstance(node, dict):
        kind = str(node.get("type", ""))
        if kind.endswith("_NODE") and "modifiers" in node:
            yield "node", kind
        if kind == "TABLE_FUNCTION" and isinstance(node.get("function"), dict):
            yield "table", str(node["function"].get("function_name", "")).lower()
            for argument in node["function"].get("arguments") or []:
                yield from _parts(argument)
            for key, value in node.items():
                if key != "function":
                    yield from _parts(value)
            return
        for value in node.values():
            yield from _parts(value)
    elif isinstance(node, list):
        for value in node:
            yield from _parts(value)


def _expanded_size(tree: Any) -> int:
    """How many syntax nodes the query holds once every CTE is inlined where it is named:
    DuckDB's binder does that work (for NOT MATERIALIZED ones, and others it inlines), and
    no interrupt reaches it there, so 1.5 KB of CTEs that each name the previous one twice
    took 30 s and 4 GB before a time limit could act. Counted without expanding anything."""
    ctes: dict[str, Any] = {}
    sizes: dict[int, int] = {}
    expanding: set[int] = set()

    def size(node: Any) -> int:
        if isinstance(node, list):
            return sum(size(item) for item in node)
        if not isinstance(node, dict):
            return 1
        cte_map = node.get("cte_map")
        for entry in cte_map.get("map") or [] if isinstance(cte_map, dict) else []:
            if isinstance(entry, dict):
                ctes[str(entry.get("key", "")).lower()] = entry.get("value")
        total = 1 + sum(size(value) for value in node.values())
        if node.get("type") == "BASE_TABLE" and not node.get("schema_name"):
            body = ctes.get(str(node.get("table_name", "")).lower())
            if body is not None and id(body) not in expanding:  # recursive: counted once
                if id(body) not in sizes:
                    expanding.add(id(body))
                    sizes[id(body)] = size(body)
                    expanding.discard(id(body))
                total += sizes[id(body)]
        return total

    return size(tree)


def _check_select(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """A SELECT's syntax tree names only table functions that read, and stays small once
    its CTEs are inlined."""
    row = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    try:
        tree = json.loads(row[0]) if row else {"error": True}
        if tree.get("error"):
            raise _refuse(f"this query could not be checked ({tree.get('error_message', '?')})")
        expanded = _expanded_size(tree.get("statements"))
        parts = list(_parts(tree.get("statements")))
    except RecursionError as exc:
        raise _refuse("this query is nested too deeply to be checked") from exc
    if expanded > MAX_EXPANDED_NODES:
        raise _refuse(f"this query grows to {expanded:,} parts once its CTEs are inlined where "
                      f"they are named (the most here is {MAX_EXPANDED_NODES:,})")
    for kind, name in parts:
        if kind == "node" and name not in READING_NODES:
            raise _refuse(f"this query holds a {name.removesuffix('_QUERY_NODE')} statement")
        if kind == "table" and name not in READING_TABLE_FUNCTIONS \
                and not name.startswith(READING_TABLE_PREFIXES):
            raise _refuse(f"the table function {name}() is not one that only reads")


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse anything but one SELECT, or an EXPLAIN (without ANALYZE) of one."""
    statement = _one_statement(con, sql)
    kind = _kind(statement)
    if kind == "EXPLAIN":
        inner = _explained(sql)
        inner_kind = _kind(_one_statement(con, inner))
        if inner_kind != "SELECT":
            raise _refuse(f"this explains {inner_kind}")
        _check_select(con, inner)
    elif kind == "SELECT":
        _check_select(con, sql)
    else:
        raise _refuse(f"this is {kind}")


def _cell(value: Any, limit: int) -> tuple[Any, int]:
    """The value as kept (strings and blobs cut at `limit`), and what it will cost in the
    answer: JSON text, where a control character takes six bytes."""
    if isinstance(value, str):
        if len(value) > limit:
            value = f"{value[:limit]}… ({len(value):,} characters, cut)"
        return value, len(value) if value.isascii() and value.isprintable() \
            else len(json.dumps(value))
    if isinstance(value, bytes | bytearray):
        if len(value) > limit:
            return bytes(value[:limit]), 4 * limit
        return value, 4 * len(value)
    if isinstance(value, list | dict):
        text = json.dumps(value, default=str)
        return (value, len(text)) if len(text) <= limit else _cell(text, limit)
    return value, 8


class _Deadline:
    """Interrupts a cursor's query when its time is up."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, seconds: float) -> None:
        self.expired = False
        self._cursor = cursor
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def _expire(self) -> None:
        self.expired = True
        with contextlib.suppress(duckdb.Error):
            self._cursor.interrupt()

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def run_read_only(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = (),
                  limits: QueryLimits = DEFAULT_LIMITS,
                  path: str | Path | None = None) -> QueryResult:
    """One checked statement in a read-only transaction on `con` (a cursor of its own),
    fetched within the limits. `path`: the file, named when it turns out to be damaged."""
    deadline = _Deadline(con, limits.seconds)
    try:
        check_read_only(con, sql)
        con.execute("BEGIN TRANSACTION READ ONLY")
        with deadline:
            cursor = con.execute(sql, list(params))
            columns = [d[0] for d in cursor.description or []]
            rows: list[tuple[Any, ...]] = []
            size, truncated = 0, None
            while truncated is None:
                batch = cursor.fetchmany(min(1024, limits.rows + 1 - len(rows)))
                if not batch:
                    break
                for raw in batch:
                    if len(rows) == limits.rows:
                        truncated = f"row limit {limits.rows:,} reached"
                        break
                    cells = [_cell(v, limits.cell_bytes) for v in raw]
                    size += sum(n for _, n in cells)
                    if size > limits.bytes:
                        truncated = f"size limit {limits.bytes >> 20} MiB reached"
                        break
                    rows.append(tuple(v for v, _ in cells))
        return QueryResult(columns, rows, truncated)
    except duckdb.InterruptException as exc:
        why = (f"the query ran over its time limit of {limits.seconds:g} s and was stopped"
               if deadline.expired else "the query was stopped (logwatch is shutting down)")
        raise DatabaseError(why) from exc
    except duckdb.Error as exc:
        if is_damage(exc):
            raise damaged(path, exc) from exc
        raise DatabaseError(f"query failed: {exc}") from exc
    finally:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")


def read_only_query(path: str | Path, sql: str, params: Sequence[Any] = (),
                    limits: QueryLimits = DEFAULT_LIMITS) -> QueryResult:
    """`run_read_only` on the file opened read-only (no daemon holds it)."""
    path = Path(path)
    if not path.exists():
        raise DatabaseError(f"{path}: no database yet (record one with `logwatch scan --db`)")
    con = connect(path, read_only=True, config={"enable_external_access": False})
    try:
        return run_read_only(con, sql, params, limits, path)
    finally:
        con.close()
