"""What a catastrophic signature costs: one regex timeout, one record, one library load.

    python benchmarks/match_budget.py [--busy N] [--repeat 20] [--tree DIR]

Prints, in milliseconds of wall clock and of CPU time:
- one `regex` search with timeout=50 ms on patterns that backtrack catastrophically (`regex`
  counts its timeout in process CPU time, so the wall clock overshoots by the share of a core
  the process does not get; `--busy N` starts N spinning processes to show it);
- one record through Matcher.match_record with 1, 2 and 200 signatures whose patterns run
  over on it (each pattern used to get 50 ms of its own; now the record has one budget);
- loading the shipped library in this process, through the bounded child process, and as
  texts that passed before (the vetted cache, kept in a temp dir here).
`--tree DIR` measures another checkout (e.g. an export of an older commit) for comparison.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

PATTERNS = [
    (r"(a|aa)+$", "a" * 60 + "b"),
    (r"(?i)(a|aa)+$", "A" * 60 + "b"),
    (r"(?=(a|aa)+$)", "a" * 60 + "b"),
    (r"(?:abcdefghijklmnop){e<=10}", "x" * 2000),
]


def _spin() -> None:
    while True:
        pass


def _figures(samples: list[tuple[float, float]]) -> str:
    walls = sorted(w * 1000 for w, _ in samples)
    cpus = sorted(c * 1000 for _, c in samples)
    return (f"wall median {statistics.median(walls):6.1f} max {walls[-1]:6.1f} | "
            f"cpu median {statistics.median(cpus):6.1f} max {cpus[-1]:6.1f}")


def _timed(call: Any, repeat: int) -> list[tuple[float, float]]:
    samples = []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.thread_time()
        call()
        samples.append((time.perf_counter() - wall, time.thread_time() - cpu))
    return samples


def single_search(repeat: int) -> None:
    import regex

    print("one regex search, timeout=50 ms (ms):")
    for pattern, text in PATTERNS:
        compiled = regex.compile(pattern)

        def search(compiled: Any = compiled, text: str = text) -> None:
            with contextlib.suppress(TimeoutError):
                compiled.search(text, timeout=0.05)

        print(f"  {pattern:30} {_figures(_timed(search, repeat))}")


def one_record(repeat: int) -> None:
    from logwatch.core.lines.assemble import assemble
    from logwatch.core.lines.vllm_format import parse_line
    from logwatch.core.signatures.matcher import Matcher
    from logwatch.core.signatures.signature import Example, Pattern, Signature

    def evil(n: int, patterns: int = 1) -> Signature:
        return Signature(
            id=f"site.evil{n}", version=1, status="experimental", severity="error",
            fatal=False, category="cuda_error", title="evil",
            patterns=tuple(Pattern(rf"^boom(a|aa)+{'!' * k}$", ("boom",))
                           for k in range(patterns)),
            explanation="", remedy="investigate", examples=(Example("boom"),),
            counter_examples=(Example("x"),))

    (record,) = assemble([parse_line("t", 1, "boom" + "a" * 60 + "?", datetime(2026, 1, 1))])
    print("one record through Matcher.match_record (ms):")
    for label, signatures in [("1 signature, 1 pattern", [evil(0)]),
                              ("1 signature, 2 patterns", [evil(0, 2)]),
                              ("3 signatures", [evil(n) for n in range(3)]),
                              ("200 signatures", [evil(n) for n in range(200)])]:
        try:
            matcher = Matcher(signatures, engine="python", disable_after=None)
        except TypeError:  # an older Matcher: it never disables
            matcher = Matcher(signatures, engine="python")
        runs = max(1, repeat // len(signatures)) if len(signatures) > 3 else repeat
        samples = _timed(lambda m=matcher: m.match_record(record), runs)
        print(f"  {label:30} {_figures(samples)}  "
              f"(timeouts {sum(matcher.timeouts.values())} in {runs} runs)")


def library_load(repeat: int) -> None:
    from logwatch.library.files import load_signature_dirs

    print("loading the shipped library (ms):")
    print(f"  {'in this process':30} {_figures(_timed(load_signature_dirs, repeat))}")
    try:
        from logwatch.library.vetted import VettedCache
        from logwatch.library.worker import load_bounded
    except ImportError:
        return
    with tempfile.TemporaryDirectory() as cold, tempfile.TemporaryDirectory() as warm:
        load_bounded(cache=VettedCache(Path(warm)))

        def unvetted() -> None:
            shutil.rmtree(cold, ignore_errors=True)
            load_bounded(cache=VettedCache(Path(cold)))

        # the child's CPU time is not this thread's: compare the wall clock
        print(f"  {'bounded, in a child':30} {_figures(_timed(unvetted, repeat))}")
        print(f"  {'bounded, vetted before':30} "
              f"{_figures(_timed(lambda: load_bounded(cache=VettedCache(Path(warm))), repeat))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=0, help="spinning processes meanwhile")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to measure")
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree))
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for spinner in spinners:
        spinner.start()
    try:
        print(f"tree {args.tree}, {args.busy} spinning process(es), "
              f"{multiprocessing.cpu_count()} CPUs")
        single_search(args.repeat)
        one_record(args.repeat)
        library_load(max(3, args.repeat // 4))
    finally:
        for spinner in spinners:
            spinner.kill()


if __name__ == "__main__":
    main()
