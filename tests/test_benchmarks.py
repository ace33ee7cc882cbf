"""`make bench` (benchmarks/scan_bench.py) on a few MB: it runs from a checkout as a new user
runs it, prints every figure the README's Speed section quotes, and says which goals it met.
The figures themselves are not asserted (a benchmark, not a timed test)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
def test_the_scan_bench_prints_every_figure_the_readme_quotes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "scan_bench.py"), "--size-mb", "3",
         "--backlog-mb", "2", "--runs", "1"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for label in ("serving log, 1 process", "serving log, 2 processes",
                  "crash-loop backlog, 1 process", "crash-loop backlog, 2 processes"):
        block = out.split(label + ",", 1)[1]
        assert re.search(r"logwatch/grep\s+[\d.]+x\s+\(runs [\d. ]+; CPU time", block), label
        assert re.search(r"findings [\d,]+, launches [\d,]+, peak RSS \d+ MiB", block), label
    assert re.search(r"crash-loop backlog with --db: [\d.]+ MB/s, peak RSS \d+ MiB", out)
    targets = out.split("targets:", 1)[1]
    assert len(re.findall(r"\b(?:met|MISSED)$", targets, re.M)) == 9  # 3 ratios, 5 peaks, --help
    # the shared yardstick beside the checkout is used when it is there, and said when not
    shared = (ROOT.parent / "shared" / "perf" / "gen_vllm_log.py").exists()
    assert ("gen_vllm_log.py --size 3M --seed 7" in out) == shared
    assert ("NOTE:" in out) != shared


@pytest.mark.slow
def test_the_live_bench_prints_the_figures_the_readme_quotes() -> None:
    """benchmarks/live_bench.py, as the README's live table runs it, on two seconds: a
    daemon of its own, every finding line committed and timed (`--each`, in order)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "live_bench.py"), "--rates", "2000",
         "--seconds", "2", "--finding-every", "500", "--each"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    row = re.search(r"^\s+2,000\s+([\d,]+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+"
                    r"\s+[\d.]+\s+[\d,]+\s+[\d.]+$", done.stdout, re.M)
    assert row is not None, done.stdout
    assert int(row[2]) >= 6 and "not committed" not in done.stdout  # ~8 findings, all in
    each = done.stdout.split("each, ms:", 1)[1].split()
    assert len(each) == int(row[2]) and all(float(d) > 0 for d in each)


def test_the_preflight_bench_times_a_100_gb_checkpoint_it_builds_from_headers() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "preflight_bench.py"),
                           "--runs", "1"], capture_output=True, text=True, timeout=300,
                          check=False, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.fullmatch(r"preflight of a (\d+) GB checkpoint \(18,867 tensors in 40 shards, "
                         r"headers read\): best [\d.]+ s, median [\d.]+ s of 1 \(goal < 2 s\); "
                         r"a clean start predicted\n", done.stdout)
    assert found is not None, done.stdout
    assert 95 <= int(found.group(1)) <= 110  # the headers describe about 100 GB
