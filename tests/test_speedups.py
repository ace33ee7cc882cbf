"""logwatch.core.signatures._speedups (its _speedups.c) against the pure-Python path it
stands in for: newline counts against `bytes.count`, request-lifecycle lines against
core.lines.benign's expression, and the Hyperscan hits it keeps and judges against the
Python scanner's, on crafted look-alikes and random mutations of them."""

from __future__ import annotations

import gc
import importlib.util
import os
import random
import shutil
import sysconfig

import pytest

from logwatch.core.lines.benign import BENIGN
from logwatch.core.lines.buffer_lines import JOINING_STARTS
from logwatch.core.signatures import prefilter
from logwatch.core.signatures.prefilter import PythonLiteralScanner, _outside_requests
from tests.test_benign_lines import API

speedups = prefilter._speedups
needs_speedups = pytest.mark.skipif(
    speedups is None, reason="logwatch.core.signatures._speedups is not built (no C compiler "
    "or Python headers at install)")
needs_hyperscan = pytest.mark.skipif(prefilter._hs is None, reason="hyperscan not installed")

REQUEST_LINES = [
    f"{API} [async_llm.py:345] Aborted request chatcmpl-4a25cac4e76a3b79.",
    f"{API} [async_llm.py:540] Aborted request(s) cmpl-1,cmpl-2,cmpl-3.",
    f"{API} [async_llm.py:415] Added request 0e6b2f0c-52a1-4f70-9d3e-8c1c5b8f2a11.",
    f"{API} [logger.py:39] Received request chatcmpl-1: prompt: 'RuntimeError: boom'",
    "INFO 11-29 22:35:24 [logger.py:71] Generated response chatcmpl-1: output: 'error'",
    "(APIServer pid=7) DEBUG 11-29 22:35:24 [logger.py:50] Request chatcmpl-1 details: "
    "prompt: 'Traceback (most recent call last):'",
    "(APIServer pid=7) WARNING 11-29 22:35:24 [logger.py:50] Request x JSON body: {}",
    "(Engine_Core-1 pid=70) INFO 11-29 22:35:24 [a.b-c.py:1] Aborted request a.b..",
    "ERROR 11-29 22:35:24 [logger.py:39] Received request x: prompt: ''",
    "(APIServer pid=7) ERROR 11-29 22:35:24 [async_llm.py:345] Aborted request chatcmpl-1.",
    "(APIServer pid=7) INFO 11-29 22:35:24 [async_llm.py:345] Aborted request a,,b.",
    "(APIServer pid=7) INFO 11-29 22:35:24 [async_llm.py:345] Aborted request ,a.",
    "(APIServer pid=7) INFO 11-29 22:35:24 [async_llm.py:345] Aborted request .",
    "(APIServer pid=7) INFO 11-29 22:35:24 [async_llm.py:345] Aborted request a.\r\r",
    "(7APIServer pid=7) INFO 11-29 22:35:24 [async_llm.py:345] Aborted request a.",
    "(APIServer pid=) INFO 11-29 22:35:24 [async_llm.py:345] Aborted request a.",
    "INFO 1-29 22:35:24 [async_llm.py:345] Aborted request a.",
    "INFO 11-29 22:35:24 [:345] Aborted request a.",
    "INFO 11-29 22:35:24 [x.py:] Aborted request a.",
    "INFO 11-29 22:35:24 [x.py:3]  Aborted request a.",
    "INFO 11-29 22:35:24 [x.py:3] Request  details: prompt: x",
    "INFO 11-29 22:35:24 [x.py:3] Request x\tdetails: prompt: x",
]
# what the mutations put in: the characters the grammar turns on
ALPHABET = " ,.\r\n\t\v\f()[]:-_=0123456789aZpidINFOERROR"


def _mutants(rng: random.Random, line: str, count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        chars = list(line)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(chars) + 1)
            what = rng.random()
            if what < 0.4 and at < len(chars):
                chars[at] = rng.choice(ALPHABET)
            elif what < 0.7 and at < len(chars):
                del chars[at]
            else:
                chars.insert(at, rng.choice(ALPHABET))
        out.append("".join(chars).encode())
    return out


@needs_speedups
def test_newlines_counts_as_bytes_count_does() -> None:
    rng = random.Random(5)
    for size in (0, 1, 15, 16, 17, 255 * 16, 255 * 16 + 33, 70_001):
        data = bytes(rng.choice(b"ab\n\n\r") for _ in range(size))
        for start, end in [(0, size), (3, size - 2), (-5, size), (0, -1), (7, 3), (-99, 99),
                           (size, size + 10), (rng.randrange(size + 1), rng.randrange(size + 1))]:
            assert speedups.newlines(data, start, end) == data.count(b"\n", start, end)
    assert speedups.newlines(bytearray(b"a\nb\n"), 0, 4) == 2  # any buffer


@needs_speedups
def test_lines_back_walks_as_rfind_does() -> None:
    """buffer_lines.walk's walk back over lines, in C: the same offsets as the Python loop
    (rfind before the newline that ends the previous line), from any offset, past the
    buffer's start, over empty lines and a buffer without a newline."""
    from logwatch.core.lines import buffer_lines

    def by_rfind(data: bytes, offset: int, count: int) -> tuple[int, int]:
        offset, walked = min(offset, len(data)), 0
        while walked < count and offset > 0:
            offset = data.rfind(b"\n", 0, offset - 1) + 1
            walked += 1
        return offset, walked

    rng = random.Random(9)
    for size in (0, 1, 2, 40, 1000):
        data = bytes(rng.choice(b"ab\n\n") for _ in range(size))
        for _ in range(60):
            offset, count = rng.randrange(size + 3), rng.randrange(size + 4)
            assert speedups.lines_back(data, offset, count) == by_rfind(data, offset, count)
    assert speedups.lines_back(b"no newline", 10, 3) == (0, 1)
    assert buffer_lines._lines_back is speedups.lines_back  # walk uses it
    data = b"".join(b"line %d\n" % n for n in range(1, 301))
    start = data.index(b"line 250\n")
    assert data[buffer_lines.walk(data, (250, start), 50):].startswith(b"line 50\n")


@needs_speedups
def test_is_benign_is_the_expression_on_crafted_and_mutated_lines() -> None:
    rng = random.Random(11)
    lines = [line.encode() for line in REQUEST_LINES]
    for line in REQUEST_LINES:
        lines.extend(_mutants(rng, line, 400))
    differ = []
    for line in lines:
        for data, start in ((line + b"\n", 0), (line, 0), (b"x\n" + line + b"\nz", 2),
                            (line + b"\r\n", 0)):
            ours = speedups.is_benign(data, start)
            if ours != (BENIGN.match(data, start) is not None):
                differ.append((data, start, ours))
    assert not differ, differ[:5]
    assert sum(speedups.is_benign(line + b"\n", 0) for line in lines) > 500  # both kinds met


@needs_speedups
def test_hits_take_keeps_what_the_python_filter_keeps() -> None:
    rng = random.Random(3)
    pool = [line.encode() for line in REQUEST_LINES] + [
        b"(APIServer pid=7) ERROR 11-29 22:35:24 [core.py:1] RuntimeError: Aborted",
        b"Aborted (core dumped)", b"", b"   indented error"]
    literals = ["Aborted", "error", "Error", "request", "ERROR", "a"]
    python = PythonLiteralScanner(literals)
    for _ in range(60):
        chosen = [rng.choice(pool) for _ in range(rng.randint(0, 40))]
        data = b"\n".join(chosen) + rng.choice([b"", b"\n"])
        if rng.random() < 0.3:
            data = data[rng.randrange(len(data) + 1):]  # a block may begin mid-line
        found = python.hits(data)
        collector = speedups.Hits([len(lit) for lit in literals])
        for offset, literal in rng.sample(found, len(found)):  # in any order
            collector(literal, 0, offset + len(literals[literal]), 0, None)
        for at_line_start in (True, False):
            expected = _outside_requests(data, found, at_line_start)
            if at_line_start:
                assert collector.take(data, at_line_start) == expected
            else:
                again = speedups.Hits([len(lit) for lit in literals])
                for offset, literal in found:
                    again(literal, 0, offset + len(literals[literal]), 0, None)
                assert again.take(data, at_line_start) == expected


@needs_speedups
def test_a_finalizer_that_adds_hits_while_they_are_taken_adds_them_for_later() -> None:
    """Making the result's tuples may run the garbage collector, and a finalizer may call
    the collector again (Hyperscan's binding could): the hits being taken are that call's
    alone, and what the finalizer adds waits for the next take (it once wrote past the
    result list)."""
    collector = speedups.Hits([1])

    class Adds:
        def __del__(self) -> None:
            for _ in range(3000):
                collector(0, 0, 9, 0, None)

    threshold = gc.get_threshold()
    try:
        for take in (lambda: collector.sorted(), lambda: collector.take(b"x" * 10, True)[0]):
            for _ in range(2000):
                collector(0, 0, 1, 0, None)
            cycle = Adds()
            cycle.self = cycle  # type: ignore[attr-defined]
            del cycle
            gc.set_threshold(1)
            taken = take()
            gc.set_threshold(*threshold)
            assert taken == [(0, 0)] * 2000
            gc.collect()
            assert collector.sorted() in ([], [(8, 0)] * 3000)  # whatever ran later waits
    finally:
        gc.set_threshold(*threshold)


@needs_speedups
def test_the_c_functions_take_arguments_as_python_does() -> None:
    data = b"a\nb\n"
    assert speedups.newlines(data, 0, 10**20) == data.count(b"\n", 0, 10**20)
    assert speedups.newlines(data, -(10**20), None) == data.count(b"\n", -(10**20), None)
    line = b"INFO 11-29 22:35:24 [a.py:1] Added request a.\n"
    assert speedups.is_benign(line, -5) == (BENIGN.match(line, -5) is not None)

    class Index:
        def __index__(self) -> int:
            return 0

    collector = speedups.Hits([1])
    collector(Index(), 0, 5, 0, None)
    assert collector.sorted() == [(4, 0)]
    with pytest.raises(OverflowError):
        collector(-1, 0, 5, 0, None)


def _joiner_by_find(data: bytes, header: bytes, own: int, low: int, high: int) -> bool:
    """BufferLines.joiner_near's question asked with `find`: a repeat of `header` wholly
    inside data[low:high], not at `own`, right before a message that joins."""
    found = data.find(header, max(low, 0), high)
    while found >= 0:
        if found != own and data.startswith(JOINING_STARTS, found + len(header)):
            return True
        found = data.find(header, found + 1, high)
    return False


@needs_speedups
def test_joiner_near_answers_as_find_does() -> None:
    rng = random.Random(12)
    headers = [b"(A pid=1) INFO 11-29 10:00:00 [a.py:1] ",
               b"(A pid=1) INFO 11-29 10:00:01 [a.py:1] "]
    tails = [b"plain\n", b"  indented\n", b"\tTab\n", b"Traceback (most recent call last):\n",
             b"During handling of it\n", b"\r\n", b"\n", b"Traced\n"]
    answers = set()
    for _ in range(3000):
        data = b"".join(rng.choice(headers) + rng.choice(tails) for _ in range(rng.randint(0, 12)))
        header = rng.choice(headers)
        own = rng.choice([-1, 0, data.find(header), rng.randrange(len(data) + 1)])
        low, high = rng.randrange(-5, len(data) + 1), rng.randrange(0, len(data) + 6)
        expected = _joiner_by_find(data, header, own, low, high)
        assert speedups.joiner_near(data, header, own, low, high, JOINING_STARTS) == expected
        answers.add(expected)
    assert answers == {True, False}


@needs_speedups
def test_hits_refuses_what_cannot_be_a_match() -> None:
    collector = speedups.Hits([3, 5])
    with pytest.raises(ValueError):
        collector(2, 0, 10, 0, None)  # no such literal
    with pytest.raises(ValueError):
        collector(1, 0, 4, 0, None)  # ends before its literal could
    collector(0, 0, 100, 0, None)
    with pytest.raises(ValueError):
        collector.take(b"short", True)  # a hit beyond the data
    assert collector.take(b"short", True) == ([], 0)  # and nothing is left over


@needs_speedups
@needs_hyperscan
def test_the_hyperscan_scanner_gives_the_same_hits_with_and_without_speedups() -> None:
    rng = random.Random(9)
    lines = [*REQUEST_LINES, "Aborted (core dumped)", "an error here", "ERROR boom"]
    data = "\n".join(rng.choice(lines) for _ in range(5000)).encode() + b"\n"
    literals = ["Aborted", "error", "ERROR", "Received request ", "pid="]
    fast = prefilter.HyperscanLiteralScanner(literals)
    slow = prefilter.HyperscanLiteralScanner(literals, speedups=False)
    assert fast.speedups and not slow.speedups
    assert fast.hits(data) == slow.hits(data)
    assert fast.hits_outside_requests(data, True) == slow.hits_outside_requests(data, True)
    assert fast.newlines(data, 10, -10) == slow.newlines(data, 10, -10)


def test_the_speedups_are_built_where_a_compiler_is_at_hand() -> None:
    """`make test` installs with hatch_build.py, which compiles them where the C compiler
    Python was built with and its headers are here: a build that silently stopped working
    would leave every user on the slow path."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    include = sysconfig.get_paths()["include"]
    if shutil.which(compiler) is None or not os.path.exists(f"{include}/Python.h"):
        pytest.skip(f"no C compiler ({compiler}) or Python headers here: the pure-Python "
                    "path runs")
    assert importlib.util.find_spec("logwatch.core.signatures._speedups") is not None
