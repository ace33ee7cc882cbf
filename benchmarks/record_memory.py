"""Peak memory of `logwatch scan --db` against the number of findings in the log.

    python benchmarks/record_memory.py [--findings 250000,1000000] [--keep DIR]

For each count, writes a small gzip of that many warning lines (one signature, varying pid and
time, so they fold into one incident) and records it into a new DuckDB file in a child
process; prints the child's peak RSS (ru_maxrss), its run time and what was recorded. Peak
RSS should stay about level as the count grows: findings travel in batches
(store/record.py RECORD_BATCH), never all at once.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# matches env.unknown_var (a warning); the pid and time vary from line to line
LINE = ("(APIServer pid={pid}) WARNING 11-29 {h:02d}:{m:02d}:{s:02d} [interface.py:500] "
        "Unknown vLLM environment variable detected: VLLM_NVFP4_GEMM_BACKEND\n")


def write_log(path: Path, findings: int) -> None:
    with gzip.open(path, "wt", compresslevel=6) as out:
        for i in range(findings):
            second = i % 86400
            out.write(LINE.format(pid=1000 + i % 50000, h=second // 3600,
                                  m=second // 60 % 60, s=second % 60))


def measure(log: Path, db: Path) -> tuple[float, float, str]:
    """(peak RSS in MiB, seconds, the 'recorded in' line) of one `scan --db` child."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen([sys.executable, "-m", "logwatch", "scan", "--db", str(db),
                                  str(log)], stdout=out, stderr=err, cwd=ROOT)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        err.seek(0)
        stderr = err.read().decode()
    if child.returncode not in (0, 1):
        raise SystemExit(f"scan --db failed ({child.returncode}): {stderr}")
    recorded = next((ln for ln in stderr.splitlines() if ln.startswith("recorded")), "")
    return usage.ru_maxrss / 1024, seconds, recorded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--findings", default="250000,1000000",
                        help="comma-separated counts (default 250000,1000000)")
    parser.add_argument("--keep", type=Path, help="keep the logs and databases in DIR")
    args = parser.parse_args()
    counts = [int(c) for c in args.findings.split(",")]
    with tempfile.TemporaryDirectory(prefix="lw-record-mem-") as scratch:
        work = args.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        for count in counts:
            log, db = work / f"findings-{count}.log.gz", work / f"findings-{count}.duckdb"
            write_log(log, count)
            for stale in (db, Path(f"{db}.wal")):
                if stale.exists():
                    os.remove(stale)
            peak, seconds, recorded = measure(log, db)
            print(f"{count:>10,} findings ({log.stat().st_size / 1e6:.1f} MB gzip): peak RSS "
                  f"{peak:,.0f} MiB, {seconds:.0f} s; {recorded}")


if __name__ == "__main__":
    main()
