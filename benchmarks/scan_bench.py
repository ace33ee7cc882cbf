"""Time `logwatch scan` against `LC_ALL=C grep -c -E -f PATTERNS` on generated vLLM logs.

    python benchmarks/scan_bench.py [--size-mb 1024] [--runs 3] [--engine auto|python]

One run prints every figure the README quotes: for the realistic mix (SIZE MiB) and the
failure-dense mix (SIZE/4 MiB, see bench_logs.py), MB/s of `cat`, grep and logwatch and the
ratio logwatch/grep of each repetition (grep and logwatch alternate, so both see the same
load); the same with a library twice today's size; peak RSS of every logwatch run, `--db`
included; and how long `logwatch --help` takes. Ratios are wall-clock and, in brackets, CPU
time (user + system), which a busy machine disturbs less. grep counts lines that one of the
library's single-line patterns matches; multi-line patterns have no grep translation, so the
two counts agree only where no finding needs a multi-line pattern.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_logs import (  # noqa: E402
    DENSE_FAILURE_EVERY_S,
    DENSE_RPS,
    doubled_library,
    generate,
    grep_patterns,
)

# The goals, logwatch/grep in wall-clock time: the realistic mix on one core, and on
# two when both are free; the dense mix as `scan` runs it (it names no core count, and scan
# uses both cores when they are free on a file this large). One process on the dense mix is
# printed for comparison.
TARGETS: dict[str, float | None] = {
    "realistic": 1.0, "dense": None, "realistic, 2 processes": 1.5, "dense, 2 processes": 0.3,
    "realistic, library x2": 1.0}
RSS_LIMIT_MIB = 100
HELP_LIMIT_MS = 100


@dataclass
class Run:
    wall: float
    cpu: float
    out: bytes
    rss_kib: int


def timed(cmd: list[str], env: dict[str, str] | None = None) -> Run:
    """One whole process: wall and CPU seconds, stdout (to a file) and peak RSS.

    Output goes to a file, never into this process: a child's peak RSS counts the memory of
    the parent it was forked from, so the parent must stay small.
    """
    with tempfile.TemporaryFile() as sink:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=sink, env=env)
        _, _, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = 0
        sink.seek(0)
        out = sink.read(1 << 20)
    return Run(wall, usage.ru_utime + usage.ru_stime, out, usage.ru_maxrss)


def side_by_side(runs: int, grep_cmd: list[str], lw_cmd: list[str]
                 ) -> tuple[list[Run], list[Run]]:
    """grep and logwatch alternately, `runs` times each."""
    env = {**os.environ, "LC_ALL": "C"}
    greps, lws = [], []
    for _ in range(runs):
        greps.append(timed(grep_cmd, env))
        lws.append(timed(lw_cmd))
    return greps, lws


def report_mix(size_mb: float, greps: list[Run], lws: list[Run]) -> float:
    """Print one mix's figures; return the median wall-clock ratio."""
    ratios = [g.wall / w.wall for g, w in zip(greps, lws, strict=True)]
    cpu_ratios = [g.cpu / w.cpu for g, w in zip(greps, lws, strict=True)]
    grep_best = min(r.wall for r in greps)
    lw_best = min(r.wall for r in lws)
    stats = json.loads(lws[0].out)["stats"]
    grep_lines = int(greps[0].out.strip() or 0)
    print(f"  grep -c -E -f     {size_mb / grep_best:8.1f} MB/s   matching lines {grep_lines:,}")
    print(f"  logwatch scan     {size_mb / lw_best:8.1f} MB/s   matching lines "
          f"{stats['matched_lines']:,}, findings {stats['findings']:,}, "
          f"peak RSS {max(r.rss_kib for r in lws) / 1024:.0f} MiB, engine {stats['engine']}")
    print(f"  logwatch/grep     {statistics.median(ratios):5.2f}x  (runs "
          + " ".join(f"{r:.2f}" for r in ratios) + "; CPU time "
          + " ".join(f"{r:.2f}" for r in cpu_ratios) + ")")
    return statistics.median(ratios)


def compile_package() -> None:
    """Byte-compile logwatch, as pip leaves an installed package: under
    PYTHONDONTWRITEBYTECODE an editable checkout would otherwise compile its sources in every
    process timed (about 0.2 s each)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "logwatch")],
                   env=env, check=True, stdout=subprocess.DEVNULL)


def help_ms(runs: int) -> tuple[float, float, float]:
    """Best wall and CPU milliseconds of `logwatch --help`, and of Python doing nothing."""
    runs_help = [timed([sys.executable, "-m", "logwatch", "--help"]) for _ in range(runs)]
    bare = min(timed([sys.executable, "-c", "pass"]).wall for _ in range(runs))
    return (1000 * min(r.wall for r in runs_help), 1000 * min(r.cpu for r in runs_help),
            1000 * bare)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1024,
                        help="size of the realistic mix in MiB (the dense one is a quarter)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--engine", default="auto", choices=("auto", "hyperscan", "python"))
    parser.add_argument("--keep", action="store_true", help="keep the generated logs")
    args = parser.parse_args()

    compile_package()
    workdir = Path(tempfile.mkdtemp(prefix="logwatch-bench-"))
    logs = {"realistic": workdir / "realistic.log", "dense": workdir / "dense.log"}
    started = time.perf_counter()
    generate(logs["realistic"], args.size_mb, rps=20.0)
    generate(logs["dense"], args.size_mb / 4, rps=DENSE_RPS,
             failure_every_s=DENSE_FAILURE_EVERY_S)
    sizes = {k: p.stat().st_size / 1e6 for k, p in logs.items()}
    print(f"generated in {time.perf_counter() - started:.0f} s under {workdir}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    patterns = workdir / "patterns.ere"
    print(f"{grep_patterns(patterns)} single-line signature patterns translated to ERE for grep")
    lw = [sys.executable, "-m", "logwatch", "scan", "--json", "--engine", args.engine,
          "--mode", "prefilter", "--jobs", "1"]
    grep = ["grep", "-c", "-E", "-f", str(patterns)]

    results: dict[str, float] = {}
    rss: list[int] = []
    agree = True
    for name, log in logs.items():
        cat = min(timed(["sh", "-c", 'cat "$0" | wc -l', str(log)]).wall
                  for _ in range(args.runs))
        print(f"{name} mix, {sizes[name]:,.0f} MB: cat | wc -l {sizes[name] / cat:.0f} MB/s")
        greps, lws = side_by_side(args.runs, [*grep, str(log)], [*lw, str(log)])
        results[name] = report_mix(sizes[name], greps, lws)
        rss += [r.rss_kib for r in lws]
        if name == "realistic":
            agree = int(greps[0].out.strip() or 0) == json.loads(lws[0].out)["stats"][
                "matched_lines"]

    print(f"realistic mix, two processes (load average now {os.getloadavg()[0]:.1f}; the "
          f"goal assumes both cores free):")
    for name in ("realistic", "dense"):
        two = [*lw[:-1], "2", str(logs[name])]
        if name == "dense":
            print("dense mix, two processes:")
        greps, lws = side_by_side(args.runs, [*grep, str(logs[name])], two)
        results[f"{name}, 2 processes"] = report_mix(sizes[name], greps, lws)
        rss += [r.rss_kib for r in lws]

    double = doubled_library(workdir)
    double_patterns = workdir / "patterns-x2.ere"
    grep_patterns(double_patterns, double)
    print(f"realistic mix, library twice today's ({double}):")
    greps, lws = side_by_side(args.runs, ["grep", "-c", "-E", "-f", str(double_patterns),
                                          str(logs["realistic"])],
                              [*lw, "--library", str(double), str(logs["realistic"])])
    results["realistic, library x2"] = report_mix(sizes["realistic"], greps, lws)
    rss += [r.rss_kib for r in lws]

    db_run = timed([*lw, "--db", str(workdir / "history.duckdb"), str(logs["dense"])])
    rss.append(db_run.rss_kib)
    # what DuckDB itself costs any process that opens it (its code, touched as it starts)
    duckdb_only = timed([sys.executable, "-c",
                         "import duckdb; duckdb.connect().execute('SELECT 1').fetchall()"])
    print(f"dense mix with --db: {sizes['dense'] / db_run.wall:.1f} MB/s, "
          f"peak RSS {db_run.rss_kib / 1024:.0f} MiB (a process that only opens DuckDB: "
          f"{duckdb_only.rss_kib / 1024:.0f} MiB)")
    help_time, help_cpu, bare = help_ms(5)
    print(f"logwatch --help: {help_time:.0f} ms, {help_cpu:.0f} ms CPU (best of 5; python -c "
          f"pass: {bare:.0f} ms)")

    print("targets:")
    for name, ratio in results.items():
        goal = TARGETS[name]
        if goal is None:
            print(f"  {name:24s} {ratio:5.2f}x grep (for comparison: no goal of its own)")
            continue
        print(f"  {name:24s} {ratio:5.2f}x grep (goal >= {goal}x)  "
              f"{'met' if ratio >= goal else 'MISSED'}")
    peak = max(rss) / 1024
    print(f"  {'peak RSS, every run':24s} {peak:5.0f} MiB (goal <= {RSS_LIMIT_MIB})  "
          f"{'met' if peak <= RSS_LIMIT_MIB else 'MISSED'}")
    print(f"  {'logwatch --help':24s} {help_time:5.0f} ms (goal < {HELP_LIMIT_MS})  "
          f"{'met' if help_time < HELP_LIMIT_MS else 'MISSED'}")
    print("agreement with grep on the realistic mix's matching lines:", "yes" if agree else "NO")
    if not args.keep:
        for path in (*logs.values(), workdir / "history.duckdb"):
            path.unlink(missing_ok=True)
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
