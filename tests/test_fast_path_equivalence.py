"""The prefiltered scan's fast paths give what the straightforward per-line pipeline gives.

A generated failure-dense log (interleaved worker tracebacks, raw stderr copies, same-second
bursts of one header, ERROR and CRITICAL records known by their level alone, every sample log's
formats) is scanned both ways, in blocks cut so that hits and tracebacks straddle block
boundaries: same findings, line numbers, record spans and captures, and the same incidents in
the report.
"""

from __future__ import annotations

import io
import random
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.lines.buffer_lines import REWRITTEN
from logwatch.core.signatures import prefilter
from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.library import Library
from logwatch.scan.blocks import read_blocks
from logwatch.scan.offline import resolve_inputs, scan_inputs
from tests.conftest import SAMPLES, roomy_matcher

REF = datetime(2026, 11, 30)
ENGINE = "hyperscan" if prefilter._hs is not None else "python"
ERRORS = (
    "RuntimeError: size_n = 40 is not divisible by tile_n_size = 64",
    "RuntimeError: The size of tensor a (256) must match the size of tensor b (512) at "
    "non-singleton dimension 1",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 1 has a "
    "total capacity of 79.19 GiB of which 1.02 GiB is free.",
)


def _traceback(rng: random.Random, ts: str, ranks: int) -> list[str]:
    """`ranks` workers printing one traceback each at once, their lines interleaved."""
    per_rank = []
    error = rng.choice(ERRORS)
    for rank in range(ranks):
        head = f"(Worker_TP{rank} pid={9100 + rank}) ERROR {ts} [multiproc_executor.py:631] "
        body = ["Traceback (most recent call last):",
                '  File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", '
                "line 240, in load_model",
                "    self.model_runner.load_model(**kwargs)",
                "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"]
        if rng.random() < 0.3:
            body += ["ValueError: inner", "",
                     "The above exception was the direct cause of the following exception:",
                     "", "Traceback (most recent call last):", '  File "<frozen runpy>", line 1']
        lines = [head + text for text in [*body, error]]
        if rng.random() < 0.2:  # the same writer logs elsewhere meanwhile: that splits it
            lines.insert(rng.randint(1, len(lines) - 1),
                         f"(Worker_TP{rank} pid={9100 + rank}) WARNING {ts} [other.py:5] "
                         f"{rng.choice(('  indented note', 'Traceback (most recent call last):'))}")
        if rng.random() < 0.1:  # one line with a prefix before its header
            at = rng.randrange(len(lines))
            lines[at] = "2026-11-29T10:00:00.000000000Z stdout F " + lines[at]
        per_rank.append(lines)
    out = []
    while any(per_rank):
        lines = rng.choice([p for p in per_rank if p])
        out.append(lines.pop(0))
    if rng.random() < 0.3:  # the same traceback again as a raw stderr copy
        out += ["Traceback (most recent call last):", '  File "x.py", line 3, in f',
                "    g()", error]
    return out


def _level_only_errors(rng: random.Random, ts: str) -> list[str]:
    """ERROR and CRITICAL records whose words say nothing of an error: only the header's
    level, which the prefilter reads in the raw line and the matcher in the parsed one."""
    level = rng.choice(("ERROR", "CRITICAL"))
    head = f"(APIServer pid=7001) {level} {ts} [frob.py:{rng.randint(1, 3)}] "
    lines = [head + f"Zorblax planner gave up on shard {rng.randint(0, 7)}"]
    if rng.random() < 0.5:  # a multi-line record: indented lines under the same header
        lines[0] += ":"
        lines += [head + f"  shard {n} still frobbed" for n in range(rng.randint(1, 3))]
    if rng.random() < 0.3:  # ... or indented lines of the unprefixed stream
        lines += [f"    zorblax slot {n}" for n in range(rng.randint(1, 3))]
    return lines


def _request_lines(rng: random.Random, ts: str) -> list[str]:
    """A serving vLLM's request lines (core.lines.benign passes most over unread), prompts
    quoting errors, and the look-alikes it must not pass over: an abort logged as an error,
    one with a space in its id, one under a container's prefix, and a continuation line."""
    rid = f"chatcmpl-{rng.getrandbits(64):016x}"
    api = "(APIServer pid=7001)"
    quoted = rng.choice((*ERRORS, "Traceback (most recent call last):", "Aborted",
                         "Engine core initialization failed."))
    lines = [f"{api} INFO {ts} [logger.py:39] Received request {rid}: prompt: 'why {quoted}"
             f"', params: SamplingParams(n=1), lora_request: None.",
             f"{api} INFO {ts} [async_llm.py:345] Added request {rid}.",
             f"{api} DEBUG {ts} [logger.py:71] Generated response {rid}: output: '{quoted}'",
             f"{api} INFO {ts} [async_llm.py:345] Aborted request {rid}."]
    odd = rng.random()
    if odd < 0.1:
        lines.append(f"{api} ERROR {ts} [async_llm.py:345] Aborted request {rid}.")
    elif odd < 0.2:
        lines.append(f"{api} INFO {ts} [async_llm.py:345] Aborted request(s) {rid},{rid}x.")
    elif odd < 0.3:
        lines.append(f"{api} INFO {ts} [async_llm.py:345] Aborted request {rid} failed.")
    elif odd < 0.4:
        lines.append(f"vllm-1  | {api} INFO {ts} [async_llm.py:345] Aborted request {rid}.")
    elif odd < 0.5:
        lines.append(f"{api} INFO {ts} [async_llm.py:345]   Aborted request {rid}.")
    return lines if rng.random() < 0.5 else []


def _unprefixed_lines(rng: random.Random, ts: str) -> list[str]:
    """Now and then a line of the unprefixed writer (uvicorn's, a raw traceback's), with
    what may join it many lines later, and lines that look prefixed but are not a process's
    to parse_line (block_scan reads only the unprefixed writer's lines around such a hit)."""
    odd = rng.random()
    if odd < 0.03:
        return ["INFO:     Finished server process [7]"]
    if odd < 0.05:
        return ["  indented: goes on with the unprefixed record before it"]
    if odd < 0.06:
        return [f"({'N' * 90} pid=3) ERROR {ts} [core.py:1] RuntimeError: long name"]
    if odd < 0.07:
        return ["(Api Server pid=3) RuntimeError: a name with a space"]
    if odd < 0.08:
        return ["(APIServer pid=3)RuntimeError: no space after the prefix"]
    if odd < 0.09:
        return ["Traceback (most recent call last):", '  File "/x.py", line 1, in f',
                "RuntimeError: raw"]
    if odd < 0.1:  # a terminal shows what follows the carriage return: unprefixed
        return [f"(APIServer pid=3) INFO {ts} [a.py:1] 10%\r  indented after a progress bar"]
    return []


def generated_log(seed: int, events: int) -> bytes:
    rng = random.Random(seed)
    requests = random.Random(-seed)  # its own: the rest is laid out as it was without them
    unprefixed = random.Random(seed + 1000)
    # each sample once: a copy of one repeats its headers, and the full pipeline joins a
    # logger record across any distance to the next line with its exact header
    samples = [p.read_text() for p in sorted(SAMPLES.glob("*.log"))
               if "hard_wrapped" not in p.name]
    rng.shuffle(samples)
    out: list[str] = []
    for second in range(events):
        ts = f"11-29 10:{second // 60 % 60:02d}:{second % 60:02d}"
        out += [f'INFO:     10.0.0.{rng.randint(1, 9)}:4000 - "POST /v1/chat/completions '
                f'HTTP/1.1" 200 OK'] * rng.randint(0, 6)
        out += _request_lines(requests, ts)
        out += _unprefixed_lines(unprefixed, ts)
        kind = rng.random()
        if kind < 0.4:  # a burst of one header: the joining check's hard case
            for _ in range(rng.randint(1, 5)):
                out.append(f"(APIServer pid=7001) INFO {ts} [metrics.py:101] SpecDecoding "
                           f"metrics: Mean acceptance length: 1.10, Accepted: 1 tokens, "
                           f"Drafted: 9 tokens, Avg Draft acceptance rate: "
                           f"{rng.choice((5.5, 75.0, 0.0))}%")
            if rng.random() < 0.2:
                out.append(f"(APIServer pid=7001) INFO {ts} [metrics.py:101]   (continued)")
        elif kind < 0.75:
            out += _traceback(rng, ts, rng.choice((1, 1, 2, 4, 8)))
        elif kind < 0.85 and samples:
            out += samples.pop().splitlines()
        elif kind < 0.92:
            out.append(f"(EngineCore_DP0 pid=8000) ERROR {ts} [core.py:700] EngineCore "
                       f"failed to start.")
        else:
            out += _level_only_errors(rng, ts)
    return ("\n".join(out) + "\n").encode()


def spans(data: bytes, library: Library, block: int, full: bool
          ) -> list[tuple[str, int, int, int, dict[str, str]]]:
    matcher = roomy_matcher(library, ENGINE)
    scanner = BlockScanner(matcher, "t", REF, full=full)
    found = [f for chunk in read_blocks(io.BytesIO(data), block_bytes=block)
             for f in scanner.feed(chunk)] + scanner.finish()
    assert not matcher.timeouts
    return [(f.signature.id, f.lineno, f.record_lineno, f.record_last_lineno, f.captures)
            for f in found]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_fast_paths_equal_the_full_pipeline_across_block_boundaries(library: Library,
                                                                    seed: int) -> None:
    data = generated_log(seed, 400)
    reference = spans(data, library, 8 << 20, full=True)
    assert len(reference) > 300
    assert any(f[3] - f[2] >= 4 for f in reference)  # multi-line records among them
    level_only = [f for f in reference if f[4].get("message", "").startswith("Zorblax")]
    assert any(f[3] > f[2] for f in level_only) and any(f[3] == f[2] for f in level_only)
    for block in (1009, 4096, 65536):  # blocks a traceback's lines straddle
        assert spans(data, library, block, full=False) == reference, block


@pytest.mark.parametrize("between", [
    f"({'N' * 90} pid=3) ERROR 11-29 10:00:01 [core.py:1] a name longer than a process's",
    "(Api Server pid=3) a name with a space",
    "(APIServer pid=3) INFO 11-29 10:00:01 [a.py:1] 10%\rwhat a terminal shows after it",
])
def test_a_line_that_only_looks_like_another_process_s_still_ends_a_raw_record(
        library: Library, between: str) -> None:
    """Around a hit in the unprefixed writer's record, block_scan reads only lines that may
    be that writer's: a line that starts like a process's prefix but is not one to
    parse_line (or that a carriage return turns into another) is read all the same, and
    here it ends the traceback before it."""
    stats = [f"(APIServer pid=3) INFO 11-29 10:00:0{i} [a.py:1] Avg prompt throughput: 1.0 "
             "tokens/s, Avg generation throughput: 2.0 tokens/s" for i in range(5)]
    body = ["Traceback (most recent call last):", '  File "/x.py", line 1, in f', *stats,
            between, *stats, '  File "/z.py", line 3, in h',
            "RuntimeError: CUDA error: an illegal memory access was encountered"]
    data = ("\n".join(body) + "\n").encode()
    reference = spans(data, library, 1 << 20, full=True)
    assert ("distributed.cuda_error", 15, 14, 15) in [f[:4] for f in reference]
    for block in (97, 1 << 20):
        assert spans(data, library, block, full=False) == reference


def test_a_writer_s_line_that_unwrapping_rewrites_still_ends_its_record(
        library: Library) -> None:
    """Around a hit in a prefixed writer's record, block_scan leaves out lines without the
    writer's name and pid: one that holds them only once its colour codes are stripped is
    read all the same, though a dict elsewhere in the window is nothing unwrapping reads."""
    proc = "(EngineCore_DP0 pid=8) "
    stats = [f"(APIServer pid=3) INFO 11-29 10:00:0{i} [a.py:1] non-default args: "
             "{'model': 'm'}" for i in range(5)]
    body = [f"{proc}Traceback (most recent call last):", f'{proc}  File "/x.py", line 1, in f',
            *stats, "(EngineCore_DP0 pi\x1b[0md=8) a line of its own between", *stats,
            f'{proc}  File "/z.py", line 3, in h',
            f"{proc}RuntimeError: CUDA error: an illegal memory access was encountered"]
    data = ("\n".join(body) + "\n").encode()
    reference = spans(data, library, 1 << 20, full=True)
    assert ("distributed.cuda_error", 15, 14, 15) in [f[:4] for f in reference]
    for block in (97, 1 << 20):
        assert spans(data, library, block, full=False) == reference


@pytest.mark.slow
def test_fast_paths_give_the_same_incidents(library: Library, tmp_path: Path) -> None:
    log = tmp_path / "dense.log"
    log.write_bytes(generated_log(3, 300))
    inputs = resolve_inputs([str(log)])
    full = scan_inputs(inputs, library, engine=ENGINE, mode="full")
    fast = scan_inputs(inputs, library, engine=ENGINE, mode="prefilter")
    assert full["incidents"]
    assert fast["incidents"] == full["incidents"]
    assert fast["launches"] == full["launches"]


@pytest.mark.slow
@pytest.mark.parametrize("share", [None, 0.3])
def test_two_processes_report_what_one_does(library: Library, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            share: float | None) -> None:
    """A file cut in two for two processes: the same report as one process gives, wherever
    the cut falls (each half reads on past it as far as a record reaches): where the first
    part's timing puts it, or as early as it may fall."""
    from logwatch.core.signatures import block_scan
    from logwatch.scan import parallel

    # a scanner that looks less far, so that a small file holds records near the cut
    monkeypatch.setattr(block_scan, "CONTEXT_BEFORE", 20)
    monkeypatch.setattr(block_scan, "CONTEXT_AFTER", 20)
    monkeypatch.setattr(block_scan, "HEADER_SEARCH_BYTES", 2048)
    monkeypatch.setattr(parallel, "REACH_LINES", 4 * (20 + 20))
    monkeypatch.setattr(parallel, "REACH_BYTES", 8 * 2048)
    monkeypatch.setattr(parallel, "SPLIT_MIN_BYTES", 0)
    merged = []  # the parent takes in the child's half: a scan that was split
    merge_second = parallel._merge_second

    def merging(*args: Any) -> Any:
        merged.append(1)
        return merge_second(*args)

    monkeypatch.setattr(parallel, "_merge_second", merging)
    if share is not None:
        monkeypatch.setattr(parallel, "first_share", lambda *_: share)
    log = tmp_path / "dense.log"
    for seed in (4, 5, 6):
        log.write_bytes(generated_log(seed, 400))
        inputs = resolve_inputs([str(log)])
        # roomy matchers: a record that ran over its budget on a busy machine (a forked
        # child's first pages cost CPU time too) differs by design, and is not the question
        matchers = roomy_matcher(library, ENGINE), roomy_matcher(library, ENGINE)
        one = scan_inputs(inputs, library, mode="prefilter", jobs=1, matcher=matchers[0])
        two = scan_inputs(inputs, library, mode="prefilter", jobs=2, matcher=matchers[1])
        assert not matchers[0].timeouts and not matchers[1].timeouts
        assert one["incidents"]
        for key in ("launches", "incidents", "diagnoses", "root_cause"):
            assert two[key] == one[key], (seed, key)
        for key in ("lines", "bytes", "findings", "matched_lines"):
            assert two["stats"][key] == one["stats"][key], (seed, key)
    assert len(merged) == 3


@pytest.mark.parametrize("text", [
    "\x1b[31mred", "a\\nb", "a\rb", "{'json': 1}", "`code`", "^[[31m", "x [0;31m red",
    "[1m", "**bold**", "&lt;x&gt;", "&#39;", "&amp;", "<font color=red>", "</span>",
    "<b>", "<STRONG>x"])
def test_every_rewriting_trigger_makes_a_window_not_plain(text: str) -> None:
    """The writer-token shortcut is only taken where unwrapping rewrites nothing."""
    assert REWRITTEN.search(f"(X pid=1) INFO 11-29 03:40:30 [a.py:1] {text}\n".encode())


@pytest.mark.parametrize("text", [
    "(X pid=1) INFO 11-29 03:40:30 [a.py:1] size [4, 5] *x & y < z^2 [12]",
    "INFO:     10.0.0.1:5 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK", "[m]", "a*b",
    "&nbsp;", "<bold>", "x[0;31]"])
def test_ordinary_lines_are_plain(text: str) -> None:
    assert REWRITTEN.search(text.encode()) is None


def test_a_finding_crosses_between_processes_whole(library: Library) -> None:
    """`--jobs 2` sends the second half's findings as tuples of plain values: each comes
    back equal, its matched line the same line of its record, its signature the parent's."""
    import pickle

    from logwatch.scan.parallel import _flat, _unflat

    data = generated_log(7, 60)
    scanner = BlockScanner(roomy_matcher(library, ENGINE), "t", REF)
    found = scanner.feed(data) + scanner.finish()
    assert any(f.matched is not f.record.lines[0] for f in found)  # some match a later line
    signatures = library.by_id()  # placed signatures (core.signatures.placed) too
    flats = pickle.loads(pickle.dumps([_flat(f) for f in found], pickle.HIGHEST_PROTOCOL))
    back = [_unflat(flat, signatures, 0) for flat in flats]
    assert back == found
    # the child numbers its lines from its lead-in: moved on, every line number moves
    moved = [_unflat(flat, signatures, 1000) for flat in flats]
    for old, new in zip(found, moved, strict=True):
        assert (new.lineno, new.record_lineno, new.record_last_lineno) == (
            old.lineno + 1000, old.record_lineno + 1000, old.record_last_lineno + 1000)
        assert [ln.lineno for ln in new.record.lines] == [
            ln.lineno + 1000 for ln in old.record.lines]
        assert new.matched.lineno == old.matched.lineno + 1000
    for old, new in zip(found, back, strict=True):
        assert new.signature is signatures[old.signature.id]
        assert new.record.lines.index(new.matched) == old.record.lines.index(old.matched)
        assert new.evidence == old.evidence


# What decides whether a line joins the record before it without a logger header
# (assemble._continues): a traceback's head, "Process X:", chain markers, blank lines, lines
# ending in ":", frames, exception lines, torch's trailers. (Not pydantic's ValidationError
# head: every line after it joins until its error text ends.)
JOIN_GRAMMAR = (
    "Traceback (most recent call last):",
    '  File "/x/vllm/worker.py", line 240, in load_model',
    "    self.model_runner.load_model()",
    "RuntimeError: size_n = 40 is not divisible by tile_n_size = 64",
    "",
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
    "Process EngineCore_DP0:",
    "INFO:     Finished server process [51000]",
    "Exception in thread loader:",
    "  Value error, max_num_batched_tokens (8) is smaller than max_model_len (64) "
    "[type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",
    "frame #0: c10::Error::Error(c10::SourceLocation)",
    "ValueError: The checkpoint you are trying to load has model type `deepseek_v3`",
    "loading weights",
    "INFO 10-14 10:00:00 [loader.py:1] loading shard",
    "ERROR 10-14 10:00:00 [core.py:1] EngineCore failed to start.",
)


@pytest.mark.parametrize("seed", range(24))
def test_lines_without_a_header_join_as_the_full_pipeline_joins_them(library: Library,
                                                                     seed: int) -> None:
    """Random lines of that grammar from two writers (unprefixed and one process prefix),
    and tracebacks after a line of it and blank lines, with other processes' lines and
    stretches of traffic between: every record the fast paths settle (a
    line nothing can join, a traceback that opens a record) is the full pipeline's."""
    rng = random.Random(seed)
    lines: list[str] = []

    def other_process() -> None:  # another process between: what joins may be lines back
        if rng.random() < 0.4:
            lines.extend(["(Worker pid=9) INFO 10-14 10:00:00 [worker.py:1] step"]
                         * rng.randint(1, 8))

    for _ in range(300):
        if rng.random() < 0.03:
            lines += ['INFO:     10.0.0.1:4000 - "GET /health HTTP/1.1" 200 OK'] * rng.choice(
                (5, 30, 90))
        writer = rng.choice(("", "(APIServer pid=7) "))
        if rng.random() < 0.5:
            lines.append(writer + rng.choice(JOIN_GRAMMAR))
            other_process()
            continue
        # a line that may open the way for a traceback, blank lines, then the traceback
        lines.append(writer + rng.choice(JOIN_GRAMMAR[4:]))
        for _ in range(rng.choice((0, 0, 1, 3, 6))):
            lines.append(writer)
            other_process()
        for text in JOIN_GRAMMAR[:4]:
            lines.append(writer + text)
            other_process()
    data = ("\n".join(lines) + "\n").encode()
    # a record longer than the context kept around a hit (200 lines each way; chained
    # tracebacks with blank lines between grow so) is cut there by design: left out
    long = {f[:2] for f in spans(data, library, 8 << 20, full=True) if f[3] - f[2] > 150}
    reference = [f for f in spans(data, library, 8 << 20, full=True) if f[:2] not in long]
    assert len(reference) > 50 and len(long) < len(reference) / 4
    for block in (997, 65536):
        fast = [f for f in spans(data, library, block, full=False) if f[:2] not in long]
        assert fast == reference, block



def test_the_cut_leaves_the_process_that_records_the_smaller_half() -> None:
    """first_share: the process that also takes in every finding scans less of the file,
    the denser its findings; never less than 10%, never more than half."""
    from logwatch.scan.parallel import FINDINGS_PER_MB_AT_PAR, first_share

    assert first_share(0, 8_000_000) == 0.5 and first_share(5, 0) == 0.5
    assert first_share(4 * FINDINGS_PER_MB_AT_PAR, 8_000_000) == pytest.approx(1 / 4)
    assert first_share(8 * FINDINGS_PER_MB_AT_PAR, 8_000_000) == 0.1  # taking in is slower
    assert first_share(10**6, 8_000_000) == 0.1
    assert 0.49 < first_share(5, 8_000_000) < 0.5  # a serving log: a finding a MB or so
    assert first_share(1000, 8_000_000) > first_share(2000, 8_000_000)


def test_two_processes_count_each_match_timeout_once(library: Library, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Patterns that ran over their budget in the part scanned before the child was forked
    are counted once, as one process counts them (the child came with a copy of the
    count, and the parent adds what the child sends)."""
    from logwatch.core.signatures import matcher as matcher_module
    from logwatch.scan import parallel

    search = matcher_module._search_within

    def running_over(compiled: Any, message: str, start: int, budget: list[float]) -> Any:
        if "RUNS-OVER" in message:
            raise TimeoutError("a pattern that ran over its budget")
        return search(compiled, message, start, budget)

    monkeypatch.setattr(matcher_module, "_search_within", running_over)
    monkeypatch.setattr(parallel, "SPLIT_MIN_BYTES", 0)
    lines = [f"(APIServer pid=7) INFO 11-29 10:00:00 [a.py:1] step {i} " + "x" * 40
             for i in range(40_000)]
    for i in (10, 20, 30):  # in the first part, scanned before the fork
        lines[i] = ("RuntimeError: CUDA error: an illegal memory access was encountered "
                    "RUNS-OVER")
    log = tmp_path / "slow.log"
    log.write_text("\n".join(lines) + "\n")
    inputs = resolve_inputs([str(log)])
    one = scan_inputs(inputs, library, mode="prefilter", jobs=1,
                      matcher=roomy_matcher(library, ENGINE))
    two = scan_inputs(inputs, library, mode="prefilter", jobs=2,
                      matcher=roomy_matcher(library, ENGINE))
    assert one["stats"]["match_timeouts"]
    assert two["stats"]["match_timeouts"] == one["stats"]["match_timeouts"]


def test_a_file_with_no_line_end_to_cut_at_is_scanned_by_one_process(
        library: Library, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No newline near the middle (a 4 MB line there): the split is given up before anything
    is read, and the caller scans the file alone, with everything it reports (the fault
    of logwatch's on one record is told, as with --jobs 1)."""
    from logwatch.core.signatures import block_scan
    from logwatch.scan import parallel

    settle = block_scan.BlockScanner._settle_hit

    def failing(self: Any, lines: Any, hit: Any, forced: Any, literals: Any) -> Any:
        if "BREAKS-THE-SCANNER" in lines.get(hit[0], hit).raw:
            raise ValueError("a fault of logwatch's")
        return settle(self, lines, hit, forced, literals)

    monkeypatch.setattr(block_scan.BlockScanner, "_settle_hit", failing)
    monkeypatch.setattr(parallel, "SPLIT_MIN_BYTES", 0)
    log = tmp_path / "long-line.log"
    log.write_text("RuntimeError: CUDA error: an illegal memory access was encountered "
                   "BREAKS-THE-SCANNER\n" + "hello\n" * 40_000 + "y" * 4_000_000 + "\n")
    inputs = resolve_inputs([str(log)])
    reports = [scan_inputs(inputs, library, mode="prefilter", jobs=jobs,
                           matcher=roomy_matcher(library, ENGINE)) for jobs in (1, 2)]
    assert reports[0]["scan_faults"] and reports[1]["scan_faults"] == reports[0]["scan_faults"]


def _coloured(rng: random.Random, process: str, level: str, ts: str, tag: str,
              message: str) -> str:
    """A logger line as vLLM's colour formatter prints it, or with its colour in another
    form (a remnant without the escape, the caret form, escaped in JSON); some behind docker
    compose's prefix. (Not plain: a plain line's neighbourhood is searched for its header
    in raw bytes, where a coloured line under it does not show it. That gap is older than
    the coloured path, and a logger prints all its lines coloured or none.)"""
    form = rng.choice(("esc", "esc", "esc", "remnant", "caret", "json", "odd"))
    esc = {"esc": "\x1b", "remnant": "", "caret": "^[", "json": "\\u001b", "odd": "\x1b"}[form]
    if form == "odd":  # the escape of another terminal sequence in the header
        line = f"\x1b[0;36m{process}\x1b[0;0m \x1b[K{level} {ts} {tag} {message}"
    else:
        line = (f"{esc}[0;36m{process}{esc}[0;0m {esc}[32m{level}{esc}[0m {esc}[90m{ts}"
                f"{esc}[0m {esc}[90m{tag}{esc}[0m {message}")
    if form == "json":
        line = '{"log": "' + line.replace('"', '\\"') + '\\n", "stream": "stderr"}'
    if rng.random() < 0.5:
        line = f"vllm1-1  | 2026-05-12T08:01:{rng.randint(10, 59)}.12Z " + line
    return line


@pytest.mark.parametrize("seed", range(16))
def test_coloured_logger_lines_join_as_the_full_pipeline_joins_them(library: Library,
                                                                   seed: int) -> None:
    """Coloured logger lines (docker compose with a terminal): a line is found alone, or
    its record's edges, from its neighbourhood read without colour codes, where all colour
    there is whole escape codes; the same findings as the per-line pipeline whatever the
    forms mixed around it, lines under the same header among them."""
    rng = random.Random(seed)
    messages = (*ERRORS, "  an indented line under the same header",
                "Traceback (most recent call last):", '  File "/x/vllm/worker.py", line 1',
                "SpecDecoding metrics: Mean acceptance length: 1.10, Accepted: 1 tokens, "
                "Drafted: 9 tokens, Avg Draft acceptance rate: 5.5%", "loading weights")
    lines: list[str] = []
    for _ in range(400):
        process = rng.choice(("(APIServer pid=1)", "(EngineCore_DP0 pid=2)"))
        header = (process, rng.choice(("INFO", "ERROR")), f"05-12 08:01:0{rng.randint(0, 2)}",
                  rng.choice(("[core.py:74]", "[api_server.py:1896]")))
        for _ in range(rng.choice((1, 1, 2, 4))):  # lines under one header: one record
            lines.append(_coloured(rng, *header, rng.choice(messages)))
        if rng.random() < 0.1:
            lines += ['INFO:     10.0.0.1:4000 - "GET /health HTTP/1.1" 200 OK'] * 40
    data = ("\n".join(lines) + "\n").encode()
    reference = spans(data, library, 8 << 20, full=True)
    assert len(reference) > 50
    for block in (1009, 65536):
        assert spans(data, library, block, full=False) == reference, block


_HEADER = "(APIServer pid=1) ERROR 05-12 08:01:01 [core.py:74] "
_SIBLINGS = {  # a line under the same header that joins, its colour shown otherwise
    "esc": "\x1b[0;36m(APIServer pid=1)\x1b[0;0m \x1b[31mERROR\x1b[0m \x1b[90m05-12 08:01:01"
           "\x1b[0m \x1b[90m[core.py:74]\x1b[0m   indented",
    "remnant": "[0;36m(APIServer pid=1)[0;0m [31mERROR[0m [90m05-12 08:01:01[0m "
               "[90m[core.py:74][0m   indented",
    "caret": "^[[0;36m(APIServer pid=1)^[[0;0m ERROR 05-12 08:01:01 [core.py:74]   indented",
    "caret before a word": "(APIServer pid=1) ^[[mERROR 05-12 08:01:01 [core.py:74]   x",
    "escaped in JSON": '{"log": "\\u001b[0;36m(APIServer pid=1)\\u001b[0;0m ERROR 05-12 '
                       '08:01:01 [core.py:74]   indented\\n"}',
    "another sequence in JSON": '{"log": "(APIServer pid=1) \\u001b[KERROR 05-12 08:01:01 '
                                '[core.py:74]   x\\n"}',
    "a tab in JSON": '{"log": "' + _HEADER + '\\tindented\\n"}',
    "another escape": "\x1b[0;36m(APIServer pid=1)\x1b[0;0m \x1b[KERROR 05-12 08:01:01 "
                      "[core.py:74]   indented",
    "a remnant a code leaves": "(APIServer pid=1) ERROR 05-12 08:01:01 [\x1b[0m90m[core.py:74]"
                               "   x",
    "HTML": "<span>(APIServer pid=1)</span> ERROR 05-12 08:01:01 [core.py:74]   indented",
}


@pytest.mark.parametrize("form", list(_SIBLINGS))
def test_a_coloured_line_is_not_alone_when_a_sibling_shows_its_colour_otherwise(
        library: Library, form: str) -> None:
    """A coloured line, then a line under its header that would join it, its colour (or
    its header) written in another form: its record is both lines, as the per-line
    pipeline makes it. Read only without escape codes, such a sibling would not show the
    header, and the coloured line would be taken for a record of its own."""
    coloured = ("\x1b[0;36m(APIServer pid=1)\x1b[0;0m \x1b[31mERROR\x1b[0m \x1b[90m05-12 "
                f"08:01:01\x1b[0m \x1b[90m[core.py:74]\x1b[0m {ERRORS[0]}")
    data = ("\n".join(["before"] * 5 + [coloured, _SIBLINGS[form]] + ["after"] * 5)
            + "\n").encode()
    reference = spans(data, library, 65536, full=True)
    assert [f[2:4] for f in reference] == [(6, 7)]
    for block in (97, 65536):
        assert spans(data, library, block, full=False) == reference


def test_a_coloured_line_with_colour_otherwise_in_its_own_header_takes_the_full_path(
        library: Library) -> None:
    """The caret form before a word in the coloured line's own header: its header is not
    read without colour, and its record is both lines."""
    coloured = ("\x1b[0;36m(APIServer pid=1)\x1b[0;0m ^[[mERROR \x1b[90m05-12 08:01:01\x1b[0m "
                f"\x1b[90m[core.py:74]\x1b[0m {ERRORS[0]}")
    data = ("\n".join([coloured, _HEADER + "  indented"]) + "\n").encode()
    reference = spans(data, library, 65536, full=True)
    assert [f[2:4] for f in reference] == [(1, 2)]
    assert spans(data, library, 65536, full=False) == reference


@pytest.mark.parametrize("coloured", [False, True])
@pytest.mark.parametrize("long", ["the hit line", "a line under its header", "the first line"])
def test_a_long_line_does_not_push_its_record_s_next_line_out_of_reach(
        library: Library, coloured: bool, long: str) -> None:
    """A logger record's lines repeat its header within HEADER_SEARCH_BYTES of each other:
    that reach is a gap between lines, counted from a line's end, so a line longer than it
    (40 KB here) does not hide the next line under the same header (a lone line was found
    where the record has three)."""
    def logged(message: str) -> str:
        if not coloured:
            return f"{_HEADER}{message}"
        return ("\x1b[0;36m(APIServer pid=1)\x1b[0;0m \x1b[31mERROR\x1b[0m \x1b[90m05-12 "
                f"08:01:01\x1b[0m \x1b[90m[core.py:74]\x1b[0m {message}")

    pad = " " + "x" * 40_000
    messages = {"the hit line": [ERRORS[0] + pad, "  indented", "  more"],
                "a line under its header": [ERRORS[0], "  indented" + pad, "  more"],
                "the first line": ["  head" + pad, ERRORS[0], "  more"]}[long]
    data = ("\n".join(["a"] * 3 + [logged(m) for m in messages] + ["b"] * 3) + "\n").encode()
    reference = spans(data, library, 8 << 20, full=True)
    assert reference
    for block in (8 << 20, 16384):
        assert spans(data, library, block, full=False) == reference, block
