"""A query's result as a CSV file for a spreadsheet: `\n` line ends, lists and structs as
JSON, bytes as hex, and a text cell that a spreadsheet would run as a formula (`=`, `+`,
`-`, `@`, a tab or a carriage return first) written with a leading `'`, as OWASP advises:
a value from a log must not become a formula in the operator's spreadsheet."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    if isinstance(value, str):
        return "'" + value if value.startswith(FORMULA_START) else value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=str, ensure_ascii=False)
    return value


def write_csv(directory: Path, columns: Sequence[str], rows: Sequence[Sequence[Any]],
              now: datetime) -> Path:
    """A new file in `directory` (never one that exists, never through a link): its path."""
    stem = f"logwatch-{now:%Y%m%d-%H%M%S}"
    for n in range(1, 100):
        path = directory / (stem + (f"-{n}" if n > 1 else "") + ".csv")
        try:
            out = path.open("x", newline="", encoding="utf-8")
        except FileExistsError:
            continue
        with out:
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow([csv_cell(c) for c in columns])
            writer.writerows([csv_cell(v) for v in row] for row in rows)
        return path
    raise FileExistsError(f"{directory / stem}*.csv: 99 exports this second already")
