"""Time `logwatch scan` on a realistic large vLLM log against `grep -E` and a plain read.

    python benchmarks/scan_bench.py [--size-mb 1024] [--keep] [--engine auto|python]

Generates the log of a vLLM 0.33 server with MTP on a simulated clock (access lines per
request, some request logs whose prompts quote error fragments as near misses, stats and
SpecDecoding lines every 10 s, a worker traceback every ~15 minutes), then times three whole
processes on
the same file: `cat` (reading alone), `LC_ALL=C grep -c -E -f PATTERNS` with patterns
translated from the signature library, and `logwatch scan --json`. Both scanners must agree on
how many lines match. Prints MB/s, ratios and logwatch's peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from logwatch.library.files import load_signature_dirs  # noqa: E402

CHUNKS = 24
CHUNK_SECONDS = 600
STATS_INTERVAL_S = 10  # VLLM_LOG_STATS_INTERVAL: one stats and one SpecDecoding line each
REQUEST_LOG_SHARE = 0.15  # requests whose prompt the request logger prints
NEAR_MISS_SHARE = 0.0002  # requests whose logged prompt quotes a vLLM error fragment
FAILURE_EVERY_S = 900  # a worker traceback now and then


def _chunk(rng: random.Random, index: int, rps: float) -> str:
    """Ten minutes of a vLLM 0.33 server with MTP at `rps` requests per second."""
    out: list[str] = []
    start = index * CHUNK_SECONDS
    for second in range(start, start + CHUNK_SECONDS):
        mm, ss = divmod(second % 3600, 60)
        ts = f"11-29 {(second // 3600) % 24:02d}:{mm:02d}:{ss:02d}"
        for _ in range(_poisson(rng, rps)):
            if rng.random() < REQUEST_LOG_SHARE:
                out.append(_request_line(rng, ts))
            out.append(f'INFO:     10.0.{rng.randint(0, 9)}.{rng.randint(1, 250)}:'
                       f'{rng.randint(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" '
                       f'{rng.choice((200, 200, 200, 400))} OK')
        if second % STATS_INTERVAL_S == 0:
            out.append(f"(APIServer pid=7001) INFO {ts} [loggers.py:123] Engine 000: Avg prompt "
                       f"throughput: {rng.uniform(100, 3000):.1f} tokens/s, Avg generation "
                       f"throughput: {rng.uniform(100, 1500):.1f} tokens/s, Running: "
                       f"{rng.randint(1, 128)} reqs, Waiting: {rng.randint(0, 60)} reqs, GPU KV "
                       f"cache usage: {rng.uniform(10, 99.9):.1f}%, Prefix cache hit rate: "
                       f"{rng.uniform(0, 90):.1f}%")
            rate = rng.choice((82.4, 79.1, 75.0, 0.0))
            out.append(f"(APIServer pid=7001) INFO {ts} [metrics.py:101] SpecDecoding metrics: "
                       f"Mean acceptance length: 2.41, Accepted throughput: 300.00 tokens/s, "
                       f"Drafted throughput: 400.00 tokens/s, Accepted: 3000 tokens, Drafted: "
                       f"4000 tokens, Per-position acceptance rate: 0.850, 0.650, Avg Draft "
                       f"acceptance rate: {rate}%")
        if rng.random() < 1 / FAILURE_EVERY_S:
            out.extend(_incident(rng, ts))
    return "\n".join(out) + "\n"


def _poisson(rng: random.Random, mean: float) -> int:
    count, total = 0, rng.expovariate(1.0)
    while total < mean:
        count += 1
        total += rng.expovariate(1.0)
    return count


def _request_line(rng: random.Random, ts: str) -> str:
    prompt = (f"Summarise the incident report for ticket {rng.randint(1000, 99999)} in three "
              f"bullet points.")
    if rng.random() < NEAR_MISS_SHARE / REQUEST_LOG_SHARE:
        fragment = rng.choice((
            "size_n = 40 is not divisible by tile_n_size = 64",
            "must match the size of tensor b (512)",
            "CUDA out of memory. Tried to allocate 2.00 GiB",
            "Engine core initialization failed",
        ))
        prompt = f'my logs say "{fragment}" - what now?'
    return (f"(APIServer pid=7001) INFO {ts} [logger.py:40] Received request "
            f"chatcmpl-{rng.getrandbits(64):016x}: prompt: '{prompt}', params: "
            f"SamplingParams(n=1, temperature=0.7, max_tokens=1024).")


def _incident(rng: random.Random, ts: str) -> list[str]:
    h = f"(Worker_TP{rng.randint(0, 3)} pid=9100) ERROR {ts} [multiproc_executor.py:631] "
    last = rng.choice((
        "RuntimeError: size_n = 40 is not divisible by tile_n_size = 64",
        "RuntimeError: The size of tensor a (256) must match the size of tensor b (512) at "
        "non-singleton dimension 1",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 1 has a "
        "total capacity of 79.19 GiB of which 1.02 GiB is free.",
    ))
    return [h + "Traceback (most recent call last):",
            h + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", '
                'line 240, in load_model',
            h + "    self.model_runner.load_model()",
            h + last]


def generate(path: Path, size_mb: int, rps: float) -> None:
    rng = random.Random(20261129)
    chunks = [_chunk(rng, i, rps).encode() for i in range(CHUNKS)]
    target = size_mb << 20
    written = 0
    with open(path, "wb") as out:
        while written < target:
            chunk = chunks[rng.randrange(CHUNKS)]
            out.write(chunk)
            written += len(chunk)


# Python class shorthands in ERE, outside and inside a bracket expression.
_OUTSIDE = {"d": "[0-9]", "w": "[[:alnum:]_]", "s": "[[:space:]]", "S": "[^[:space:]]"}
_INSIDE = {"d": "0-9", "w": "[:alnum:]_", "s": "[:space:]", "n": ""}
# Where a vLLM message starts in a raw line: after the `[file:line] ` tag, a process prefix,
# or uvicorn's `INFO:     `.
_MESSAGE_START = r"(^|\] |\) |:[[:space:]]+)"


def to_ere(pattern: str) -> str | None:
    """A signature regex as POSIX ERE for grep, or None if it spans lines."""
    if r"\n" in pattern.replace(r"[^\n]", ""):
        return None
    p = pattern.split("(?=")[0]  # lookahead captures only refine what the prefix matched
    p = re.sub(r"\(\?P<\w+>", "(", p).replace("(?:", "(").replace(r"[^\n]", ".")
    out: list[str] = []
    i, in_class = 0, False
    while i < len(p):
        ch = p[i]
        if ch == "\\" and i + 1 < len(p):
            nxt = p[i + 1]
            table = _INSIDE if in_class else _OUTSIDE
            if nxt in table:
                out.append(table[nxt])
            elif nxt in "]'`":
                out.append(nxt)
            else:
                out.append(ch + nxt)
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "^":
            ch = _MESSAGE_START
        elif ch == "?" and out and out[-1] in ("*", "+", "?", "}"):
            ch = ""  # lazy quantifiers: the same set of matching lines
        out.append(ch)
        i += 1
    return "".join(out).replace("()", "(x?)")  # ERE has no empty group


def grep_patterns(path: Path) -> int:
    library = load_signature_dirs()
    # the fallback rules (generic.*) hold only under conditions grep cannot express (a
    # header's level, a traceback before the line): they are not part of the baseline
    patterns = [ere for sig in library.signatures if sig.category != "unrecognised"
                for pat in sig.patterns if (ere := to_ere(pat.regex)) is not None]
    path.write_text("\n".join(patterns) + "\n")
    return len(patterns)


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, bytes, int]:
    """Wall seconds, stdout and peak RSS (KiB) of one process.

    Output goes to a file, never into this process: a child's peak RSS counts the memory of
    the parent it was forked from, so the parent must stay small.
    """
    with tempfile.TemporaryFile() as sink:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=sink, env=env)
        _, _, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - started
        proc.returncode = 0
        sink.seek(0)
        out = sink.read(1 << 20)
    return elapsed, out, usage.ru_maxrss


def best_of(runs: int, cmd: list[str], env: dict[str, str] | None = None
            ) -> tuple[float, bytes, int]:
    results = [timed(cmd, env) for _ in range(runs)]
    return min(results, key=lambda r: r[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--rps", type=float, default=20.0,
                        help="requests per second of the simulated server (1: a quiet server "
                             "whose log is mostly stats and SpecDecoding lines, every one a hit)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--engine", default="auto", choices=("auto", "hyperscan", "python"))
    parser.add_argument("--keep", action="store_true", help="keep the generated log")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="logwatch-bench-"))
    log, patterns = workdir / "vllm-bench.log", workdir / "patterns.ere"
    started = time.perf_counter()
    generate(log, args.size_mb, args.rps)
    size_mb = log.stat().st_size / 1e6
    print(f"generated {size_mb:,.0f} MB ({args.rps:g} requests/s) in "
          f"{time.perf_counter() - started:.1f} s: {log}")
    count = grep_patterns(patterns)
    print(f"{count} single-line signature patterns translated to ERE for grep")

    env = {**os.environ, "LC_ALL": "C"}
    cat_s, _, _ = best_of(args.runs, ["sh", "-c", 'cat "$0" | wc -l', str(log)])
    grep_s, grep_out, _ = best_of(args.runs, ["grep", "-c", "-E", "-f", str(patterns),
                                              str(log)], env)
    lw_cmd = [sys.executable, "-m", "logwatch", "scan", "--json", "--engine", args.engine,
              "--mode", "prefilter", str(log)]
    lw_s, lw_out, lw_rss = best_of(args.runs, lw_cmd)
    report = json.loads(lw_out)
    grep_lines = int(grep_out.strip() or 0)
    lw_lines = report["stats"]["matched_lines"]

    def rate(seconds: float) -> str:
        return f"{size_mb / seconds:8.1f} MB/s ({seconds:6.2f} s)"

    print(f"cat (read only)     {rate(cat_s)}")
    print(f"grep -c -E -f       {rate(grep_s)}   matching lines: {grep_lines:,}")
    print(f"logwatch scan       {rate(lw_s)}   matching lines: {lw_lines:,}   "
          f"engine {report['stats']['engine']}, peak RSS {lw_rss / 1024:.0f} MiB")
    print(f"ratio logwatch/grep {grep_s / lw_s:5.2f}x   logwatch/cat {cat_s / lw_s:5.2f}x")
    agree = grep_lines == lw_lines
    print("agreement on matching lines:", "yes" if agree else "NO")
    if not args.keep:
        log.unlink()
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
