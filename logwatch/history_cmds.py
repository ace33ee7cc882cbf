"""`logwatch sql` and `logwatch history`: read the DuckDB history without changing it."""

from __future__ import annotations

import csv
import json
import sys
from datetime import date, datetime
from pathlib import Path
from typing import Any

from logwatch.store.db import default_db_path, read_only_query


def _cell(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
    return value


def render_table(columns: list[str], rows: list[tuple[Any, ...]], max_width: int = 48) -> str:
    def text(value: Any) -> str:
        cell = "" if value is None else str(_cell(value))
        return cell if len(cell) <= max_width else cell[: max_width - 1] + "…"

    body = [[text(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in body]) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in body]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out) + "\n"


def sql(db: Path | None, query: str, fmt: str) -> int:
    columns, rows = read_only_query(db or default_db_path(), query)
    if fmt == "json":
        json.dump([{c: _cell(v) for c, v in zip(columns, row, strict=True)} for row in rows],
                  sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    elif fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows([[_cell(v) for v in row] for row in rows])
    else:
        sys.stdout.write(render_table(columns, rows))
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


def history(db: Path | None, limit: int) -> int:
    columns, rows = read_only_query(db or default_db_path(),
                                    HISTORY_QUERY.format(limit=max(1, int(limit))))
    sys.stdout.write(render_table(columns, rows))
    return 0
