"""Measure retention: a history of D days of failed launches (the demo sample's two launches
a day, scanned into DuckDB), then `prune` keeping K days: rows removed, seconds, the file's
size before and after a CHECKPOINT.

    python benchmarks/prune_bench.py [--days 120] [--keep 30]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from logwatch.store.db import open_store  # noqa: E402
from logwatch.store.retention import prune  # noqa: E402

SAMPLE = ROOT / "samples" / "logs" / "demo_marlin_and_mtp.log"


def history(workdir: Path, days: int) -> Path:
    """One log of `days` days, each day the sample's two failed launches."""
    text = SAMPLE.read_bytes().decode()
    log = workdir / "vllm.log"
    start = datetime.now() - timedelta(days=days)
    with log.open("w") as out:
        for day in range(days):
            when = start + timedelta(days=day)
            out.write(re.sub(r"\b\d\d-\d\d (?=\d\d:\d\d:\d\d)", f"{when:%m-%d} ", text))
    db = workdir / "h.duckdb"
    subprocess.run([sys.executable, "-m", "logwatch", "scan", "--db", str(db), str(log)],
                   cwd=ROOT, capture_output=True, check=False)
    return db


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=120)
    parser.add_argument("--keep", type=float, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="logwatch-prune-") as tmp:
        began = time.perf_counter()
        db = history(Path(tmp), args.days)
        built = time.perf_counter() - began
        with open_store(db) as store:
            store.con.execute("CHECKPOINT")
            size = db.stat().st_size
            rows = {t: store.query(f"SELECT count(*) FROM {t}")[0][0]
                    for t in ("launches", "incidents", "findings")}
            began = time.perf_counter()
            done = prune(store, args.keep)
            seconds = time.perf_counter() - began
            store.con.execute("CHECKPOINT")
        after = db.stat().st_size
    removed = sum(done.removed.values())
    print(f"history of {args.days} days built in {built:.1f} s: {rows['launches']:,} launches, "
          f"{rows['incidents']:,} incidents, {rows['findings']:,} findings, "
          f"{size / 2**20:.1f} MiB")
    print(f"prune keeping {args.keep:g} days: {removed:,} rows in {seconds * 1000:.0f} ms "
          f"({removed / max(seconds, 1e-9):,.0f} rows/s); {done.describe()}")
    print(f"file after CHECKPOINT: {after / 2**20:.1f} MiB ({after / size:.0%} of before; "
          "DuckDB reuses the freed blocks for what comes next)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
