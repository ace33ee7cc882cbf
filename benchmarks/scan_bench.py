"""Time `logwatch scan --json` against the shared yardstick's grep, in one run.

    python benchmarks/scan_bench.py [--size-mb 1024] [--seed 7] [--runs 3] [--engine auto]

Two logs, both timed as whole processes against `LC_ALL=C grep -c -E -f
../shared/perf/patterns.ere.txt` (the shared baseline, written to a file), grep and logwatch
taking turns so both meet the same load:

- the *serving log*: ../shared/perf/gen_vllm_log.py (SIZE MiB, any seed): request-lifecycle
  lines, aborted requests, stats, access lines, restarts, prompts quoting errors, rare failures;
- the *crash-loop backlog* (a quarter of SIZE, at least 200 MB): a server restarted again and
  again, each time a healthy start, 150 KB of the serving log's traffic and then one of this
  repository's failure samples, as a crash loop leaves its log after a night of downtime
  (about 1,200 restarts in 200 MB, as in issue 28's own; logwatch counts about three times
  as many launches, since many samples hold several starts).

Each with one process (`--jobs 1`) and two (`--jobs 2`); peak RSS of every run and of
`scan --db` on the backlog; the ratio of each repetition, wall-clock and (in brackets) CPU.
Without ../shared/perf (a checkout not beside it) the serving log is this repository's own
generator (bench_logs.py) and grep's patterns its own translation, and it says so.
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

from bench_logs import generate, grep_patterns  # noqa: E402

# Issue 28's goals, logwatch/grep in wall-clock time: the serving log with one process and
# with two, and the backlog as `scan` runs it (two processes when two cores are free).
TARGETS: dict[str, float | None] = {
    "serving log, 1 process": 1.0, "serving log, 2 processes": 1.5,
    "crash-loop backlog, 1 process": None, "crash-loop backlog, 2 processes": 0.3}
SHARED_PERF = ROOT.parent / "shared" / "perf"
SHARED_GENERATOR = SHARED_PERF / "gen_vllm_log.py"
SHARED_PATTERNS = SHARED_PERF / "patterns.ere.txt"
RSS_LIMIT_MIB = 100
HELP_LIMIT_MS = 100


@dataclass
class Run:
    wall: float
    cpu: float
    out: bytes
    rss_kib: int


# Each measured process is started by a small one between it and this one: Linux keeps, as
# a child's peak RSS, the larger of its own and that of the process it was forked from (at
# exec), and this process grows to ~70 MiB over a run (a process that only opens DuckDB
# read 72 MiB from here, 65 from a shell). The wrapper (~9 MiB) times the command itself,
# so its own start-up counts in no figure.
_WRAPPER = """
import os, sys, time
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - started
with open(sys.argv[1], "w") as out:
    out.write(f"{wall} {usage.ru_utime + usage.ru_stime} {usage.ru_maxrss} {status}")
"""


def timed(cmd: list[str], env: dict[str, str] | None = None) -> Run:
    """One whole process: wall and CPU seconds, stdout (to a file) and peak RSS, measured
    by a small process that starts it (_WRAPPER)."""
    with tempfile.TemporaryFile() as sink, tempfile.NamedTemporaryFile("r") as report:
        subprocess.run([sys.executable, "-I", "-S", "-c", _WRAPPER, report.name, *cmd],
                       stdout=sink, env=env, check=True)
        wall, cpu, rss, _ = report.read().split()
        sink.seek(0)
        out = _kept(sink.read())
    return Run(float(wall), float(cpu), out, int(rss))


def _kept(out: bytes) -> bytes:
    """What is kept of a run's output: grep's count, or the `stats` object of a report
    (tens of MB for a backlog: parsed whole, it would stay in this process and count in the
    peak RSS of every child forked after it)."""
    at = out.find(b'"stats": {')
    if at < 0:
        return out[:4096]
    start, depth = out.index(b"{", at), 0
    for end in range(start, len(out)):
        depth += {0x7B: 1, 0x7D: -1}.get(out[end], 0)
        if depth == 0:
            return out[start:end + 1]
    return b"{}"


def side_by_side(runs: int, grep_cmd: list[str], lw_cmd: list[str]
                 ) -> tuple[list[Run], list[Run]]:
    """grep and logwatch alternately, `runs` times each."""
    env = {**os.environ, "LC_ALL": "C"}
    greps, lws = [], []
    for _ in range(runs):
        greps.append(timed(grep_cmd, env))
        lws.append(timed(lw_cmd))
    return greps, lws


def ratio_text(ratio: float) -> str:
    """Two decimals; three below 0.1, where two would hide a change of a third."""
    return f"{ratio:.3f}" if ratio < 0.1 else f"{ratio:.2f}"


def report_mix(size_mb: float, greps: list[Run], lws: list[Run]) -> float:
    """Print one mix's figures; return the median wall-clock ratio."""
    ratios = [g.wall / w.wall for g, w in zip(greps, lws, strict=True)]
    cpu_ratios = [g.cpu / w.cpu for g, w in zip(greps, lws, strict=True)]
    grep_best = min(r.wall for r in greps)
    lw_best = min(r.wall for r in lws)
    stats = json.loads(lws[0].out)
    grep_lines = int(greps[0].out.strip() or 0)
    print(f"  grep -c -E -f     {size_mb / grep_best:8.1f} MB/s   matching lines {grep_lines:,}")
    print(f"  logwatch scan     {size_mb / lw_best:8.1f} MB/s   matching lines "
          f"{stats['matched_lines']:,}, findings {stats['findings']:,}, launches "
          f"{stats.get('launches', 0):,}, "
          f"peak RSS {max(r.rss_kib for r in lws) / 1024:.0f} MiB, engine {stats['engine']}")
    print(f"  logwatch/grep     {ratio_text(statistics.median(ratios)):>5s}x  (runs "
          + " ".join(ratio_text(r) for r in ratios) + "; CPU time "
          + " ".join(ratio_text(r) for r in cpu_ratios) + ")")
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


# What a launch of the backlog serves before it fails: the issue's own backlog had 1,179
# launches in 233 MB (about 200 KB each).
SERVING_PER_LAUNCH = 150_000


def crash_loop(path: Path, size_mb: float, serving_log: Path) -> int:
    """A server restarted again and again until `size_mb`: each time a healthy start, about
    150 KB of the serving log's traffic (its next stretch, whole lines), then one of the
    failure samples (most start vLLM again and fail). Returns how many failure samples went
    in."""
    logs = ROOT / "samples" / "logs"
    failures = [p.read_bytes() for p in sorted(logs.glob("*.log"))
                if not p.name.startswith("healthy") and "hard_wrapped" not in p.name]
    failures = [f if f.endswith(b"\n") else f + b"\n" for f in failures]
    start = (logs / "healthy_033_startup.log").read_bytes()
    written = count = 0
    with open(path, "wb") as out, open(serving_log, "rb") as traffic:
        while written < size_mb * 1e6:
            serving = traffic.read(SERVING_PER_LAUNCH)
            serving += traffic.readline()
            if len(serving) < SERVING_PER_LAUNCH:  # the serving log ran out: round again
                traffic.seek(0)
            failure = failures[count % len(failures)]
            out.write(start + serving + failure)
            written += len(start) + len(serving) + len(failure)
            count += 1
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1024,
                        help="size of the serving log in MiB (the backlog: a quarter, >= 200)")
    parser.add_argument("--seed", type=int, default=7, help="the shared generator's seed")
    parser.add_argument("--backlog-mb", type=float, default=None,
                        help="size of the crash-loop backlog (default: a quarter of the "
                             "serving log, at least 200)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--engine", default="auto", choices=("auto", "hyperscan", "python"))
    parser.add_argument("--keep", action="store_true", help="keep the generated logs")
    args = parser.parse_args()

    compile_package()
    workdir = Path(tempfile.mkdtemp(prefix="logwatch-bench-"))
    logs = {"serving log": workdir / "serving.log", "crash-loop backlog": workdir / "loop.log"}
    started = time.perf_counter()
    if SHARED_GENERATOR.exists():
        subprocess.run([sys.executable, str(SHARED_GENERATOR), "--size",
                        f"{int(args.size_mb)}M", "--out", str(logs["serving log"]),
                        "--seed", str(args.seed)], check=True, stdout=subprocess.DEVNULL)
        patterns = SHARED_PATTERNS
        print(f"serving log: {SHARED_GENERATOR.name} --size {int(args.size_mb)}M "
              f"--seed {args.seed}; grep baseline {SHARED_PATTERNS}")
    else:
        generate(logs["serving log"], args.size_mb, rps=20.0)
        patterns = workdir / "patterns.ere"
        grep_patterns(patterns)
        print(f"NOTE: {SHARED_GENERATOR} not found: the serving log is bench_logs.py's and "
              "grep's patterns this library's, not the shared yardstick")
    failed = crash_loop(logs["crash-loop backlog"], args.backlog_mb
                        if args.backlog_mb is not None else max(args.size_mb / 4, 200),
                        logs["serving log"])
    sizes = {k: p.stat().st_size / 1e6 for k, p in logs.items()}
    print(f"crash-loop backlog: a healthy start, {SERVING_PER_LAUNCH // 1000} KB of the "
          f"serving log's traffic and a failure sample, {failed:,} times")
    print(f"generated in {time.perf_counter() - started:.0f} s under {workdir}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    lw = [sys.executable, "-m", "logwatch", "scan", "--json", "--engine", args.engine,
          "--jobs"]
    grep = ["grep", "-c", "-E", "-f", str(patterns)]

    results: dict[str, float] = {}
    rss: dict[str, int] = {}
    for name, log in logs.items():
        cat = min(timed(["sh", "-c", 'cat "$0" | wc -l', str(log)]).wall
                  for _ in range(args.runs))
        for jobs in ("1", "2"):
            label = f"{name}, {jobs} process{'es' if jobs == '2' else ''}"
            print(f"{label}, {sizes[name]:,.0f} MB (cat | wc -l {sizes[name] / cat:.0f} MB/s):")
            greps, lws = side_by_side(args.runs, [*grep, str(log)], [*lw, jobs, str(log)])
            results[label] = report_mix(sizes[name], greps, lws)
            rss[label] = max(r.rss_kib for r in lws)

    db_run = timed([*lw, "2", "--db", str(workdir / "history.duckdb"),
                    str(logs["crash-loop backlog"])])
    rss["crash-loop backlog, --db"] = db_run.rss_kib
    duckdb_only = timed([sys.executable, "-c",
                         "import duckdb; duckdb.connect().execute('SELECT 1').fetchall()"])
    print(f"crash-loop backlog with --db: {sizes['crash-loop backlog'] / db_run.wall:.1f} MB/s, "
          f"peak RSS {db_run.rss_kib / 1024:.0f} MiB (a process that only opens DuckDB: "
          f"{duckdb_only.rss_kib / 1024:.0f} MiB)")
    help_time, help_cpu, bare = help_ms(5)
    print(f"logwatch --help: {help_time:.0f} ms, {help_cpu:.0f} ms CPU (best of 5; python -c "
          f"pass: {bare:.0f} ms)")

    print("targets:")
    for name, ratio in results.items():
        goal = TARGETS.get(name)
        if goal is None:
            print(f"  {name:34s} {ratio_text(ratio):>5s}x grep (for comparison: no goal of "
                  "its own)")
            continue
        print(f"  {name:34s} {ratio_text(ratio):>5s}x grep (goal >= {goal}x)  "
              f"{'met' if ratio >= goal else 'MISSED'}")
    for name, kib in rss.items():
        print(f"  {'peak RSS, ' + name:34s} {kib / 1024:5.0f} MiB (goal <= {RSS_LIMIT_MIB})  "
              f"{'met' if kib / 1024 <= RSS_LIMIT_MIB else 'MISSED'}")
    print(f"  {'logwatch --help':34s} {help_time:5.0f} ms (goal < {HELP_LIMIT_MS})  "
          f"{'met' if help_time < HELP_LIMIT_MS else 'MISSED'}")
    if not args.keep:
        for path in (*logs.values(), workdir / "history.duckdb"):
            path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
