"""`logwatch sql` and `logwatch history`: read the DuckDB history without changing it.

Values come from logs and file names: the table, the CSV and `status` show their control
characters visibly; JSON escapes them (ensure_ascii), and loads back to the stored value.
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import sys
from datetime import date, datetime
from pathlib import Path
from typing import Any

from logwatch.core.report.timestamps import written
from logwatch.core.safe_text.visible import visible
from logwatch.store.db import default_db_path
from logwatch.store.operator_sql import QueryResult, read_only_query


def _cell(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return written(value)
    return value


def _shown(value: Any) -> Any:
    """A CSV cell for a terminal: text with its control characters shown, a list or a struct
    as JSON (control characters escaped), numbers as they are."""
    value = _cell(value)
    if value is None or isinstance(value, int | float):
        return value
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, default=str)
    return visible(str(value))


def _cell_width() -> int | None:
    """How wide a table cell may be: cut to fit a terminal, never in a pipe."""
    return 48 if sys.stdout.isatty() else None


def render_table(columns: list[str], rows: list[tuple[Any, ...]], max_width: int | None = 48,
                 truncated: str | None = None) -> str:
    """Aligned columns; a cell over `max_width` is cut with `…` (None: never cut)."""
    def text(value: Any) -> str:
        shown = _shown(value)
        cell = "" if shown is None else str(shown)
        return cell if max_width is None or len(cell) <= max_width \
            else cell[: max_width - 1] + "…"

    columns = [visible(c) for c in columns]
    body = [[text(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in body]) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in body]
    count = f"{len(rows):,} row{'s' if len(rows) != 1 else ''}"
    out.append(f"({count}; truncated: {visible(truncated)})" if truncated else f"({count})")
    return "\n".join(out) + "\n"


BUSY_SECONDS = 30.0  # how long a daemon may take to answer before it is called busy


def _busy_seconds() -> float:
    """$LOGWATCH_ANSWER_SECONDS, else BUSY_SECONDS: how long to wait for a daemon's answer."""
    import os

    try:
        return max(0.1, float(os.environ.get("LOGWATCH_ANSWER_SECONDS") or BUSY_SECONDS))
    except ValueError:
        return BUSY_SECONDS


class _Elsewhere:
    """Why the file is read directly: no daemon listens, or the one that does holds
    another history (what it said)."""

    def __init__(self, why: str = "") -> None:
        self.why = why


def _ask_daemon(socket: Path | None, op: str, db: Path | None = None,
                **params: Any) -> dict[str, Any] | _Elsewhere:
    """The daemon's answer; an `_Elsewhere` when no daemon listens (the file is free then)
    or the daemon holds another database than the `db` asked for. A daemon that does not
    answer in time is busy, not absent: DatabaseError, never numbers from another file."""
    import asyncio

    from logwatch.daemon import client
    from logwatch.daemon.config_file import default_socket_path
    from logwatch.store.db import DatabaseError

    path, wait = socket or default_socket_path(), _busy_seconds()
    try:
        if not path.exists():
            return _Elsewhere()
    except PermissionError:  # a directory we may not search: the connection says who may
        pass
    try:
        answer = asyncio.run(client.request(path, op, timeout=wait,
                                            db=db and str(db.resolve()), **params))
    except (client.ProtocolMismatch, client.PermissionDenied) as exc:  # a daemon runs: its
        raise DatabaseError(str(exc)) from exc  # file is not ours to open
    except TimeoutError as exc:
        raise DatabaseError(f"the daemon on {path} is busy: no answer within "
                            f"{wait:g} s (try again; `logwatch status` says what it "
                            "is doing)") from exc
    except (OSError, ValueError):
        return _Elsewhere()
    if answer.get("other_db"):
        return _Elsewhere(f"the daemon on {path} holds another history: "
                          f"{answer.get('error')}")
    return answer


def _read_directly(db: Path | None, query: str, elsewhere: _Elsewhere) -> QueryResult:
    """The file itself, read-only; when another process holds it, said with what the
    daemon on the socket answered (so `--db X` names whose X it is not)."""
    from logwatch.store.db import DatabaseError

    try:
        return read_only_query(db or default_db_path(), query)
    except DatabaseError as exc:
        if not elsewhere.why:
            raise
        raise DatabaseError(f"{exc}; {elsewhere.why}: give the --socket of the daemon "
                            "that holds it") from exc


def query_history(db: Path | None, query: str, socket: Path | None) -> QueryResult:
    """Through the daemon when it holds `db` (the file is locked then), else the file
    itself, read-only."""
    answer = _ask_daemon(socket, "sql", db, query=query)
    if isinstance(answer, _Elsewhere):
        return _read_directly(db, query, answer)
    if not answer.get("ok"):
        from logwatch.store.db import DatabaseError

        raise DatabaseError(str(answer.get("error")))
    return QueryResult(answer["columns"], [tuple(r) for r in answer["rows"]],
                       answer.get("truncated") or None)


def sql(db: Path | None, query: str, fmt: str, socket: Path | None = None) -> int:
    if query == "-":  # the query from stdin (a file, a heredoc)
        query = sys.stdin.read()
    result = query_history(db, query, socket)
    columns, rows, truncated = result.columns, result.rows, result.truncated
    if fmt == "json":
        json.dump({"columns": columns,
                   "rows": [{c: _cell(v) for c, v in zip(columns, row, strict=True)}
                            for row in rows],
                   "truncated": truncated}, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    elif fmt == "jsonl":  # a row a line, for pipelines (`jq -c`, `while read`)
        for row in rows:
            sys.stdout.write(json.dumps({c: _cell(v) for c, v in zip(columns, row, strict=True)},
                                        default=str) + "\n")
    elif fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")  # `\n`: awk, read, bc
        writer.writerow([visible(c) for c in columns])
        writer.writerows([[_shown(v) for v in row] for row in rows])
    else:
        sys.stdout.write(render_table(columns, rows, truncated=truncated,
                                      max_width=_cell_width()))
    if truncated and fmt != "table":  # the table says it in its last line
        sys.stderr.write(f"logwatch sql: {len(rows):,} rows shown, "
                         f"truncated: {visible(str(truncated))}\n")
    return 0


HISTORY_QUERY = """
SELECT coalesce(strftime(first_time, '%Y-%m-%d %H:%M'), '') AS when, severity,
       CASE WHEN root_cause THEN 'root' ELSE '' END AS root, signature, count,
       coalesce(diagnosis, '') AS diagnosis, coalesce(model, '') AS model,
       coalesce(quant_scheme, '') AS scheme,
       coalesce(CAST(tensor_parallel_size AS VARCHAR), '') AS tp
FROM incident_timeline
WHERE severity IN ('error', 'critical') OR fatal
ORDER BY first_time DESC NULLS LAST
LIMIT {limit}
"""


def history(db: Path | None, limit: int, socket: Path | None = None) -> int:
    result = query_history(db, HISTORY_QUERY.format(limit=max(1, int(limit))), socket)
    sys.stdout.write(render_table(result.columns, result.rows, max_width=_cell_width()))
    return 0


def relaunch_lines(relaunch: dict[str, Any] | None, socket: Path | None = None) -> list[str]:
    """Open actions with what the operator may do (the command as it reaches this daemon),
    the latest that ended, and open breakers (status)."""
    if not relaunch:
        return []
    via = f" --socket {shlex.quote(str(socket))}" if socket is not None else ""
    out = []
    for action in relaunch.get("ended", []):
        state = str(action["state"])
        out.append(f"action {visible(str(action['id']))} on {visible(str(action['target']))}: "
                   f"{state.replace('_', ' ')} ({visible(str(action['reason']))})")
    for action in relaunch["actions"]:
        ident = visible(str(action["id"]))
        state = str(action["state"])
        may = {"awaiting_approval": f": `logwatch approve {ident}{via}` or "
                                    f"`logwatch reject {ident}{via}`",
               "blocked": f" ({visible(str(action['reason']))})"}.get(state, "")
        out.append(f"action {ident} on {visible(str(action['target']))}: "
                   f"{state.replace('_', ' ')}{may}")
    for target, is_open in sorted(relaunch["breakers"].items()):
        if is_open:
            out.append(f"breaker of {visible(target)} OPEN: relaunches stop until "
                       f"`logwatch reset-breaker {visible(target)}{via}`")
    return out


EXIT_FATAL = 1  # status: a target's newest launch failed
EXIT_NO_DAEMON = 3  # status: no daemon answers (what the history holds is printed)


def status(db: Path | None, socket: Path | None, as_json: bool) -> int:
    """What the daemon is doing; exit 0 healthy, 1 when a target's newest launch failed, 3
    when no daemon answers, 2 when neither the daemon nor the history could be read.
    `--json` prints one object in every case, an error too."""
    from logwatch.store.errors import DatabaseError

    try:
        answer = _ask_daemon(socket, "status", db)
        if isinstance(answer, _Elsewhere):
            return _history_status(db, as_json, answer)
        if not answer.get("ok"):
            raise DatabaseError(f"the daemon: {answer.get('error')}")
    except DatabaseError as exc:
        if not as_json:
            raise
        _json_error(exc)
        return 2
    state = answer["status"]
    failed = [launch for launch in state.get("launches", []) if launch["outcome"] == "failed"]
    code = EXIT_FATAL if failed else 0
    if as_json:
        json.dump(state, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return code
    print(f"daemon running {state['uptime_s']:.0f} s (logwatch {state.get('version', '?')}, "
          f"protocol {state.get('protocol', '?')}): {state['lines']:,} lines read, "
          f"{state['findings_recorded']:,} findings recorded, "
          f"library {visible(str(state['library']))}")
    database = state.get("database", {})
    from logwatch.paths import default_socket_path

    print(f"  database {visible(str(database.get('path', '?')))} · socket "
          f"{visible(str(socket or default_socket_path()))}")
    open_fatal = sum(launch.get("fatal_incidents", 0) for launch in state.get("launches", []))
    print(f"  {open_fatal} open fatal incident(s) in the newest launches, {len(failed)} "
          f"target(s) failed now ({state.get('failed_launches', 0)} failed launch(es) since "
          "the daemon started)"
          + (f"; last: {visible(str(state['last_failure']))}" if state.get("last_failure")
             else ""))
    if database.get("writable") is False:
        print(f"  DATABASE UNWRITABLE for {database['since_s']:.0f} s "
              f"({database['failed_tries']} failed commits): "
              f"{visible(str(database['error']))}; {state['pending']:,} findings "
              f"waiting; reading {database['reading']}")
    for source in state["sources"]:
        silent = (", no vLLM output recognised" if source.get("vllm_output") is False
                  and source.get("generation") else "")
        read = (f", line {source['next_line']:,}, idle {source['idle_s']:.0f} s"
                if source.get("idle_s") is not None else "")
        # a daemon of the release before source states (protocol 1 too) sends none
        judged = (f"{str(source['state']).replace('_', ' ')} "
                  f"({visible(str(source.get('detail', '')))})" if "state" in source
                  else f"{source.get('behind_bytes') or 0:,} bytes behind")
        print(f"  {visible(str(source['name']))}: {judged}{read}{silent}")
    for launch in state.get("launches", []):
        cause = (f", root cause {visible(str(launch['root_cause']))}"
                 if launch.get("root_cause") else "")
        again = (f", failed {launch['failed_before']} time(s) before"
                 if launch.get("failed_before") else "")
        fatal = (f", {launch['fatal_incidents']} fatal incident(s)"
                 if launch.get("fatal_incidents") else "")
        print(f"  {visible(str(launch['source']))} launch #{launch['number']}: "
              f"{launch['outcome']}{cause}{fatal}{again}")
        if launch.get("latent"):  # not failed (yet) is not healthy: say what is ahead
            print(f"  {visible(str(launch['source']))} launch #{launch['number']} "
                  f"({launch['outcome']}) has latent problems: "
                  + "; ".join(visible(str(t)) for t in launch["latent"]))
    for line in relaunch_lines(state.get("relaunch"), socket):
        print(f"  {line}")
    for event in state["events"]:
        print(f"  event: {visible(str(event))}")
    return code


def _json_error(exc: Exception, db: Path | None = None) -> None:
    """`status --json` when nothing could be read: still one object."""
    json.dump({"daemon": None, "error": str(exc), **({"database": str(db)} if db else {})},
              sys.stdout, indent=2)
    sys.stdout.write("\n")


def _history_status(db: Path | None, as_json: bool, elsewhere: _Elsewhere) -> int:
    """No daemon answers for this history: what it holds, and exit 3 (the history
    unreadable too: said, still 3)."""
    from logwatch.store.errors import DatabaseError

    path = db or default_db_path()
    none = f"no daemon running for {path}" + (f" ({elsewhere.why})" if elsewhere.why else "")
    try:
        rows = read_only_query(
            path,
            "SELECT (SELECT count(*) FROM findings), (SELECT count(*) FROM incidents WHERE "
            "fatal), (SELECT max(updated) FROM checkpoints)").rows
    except DatabaseError as exc:
        if as_json:
            _json_error(exc, path)
        else:
            print(visible(f"{none}; {exc}"))
        return EXIT_NO_DAEMON
    findings, fatal, updated = rows[0]
    summary = {"daemon": None, "database": str(path), "findings": findings,
               "fatal_incidents": fatal, "last_checkpoint": _cell(updated),
               **({"note": elsewhere.why} if elsewhere.why else {})}
    if as_json:
        json.dump(summary, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print(visible(f"{none}; the history holds {findings:,} findings, {fatal:,} fatal "
                      f"incidents; last checkpoint {_cell(updated) or 'never'}"))
    return EXIT_NO_DAEMON


def history_command(args: argparse.Namespace) -> int:
    if args.command == "sql":
        fmt = ("json" if args.json else "jsonl" if args.jsonl else "csv" if args.csv
               else "table")
        return sql(args.db, args.query, fmt, args.socket)
    if args.command == "status":
        return status(args.db, args.socket, args.json)
    return history(args.db, args.limit, args.socket)
