"""The block scanner gives the same findings whatever the block size and engine."""

from __future__ import annotations

import io
from datetime import datetime
from pathlib import Path

import pytest

from logwatch.core.signatures import prefilter
from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from logwatch.scan.blocks import CUT_MARKER, read_blocks
from tests.conftest import SAMPLES, roomy_matcher

REF = datetime(2026, 11, 30)
ENGINES = ["python"] + (["hyperscan"] if prefilter._hs is not None else [])


def findings(data: bytes, library: Library, block: int, engine: str, full: bool = False
             ) -> list[tuple[str, int, dict[str, str]]]:
    matcher = roomy_matcher(library, engine)
    scanner = BlockScanner(matcher, "t", REF, full=full)
    out = []
    for chunk in read_blocks(io.BytesIO(data), block_bytes=block):
        out += scanner.feed(chunk)
    out += scanner.finish()
    assert scanner.stats.lines == data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    assert not matcher.timeouts
    return [(f.signature.id, f.lineno, f.captures) for f in out]


def _padded_demo() -> bytes:
    demo = (SAMPLES / "demo_marlin_and_mtp.log").read_bytes()
    filler = b"".join(b'INFO:     10.0.0.1:4000 - "GET /health HTTP/1.1" 200 OK\n'
                      for _ in range(500))
    return filler + demo + filler + demo + filler[:-1]  # no final newline


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("block", [97, 4096, 65536, 8 << 20])
def test_findings_do_not_depend_on_block_size(library: Library, engine: str,
                                              block: int) -> None:
    data = _padded_demo()
    reference = findings(data, library, 8 << 20, "python", full=True)
    assert len(reference) > 10
    assert findings(data, library, block, engine) == reference


@pytest.mark.slow
@pytest.mark.parametrize("block", [4096, 1 << 20])
def test_a_burst_of_same_header_lines_matches_the_full_pipeline(library: Library,
                                                                block: int) -> None:
    """One call site logging thousands of lines in one second (same header on every line),
    with an indented continuation and a traceback under that header in the middle: the
    burst path must still see the lines that join."""
    head = b"(APIServer pid=1) INFO 10-14 10:00:00 [metrics.py:101] "
    hit = head + (b"SpecDecoding metrics: Mean acceptance length: 1.10, Accepted: 1 tokens, "
                  b"Drafted: 9 tokens, Avg Draft acceptance rate: 5.5%\n")
    error = b"(APIServer pid=1) ERROR 10-14 10:00:00 [metrics.py:101] "
    middle = (head + b"  (a continuation line: joins the burst line above)\n"
              + error + b"Traceback (most recent call last):\n" + error + b'  File "x.py"\n'
              + error + b"RuntimeError: CUDA error: an illegal memory access was encountered\n")
    data = hit * 1500 + middle + hit * 1500

    def spans(full: bool, block: int) -> list[tuple[str, int, int, int]]:
        matcher = roomy_matcher(library, ENGINES[-1])
        scanner = BlockScanner(matcher, "t", REF, full=full)
        out = [f for chunk in read_blocks(io.BytesIO(data), block_bytes=block)
               for f in scanner.feed(chunk)] + scanner.finish()
        assert not matcher.timeouts
        return [(f.signature.id, f.lineno, f.record_lineno, f.record_last_lineno) for f in out]

    reference = spans(True, 8 << 20)
    assert sum(1 for f in reference if f[0] == "spec_decode.low_acceptance") == 3000
    assert ("spec_decode.low_acceptance", 1500, 1500, 1501) in reference  # joined
    assert spans(False, block) == reference


def test_holding_says_what_a_held_hit_waits_for(library: Library) -> None:
    """At the live edge a logger line that nothing at hand joins waits only for bytes after
    it ("line": its writer wrote it whole); a traceback printed under a header may go on
    ("record"). Enough lines after either settles it; a flush settles it at once."""
    scanner = BlockScanner(Matcher(library.signatures), "t", REF)
    access = b'INFO:     10.0.0.1:4000 - "GET /health HTTP/1.1" 200 OK\n'
    spec = (b"(APIServer pid=1) INFO 10-14 10:00:00 [metrics.py:101] SpecDecoding metrics: "
            b"Mean acceptance length: 1.10, Accepted: 1 tokens, Drafted: 9 tokens, "
            b"Avg Draft acceptance rate: 5.5%\n")
    assert scanner.feed(access * 400) == [] and scanner.holding is None
    assert scanner.feed(spec + access * 3) == [] and scanner.holding == "line"
    found = scanner.feed(access * 400)  # 16 KiB after it: nothing with its header joins
    assert [f.signature.id for f in found] == ["spec_decode.low_acceptance"]
    assert scanner.holding is None

    error = b"(EngineCore_DP0 pid=5) ERROR 11-29 10:00:00 [core.py:1] "
    scanner.feed(error + b"Traceback (most recent call last):\n" + error
                 + b'  File "/x/core.py", line 1, in run\n' + error
                 + b"RuntimeError: CUDA error: an illegal memory access was encountered\n"
                 + access)
    assert scanner.holding == "record"
    assert [f.signature.id for f in scanner.flush()] == ["distributed.cuda_error"]
    assert scanner.holding is None


def test_long_lines_are_cut_with_a_marker_and_counted_once(library: Library) -> None:
    data = (b"a\n" + b"x" * (3 << 20) + b" size_n = 40 is not divisible by tile_n_size = 64\n"
            + b"RuntimeError: size_n = 8 is not divisible by tile_n_size = 64\n")
    blocks = b"".join(read_blocks(io.BytesIO(data), block_bytes=1 << 20))
    assert blocks.count(b"\n") == 3
    assert CUT_MARKER in blocks
    got = findings(data, library, 1 << 20, "python")
    assert got == [("marlin.repack_tile_n", 3, {"size_n": "8", "tile_n_size": "64"})]


def test_binary_junk_and_invalid_utf8_do_not_hide_findings(library: Library) -> None:
    junk = bytes(range(256)) * 50
    data = (junk + b"\n\xff\xfe(EngineCore pid=1) ERROR 11-29 22:38:00 [core.py:1] "
            b"RuntimeError: size_n = 40 is not divisible by tile_n_size = 64 \xc3\x28\n" + junk)
    got = findings(data, library, 4096, "python")
    line = junk.count(b"\n") + 2
    assert ("marlin.repack_tile_n", line, {"size_n": "40", "tile_n_size": "64"}) in got


def test_samples_agree_across_engines(library: Library, tmp_path: Path) -> None:
    for log in SAMPLES.glob("*.log"):
        data = log.read_bytes()
        runs = {engine: findings(data, library, 1024, engine) for engine in ENGINES}
        assert len({repr(v) for v in runs.values()}) == 1, log.name


def _naive_cut(data: bytes, max_line: int) -> bytes:
    lines = data.split(b"\n")
    out = [ln if len(ln) <= max_line else ln[:max_line] + CUT_MARKER for ln in lines]
    return b"\n".join(out)


@pytest.mark.parametrize("block", [1, 2, 3, 5, 8, 13, 64, 1000])
def test_read_blocks_matches_a_naive_line_cutter(block: int) -> None:
    import random

    rng = random.Random(block)
    for _ in range(30):
        data = b"\n".join(b"x" * rng.choice([0, 1, 5, 19, 20, 21, 40, 90])
                          for _ in range(rng.randint(0, 12)))
        if rng.random() < 0.5:
            data += b"\n"
        got = b"".join(read_blocks(io.BytesIO(data), block_bytes=block, max_line=20))
        want = _naive_cut(data, 20)
        if want.endswith(CUT_MARKER):  # a cut last line may gain its newline: same lines
            assert got in (want, want + b"\n"), (block, data)
        else:
            assert got == want, (block, data)


def _joiner_answers(buf: bytes, index: bool) -> list[bool]:
    """joiner_near's answer for every (header, own, window) asked of `buf`, with the
    buffer's joiner index (built at the first question) or with plain searches only."""
    from logwatch.core.lines import buffer_lines
    headers = [b"(Worker_TP0 pid=9) ERROR 11-29 03:10:01 [multiproc_executor.py:631] ",
               b"(Worker_TP1 pid=9) ERROR 11-29 03:10:01 [multiproc_executor.py:631] ",
               b"(APIServer pid=7) INFO 11-29 03:10:01 [metrics.py:101] "]
    scanner = BlockScanner(Matcher([]), "t", REF)
    lines = buffer_lines.BufferLines(scanner, buf, 1, buf.count(b"\n"), True)
    answers = []
    with pytest.MonkeyPatch.context() as patch:
        # every buffer is worth an index, or no header is long enough to use one
        patch.setattr(buffer_lines, "JOINER_INDEX_EVERY_LOG2", 64)
        if not index:
            patch.setattr(buffer_lines, "JOINER_KEY", 1 << 20)
        for header in headers:
            offsets = [i for i in range(len(buf)) if buf.startswith(header, i)]
            edges = {o + d for o in offsets for d in (-1, 0, 1, len(header))}
            for own in [*offsets, -1]:
                for low in sorted({*range(0, len(buf), 37), *edges}):
                    for high in sorted({low + 40, low + 600, len(buf), *edges}):
                        if 0 <= low <= high <= len(buf):
                            answers.append(lines.joiner_near(header, own, low, high))
    return answers


def test_the_joiner_index_answers_as_the_searches_do() -> None:
    """A dense buffer asks `joiner_near` so often that it indexes where joining messages
    start; the index must answer every question as searching for the header does: the
    header at a line start or inside another line, followed by each joining start or not,
    its own occurrence excluded, windows cutting a header or a message."""
    worker0 = b"(Worker_TP0 pid=9) ERROR 11-29 03:10:01 [multiproc_executor.py:631] "
    worker1 = worker0.replace(b"TP0", b"TP1")
    api = b"(APIServer pid=7) INFO 11-29 03:10:01 [metrics.py:101] "
    buf = b"".join([
        api + b"SpecDecoding metrics: Mean acceptance length: 2.41\n",
        worker0 + b"Traceback (most recent call last):\n",
        worker0 + b'  File "/x/vllm/worker.py", line 1, in f\n',
        b"echo " + worker1 + b"The above exception was the direct cause\n",
        worker1 + b"RuntimeError: size_n = 40\n",
        api + b"\tindented under the API server's header\n",
        worker1 + b"\n",
        api + b"During handling of the above exception\n",
        worker0 + b"\r\n",
        api + b"Avg Draft acceptance rate: 0.0%",
    ])
    with_index, searched = _joiner_answers(buf, True), _joiner_answers(buf, False)
    assert with_index == searched
    assert True in searched and False in searched


def test_a_traceback_logged_again_is_assembled_from_memory(library: Library) -> None:
    """The same traceback under the same header (another second) gives its record from the
    header-run memory: no line of it is read by parse_sibling again, and the findings, record
    spans and messages are what the per-line pipeline gives."""
    from logwatch.core.lines import buffer_lines
    def traceback(ts: str) -> bytes:
        head = f"(Worker_TP0 pid=9) ERROR 11-29 {ts} [multiproc_executor.py:631] ".encode()
        return b"".join(head + text + b"\n" for text in (
            b"Traceback (most recent call last):",
            b'  File "/x/vllm/worker.py", line 240, in load_model',
            b"    self.model_runner.load_model()",
            b"RuntimeError: size_n = 40 is not divisible by tile_n_size = 64"))

    filler = b'INFO:     10.0.0.1:4000 - "GET /health HTTP/1.1" 200 OK\n' * 300
    data = filler + traceback("03:10:01") + filler + traceback("03:10:07") + filler
    read: list[int] = []
    original = buffer_lines.parse_sibling

    def counting(*args: object) -> object:
        read.append(args[2])  # type: ignore[arg-type]
        return original(*args)  # type: ignore[arg-type]

    def spans(full: bool) -> list[tuple[str, int, int, str]]:
        scanner = BlockScanner(roomy_matcher(library, ENGINES[-1]), "t", REF, full=full)
        found = scanner.feed(data) + scanner.finish()
        return [(f.signature.id, f.record_lineno, f.record_last_lineno, f.record.message)
                for f in found]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(buffer_lines, "parse_sibling", counting)
        fast = spans(full=False)
    assert fast == spans(full=True)
    assert [f[1] for f in fast] == [301, 605]
    assert read == [302, 303, 304]  # the first traceback's lines only


def test_a_line_nothing_can_join_is_reported_at_once(library: Library) -> None:
    """uvicorn's `INFO:     Finished server process [N]` has no logger header and does not
    end in ":", so no line can join its record (Assembler.may_go_on): at the live edge it is
    reported at once. It used to wait for a later line of its writer, up to 200 lines."""
    scanner = BlockScanner(Matcher(library.signatures), "t", REF)
    other = b"(APIServer pid=2) INFO 10-14 10:00:00 [launcher.py:1] route /health\n"
    found = scanner.feed(b"INFO:     Finished server process [51000]\n" + other * 3)
    assert [f.signature.id for f in found] == ["lifecycle.shutdown"]
    assert scanner.holding is None


@pytest.mark.parametrize("engine", ENGINES)
def test_a_traceback_after_an_ordinary_line_of_its_writer_reads_no_wide_window(
        library: Library, engine: str) -> None:
    """A traceback's head joins the record before it only after "Process X:", a chain
    marker or a line ending in ":"; after a logger line of its process it opens a record
    whatever came before, so the window around it is not widened over the 200 lines before
    it. The findings are the full pipeline's."""
    writer = b"(APIServer pid=7) "
    logged = writer + b"INFO 10-14 10:00:00 [loader.py:1] loading shard\n"
    data = (logged * 300 + b"".join(writer + text + b"\n" for text in (
        b"Traceback (most recent call last):",
        b'  File "/x/vllm/worker.py", line 240, in load_model',
        b"    self.model_runner.load_model()",
        b"RuntimeError: size_n = 40 is not divisible by tile_n_size = 64"))
        + logged * 300)
    scanner = BlockScanner(roomy_matcher(library, engine), "t", REF)
    found = scanner.feed(data) + scanner.finish()
    full = BlockScanner(roomy_matcher(library, engine), "t", REF, full=True)
    assert [(f.signature.id, f.lineno, f.record_lineno) for f in found] == [
        (f.signature.id, f.lineno, f.record_lineno) for f in full.feed(data) + full.finish()]
    assert found and scanner.stats.lines_parsed < 40


@pytest.mark.parametrize("seed", range(20))
def test_holding_finds_the_lines_may_hold_takes(seed: int) -> None:
    """BufferLines.holding, searches over a range, answers as asking `may_hold` of each
    line does: lines with every token of the writer, lines that unwrapping may rewrite
    (colour, JSON, markup, a tag cut at the line's end), lines parsed already; ranges cut
    anywhere, tokens on a range's first or last line."""
    import random

    from logwatch.core.lines import buffer_lines
    rng = random.Random(seed)
    texts = [b"(APIServer pid=101) INFO 10-14 10:00:00 [a.py:1] up",
             b"(APIServer pid=102) INFO 10-14 10:00:00 [a.py:1] pid=101 APIServer elsewhere",
             b"(APIServer pid=101) Traceback (most recent call last):",
             b"(EngineCore pid=101) RuntimeError: x", b"APIServer", b"", b"pid=",
             b"\x1b[0;36m(APIServer pid=101)\x1b[0;0m INFO up",
             b'{"log": "(APIServer pid=101) INFO up"}', b"101 101 101",
             b"(APIServer pid=101) ends in <font", b"ends in <font",
             b"APIServer pid=101 **bold** &lt;b&gt;",
             b"(APIServer pid=101) `code` ^[[0m"]
    plain = texts[:7] + texts[9:10]  # and in half the buffers no line is rewritten at all
    buf = b"\n".join(rng.choice(texts if seed % 2 and rng.random() < 0.3 else plain)
                     for _ in range(120)) + b"\n"
    last = buf.count(b"\n")
    tokens = (b"pid=", b"101", b"APIServer")
    scanner = BlockScanner(Matcher([]), "t", REF)
    anchor = (1, 0)
    for _ in range(40):
        low = rng.randint(1, last)
        high = rng.randint(low - 1, min(last, low + 60))
        lines = buffer_lines.BufferLines(scanner, buf, 1, last, True)
        lines.cache = {n: lines.get(n, anchor) for n in rng.sample(range(1, last + 1), 5)}
        each = [n for n in range(low, high + 1) if lines.may_hold(n, anchor, tokens)]
        fresh = buffer_lines.BufferLines(scanner, buf, 1, last, True)
        fresh.cache = lines.cache
        assert fresh.holding(low, high, anchor, tokens) == each, (low, high)
        for n in each:  # the lines it names are read where they are
            assert fresh.get(n, anchor).raw == buf.split(b"\n")[n - 1].decode()


@pytest.mark.parametrize("seed", range(10))
def test_a_range_read_without_colour_codes_is_its_bytes_less_the_codes(seed: int) -> None:
    """BufferLines.decoloured: the buffer without its ANSI colour codes, and where a range
    of it is there: the range's own bytes less its codes; a range cut inside a code starts
    or ends where the code was; None for a range with colour in another form."""
    import random

    from logwatch.core.lines import buffer_lines
    rng = random.Random(seed)
    pieces = [b"\x1b[0;36m(APIServer pid=1)\x1b[0;0m ", b"\x1b[32mINFO\x1b[0m ", b"plain text ",
              b"\n", b"[model] ", b"\x1b[m", b"x" * 7]
    odd = [b"[0;36m", b"^[[0m", b"\\u001b[90m", b"\x1b[K"]
    buf = b"".join(rng.choice(pieces) for _ in range(300))
    codes = [(m.start(), m.end()) for m in buffer_lines.SGR.finditer(buf)]
    inside = {at for start, end in codes for at in range(start + 1, end)}
    lines = buffer_lines.BufferLines(BlockScanner(Matcher([]), "t", REF), buf, 1,
                                     buf.count(b"\n"), True)
    for _ in range(200):
        low = rng.choice([at for at in range(len(buf) + 1) if at not in inside])
        high = rng.choice([at for at in range(low, len(buf) + 1) if at not in inside])
        found = lines.decoloured(low, high)
        assert found is not None
        text, start, end = found
        assert text[start:end] == buffer_lines.SGR.sub(b"", buf[low:high])
    for start, end in codes[:20]:
        for at in range(start, end):
            assert lines.decoloured(at, len(buf)) == lines.decoloured(start, len(buf))
    for other in odd:  # colour in another form, or another sequence: not read so
        spoiled = buf[:100] + other + buf[100:]
        spoiled_lines = buffer_lines.BufferLines(BlockScanner(Matcher([]), "t", REF), spoiled,
                                                 1, spoiled.count(b"\n"), True)
        assert spoiled_lines.decoloured(0, len(spoiled)) is None
        assert spoiled_lines.decoloured(100 + len(other) + 60, len(spoiled)) is not None
