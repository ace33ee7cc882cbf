"""Measure the daemon's `[export]`: a history of D days of failed launches (as
prune_bench.py makes it), held open as the daemon holds it; the copy taken between commits
(the time ingestion waits), then the first export (every day) and an incremental one (the
days that can still change), with rows and sizes.

    python benchmarks/export_bench.py [--days 120]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import date, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from prune_bench import history  # noqa: E402

from logwatch.store.db import open_store  # noqa: E402
from logwatch.store.export import copy_for_export, export_copy  # noqa: E402


def _size(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / (1 << 20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=120)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        db = history(work, args.days)
        out, scratch = work / "fleet", work / "h.duckdb.export"
        with open_store(db, service=True) as store:
            launches = store.query("SELECT count(*) FROM launches")[0][0]
            print(f"history: {args.days} days, {launches:,} launches, "
                  f"{db.stat().st_size / (1 << 20):.1f} MiB")
            first = datetime.now()  # the next export rewrites what changed after this
            for label, since, changed in (("first (every day)", None, None),
                                          ("incremental", date.today() - timedelta(days=1),
                                           first)):
                began = time.perf_counter()
                copy_for_export(store, scratch)  # what the daemon does under its writes lock
                copied = time.perf_counter() - began
                began = time.perf_counter()
                written = export_copy(scratch, out, "gpu1", since, changed)
                exported = time.perf_counter() - began
                rows = sum(w.rows for w in written)
                print(f"{label:18}  copy (ingestion waits) {copied * 1000:7.1f} ms   export "
                      f"{exported * 1000:7.1f} ms   {rows:,} rows   dataset {_size(out):.2f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
