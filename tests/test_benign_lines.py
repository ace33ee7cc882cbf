"""Request-lifecycle lines passed over before assembly (core.lines.benign): which lines are,
which look alike and are not, and that passing them over changes no finding: on the shared
yardstick's serving log (its prompts quote errors), and never on a line a signature is meant
to find. tests/test_fast_path_equivalence.py checks the same on its generated dense log,
with the look-alikes mixed in, against the per-line pipeline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from logwatch.core.lines.benign import is_benign
from logwatch.core.signatures.library import Library
from tests.conftest import ROOT, SAMPLES
from tests.test_fast_path_equivalence import spans

API = "(APIServer pid=7) INFO 11-29 22:35:24"
GENERATOR = ROOT.parent / "shared" / "perf" / "gen_vllm_log.py"


@pytest.mark.parametrize("line", [
    f"{API} [async_llm.py:345] Aborted request chatcmpl-4a25cac4e76a3b79.",
    f"{API} [async_llm.py:540] Aborted request(s) cmpl-1,cmpl-2,cmpl-3.",
    f"{API} [async_llm.py:415] Added request 0e6b2f0c-52a1-4f70-9d3e-8c1c5b8f2a11.",
    f"{API} [logger.py:39] Received request chatcmpl-1: prompt: 'RuntimeError: boom', "
    "params: SamplingParams(n=1), lora_request: None.",
    "INFO 11-29 22:35:24 [logger.py:71] Generated response chatcmpl-1: output: 'error'",
    "(APIServer pid=7) DEBUG 11-29 22:35:24 [logger.py:50] Request chatcmpl-1 details: "
    "prompt: 'Traceback (most recent call last):'",
    f"{API} [async_llm.py:345] Aborted request chatcmpl-4a25.\r",
])
def test_request_lines_are_passed_over(line: str) -> None:
    data = f"before\n{line}\nafter\n".encode()
    assert is_benign(data, len(b"before\n"))


@pytest.mark.parametrize("line", [
    # an abort logged as an error is an error; WARNING is not the request logger's either
    "(APIServer pid=7) ERROR 11-29 22:35:24 [async_llm.py:345] Aborted request chatcmpl-1.",
    "(APIServer pid=7) WARNING 11-29 22:35:24 [async_llm.py:345] Aborted request x.",
    f"{API} [async_llm.py:345] Aborted request chatcmpl-1 failed.",  # more than the ids
    f"{API} [async_llm.py:345] Aborted request a b.",
    f"{API} [async_llm.py:345]   Aborted request chatcmpl-1.",  # indented: a continuation
    f"vllm-1  | {API} [async_llm.py:345] Aborted request chatcmpl-1.",  # not vouched for
    f"\x1b[32m{API}\x1b[0m [async_llm.py:345] Aborted request chatcmpl-1.",
    f"{API} [async_llm.py:345] Aborted (core dumped)",
    "Aborted request chatcmpl-1.",  # no header: anyone's line
])
def test_look_alikes_are_not(line: str) -> None:
    assert not is_benign(f"{line}\n".encode(), 0)


def test_a_line_not_yet_ended_is_not_vouched_for() -> None:
    """A live source's last line may still be written: without its newline, nothing says
    more does not follow on it."""
    assert not is_benign(f"{API} [async_llm.py:345] Aborted request chatcmpl-1.".encode(), 0)


def test_no_signature_example_is_a_request_line(library: Library) -> None:
    """Every line a signature is written to find still reaches it."""
    for signature in library.signatures:
        for example in signature.examples:
            for line in example.text.splitlines():
                assert not is_benign(f"{line}\n".encode(), 0), (signature.id, line)


def test_no_sample_line_that_gives_a_finding_is_passed_over(library: Library) -> None:
    for log in sorted(SAMPLES.glob("*.log")):
        data = log.read_bytes()
        lines = data.split(b"\n")
        found = {f[1] for f in spans(data, library, 1 << 20, full=True)}
        assert not [n for n in found if n <= len(lines) and is_benign(lines[n - 1] + b"\n", 0)]


@pytest.mark.skipif(not GENERATOR.exists(), reason=f"the shared yardstick ({GENERATOR}) is "
                    "not beside this checkout")
def test_the_yardsticks_serving_log_gives_what_the_per_line_pipeline_gives(
        library: Library, tmp_path: Path) -> None:
    """A 3 MB serving log from the shared generator (aborted requests, prompts that quote
    errors, restarts, rare real failures): the prefiltered scan that passes request lines
    over finds exactly what the full pipeline finds, in 64 KiB blocks."""
    out = tmp_path / "serving.log"
    subprocess.run([sys.executable, str(GENERATOR), "--size", "3M", "--out", str(out),
                    "--seed", "11"], check=True, capture_output=True, timeout=120)
    data = out.read_bytes()
    assert data.count(b"] Aborted request ") > 500 and b"Received request " in data
    reference = spans(data, library, 8 << 20, full=True)
    assert spans(data, library, 65536, full=False) == reference


def test_both_engines_pass_over_the_same_hits(library: Library) -> None:
    """The literal pass's request-line filter gives the same hits with Hyperscan and with
    Python's find loops, and never passes over the first line of a block that does not
    begin a line (its start, and so its header, is not at hand)."""
    from logwatch.core.signatures import prefilter

    line = f"{API} [async_llm.py:345] Aborted request chatcmpl-1.\n".encode()
    data = line * 3 + b"RuntimeError: Aborted\n" + line
    literals = [lit for sig in library.signatures for p in sig.patterns for lit in p.literals]
    python = prefilter.PythonLiteralScanner(literals)
    every = python.hits(data)
    kept, passed = python.hits_outside_requests(data, at_line_start=True)
    start = data.index(b"RuntimeError")
    assert kept == [h for h in every if start <= h[0] < start + 22]
    assert kept and passed == len(every) - len(kept)
    mid, passed_mid = python.hits_outside_requests(data[5:], at_line_start=False)
    first = data.index(b"\n") - 5
    assert [h for h in mid if h[0] < first] == [h for h in python.hits(data[5:])
                                                if h[0] < first] != []  # the cut line kept
    if prefilter._hs is not None:
        hs = prefilter.HyperscanLiteralScanner(literals)
        assert hs.hits_outside_requests(data, True) == (kept, passed)
        assert hs.hits_outside_requests(data[5:], False) == (mid, passed_mid)

