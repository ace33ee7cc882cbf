"""Generate a vLLM 0.33 serving log and the grep baseline's patterns from this library: what
scan_bench.py uses where the shared yardstick (../shared/perf) is not beside the checkout.

The realistic mix is a server with MTP on a simulated clock: access lines per request, some
request logs whose prompts quote error fragments as near misses, stats and SpecDecoding lines
every 10 s, a worker traceback every ~15 minutes. `generate(path, mb, rps=1.0,
failure_every_s=20)` is the failure-dense mix earlier benchmarks used: a quiet server failing
every 20 s, about one finding per 1.3 KB, every third of them a multi-line traceback.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from logwatch.core.signatures.fallback import is_generic
from logwatch.library.files import load_signature_dirs

CHUNKS = 24
CHUNK_SECONDS = 600
STATS_INTERVAL_S = 10  # VLLM_LOG_STATS_INTERVAL: one stats and one SpecDecoding line each
REQUEST_LOG_SHARE = 0.15  # requests whose prompt the request logger prints
NEAR_MISS_SHARE = 0.0002  # requests whose logged prompt quotes a vLLM error fragment
FAILURE_EVERY_S = 900  # a worker traceback now and then


def _chunk(rng: random.Random, index: int, rps: float, failure_every_s: float) -> str:
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
        if rng.random() < 1 / failure_every_s:
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


def generate(path: Path, size_mb: float, rps: float,
             failure_every_s: float = FAILURE_EVERY_S) -> None:
    """`size_mb` MiB of log (whole ten-minute chunks, so a little more)."""
    rng = random.Random(20261129)
    chunks = [_chunk(rng, i, rps, failure_every_s).encode() for i in range(CHUNKS)]
    target = int(size_mb * (1 << 20))
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
    # other lookarounds have no ERE form: without them grep matches a superset of the lines
    p = re.sub(r"\(\?<?[=!][^()]*(?:\([^()]*\)[^()]*)*\)", "", p)
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


def grep_patterns(path: Path, library_dir: Path | None = None) -> int:
    """Write the library's single-line patterns as ERE; multi-line ones have no translation."""
    library = load_signature_dirs(base=library_dir)
    # the fallback rules (generic.*) hold only under conditions grep cannot express (a
    # header's level, a traceback before the line): they are not part of the baseline
    patterns = [ere for sig in library.signatures if not is_generic(sig)
                for pat in sig.patterns if (ere := to_ere(pat.regex)) is not None]
    path.write_text("\n".join(patterns) + "\n")
    return len(patterns)

