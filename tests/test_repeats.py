"""A repeating status line is reported on the first line of each run (core.signatures.repeats,
issue 28): vLLM's throughput stats, every few seconds while it serves, each cost the whole
per-hit path to say again that the server is up. Which lines are alike, where a run ends,
and that every way of reading a log passes over the same lines: the fast path and the full
per-line path, chunked feeding resumed from checkpoints, a library reloaded under a live
source, and a file cut in two for two processes."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.library import Library, LibraryError, load_library
from logwatch.core.signatures.matcher import Matcher
from logwatch.scan.offline import resolve_inputs, scan_inputs
from tests.conftest import SAMPLES, roomy_matcher

REF = datetime(2026, 12, 4)
SERVING = "lifecycle.serving"
SITE_HEADER = ("signatures/library.toml", 'version = "1.2.3"\n[[changelog]]\nversion = "1.2.3"'
               '\ndate = "2026-12-04"\nchanges = ["x"]\n')


def stats(second: int, pid: int = 7, level: str = "INFO", prefix: str = "") -> str:
    return (f"{prefix}(APIServer pid={pid}) {level} 12-04 19:{second // 60 % 60:02d}:"
            f"{second % 60:02d} [loggers.py:123] Engine 000: Avg prompt throughput: "
            f"{second}.5 tokens/s, Avg generation throughput: 12.4 tokens/s, Running: 2 "
            "reqs, Waiting: 0 reqs, GPU KV cache usage: 0.3%, Prefix cache hit rate: 0.0%")


ACCESS = 'INFO:     10.0.0.9:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
# a request-lifecycle line whose prompt holds literals: passed over as benign, no hit line
RECEIVED = ("(APIServer pid=7) INFO 12-04 19:20:11 [logger.py:40] Received request "
            "chatcmpl-1: prompt: 'why does vLLM print RuntimeError and Avg prompt throughput: "
            "?', params: SamplingParams(n=1)")
VERSION = "(APIServer pid=7) INFO 12-04 19:20:00 [api_server.py:1] vLLM API server version 0.11.0"


def scan(library: Library, text: str, full: bool) -> tuple[list[tuple[str, int]], int]:
    scanner = BlockScanner(Matcher(library.signatures), "s", REF, full=full, whole_input=True)
    data = text.encode()
    found = scanner.feed(data) + scanner.finish()
    return [(f.signature.id, f.lineno) for f in found], scanner.stats.repeated_lines


def serving_lines(found: list[tuple[str, int]]) -> list[int]:
    return [line for sig, line in found if sig == SERVING]


def both_paths(library: Library, lines: list[str]) -> tuple[list[int], int]:
    """The serving findings' lines and the lines passed over, the same by either path."""
    text = "\n".join(lines) + "\n"
    fast, passed = scan(library, text, full=False)
    full, passed_full = scan(library, text, full=True)
    assert fast == full and passed == passed_full
    return serving_lines(fast), passed


def test_a_run_is_reported_on_its_first_line_and_the_rest_counted(library: Library) -> None:
    lines = [stats(1), stats(2), ACCESS, RECEIVED, stats(3),  # one run (1-5)
             VERSION,  # a hit line of another signature ends it
             stats(4), stats(5),  # a new run: 7
             stats(6, pid=8),  # another writer: 9
             stats(7)]  # pid 7 again, after another writer's line: 10
    reported, passed = both_paths(library, lines)
    assert reported == [1, 7, 9, 10]
    assert passed == 3  # lines 2, 5 and 8


@pytest.mark.parametrize("odd", [
    stats(9, level="WARNING"),  # not INFO
    "\x1b[32m" + stats(9),  # colour codes
    stats(9) + "\r",  # a carriage return: a terminal rewrote the line
    stats(9) + " RuntimeError: CUDA error: an illegal memory access was encountered",
    "2026-12-04T19:20:11.123Z " + stats(9),  # a prefix before the header
])
def test_a_line_not_alike_is_reported_and_ends_the_run(library: Library, odd: str) -> None:
    """Only a plain INFO logger line holding nothing but run literals can be passed over:
    a line in any other form is reported whole, as before, and the next stats line too."""
    reported, passed = both_paths(library, [stats(1), stats(2), odd, stats(3), stats(4)])
    assert 3 in reported or odd.startswith(("\x1b", "2026")), reported
    assert reported[0] == 1 and 4 in reported and passed == 2, reported


def test_a_literal_another_signature_shares_is_never_passed_over(library: Library) -> None:
    """A site signature that finds the same literal on every line: no stats line is passed
    over, as its pattern could match any of them."""
    site = """\
id = "site.throughput"
version = 1
status = "stable"
severity = "info"
fatal = false
category = "lifecycle"
title = "Throughput"
remedy = "none"
explanation = "{tps}"

[[patterns]]
regex = '''Avg prompt throughput: (?P<tps>[\\d.]+)'''
literals = ["Avg prompt throughput: "]

[[examples]]
text = '''INFO 05-02 10:00:10 [loggers.py:111] Avg prompt throughput: 1.0 tokens/s'''
captures = { tps = "1.0" }

[[counter_examples]]
text = '''INFO 05-02 10:00:10 [loggers.py:111] Avg generation throughput: 1.0 tokens/s'''
"""
    extra = load_library(SITE_HEADER, [[("site/throughput.toml", site)]])
    mixed = replace(library, signatures=(*library.signatures, *extra.signatures))
    assert Matcher(mixed.signatures).run_literals == {}
    reported, passed = both_paths(mixed, [stats(1), stats(2), stats(3)])
    assert reported == [1, 2, 3] and passed == 0


def test_repeats_takes_only_its_two_values(library: Library) -> None:
    text = (SAMPLES.parent.parent / "signatures" / "lifecycle" / "serving.toml").read_text()
    assert 'repeats = "first_of_run"' in text
    bad = text.replace('repeats = "first_of_run"', 'repeats = "first_of_runs"')
    with pytest.raises(LibraryError) as raised:
        load_library(SITE_HEADER, [[("lifecycle/serving.toml", bad)]])
    said = str(raised.value)
    assert "repeats 'first_of_runs' is not one of every_line, first_of_run" in said
    assert "did you mean 'first_of_run'" in said


def test_a_busy_sample_reports_each_run_once(library: Library) -> None:
    """The busy runtime sample: every stats line is either reported or counted as passed,
    and fewer are reported than it holds (before issue 28 all of them were)."""
    data = (SAMPLES / "healthy_busy_runtime.log").read_text()
    found, passed = scan(library, data, full=False)
    total = data.count("Avg prompt throughput: ")
    assert passed > 0 and len(serving_lines(found)) + passed == total


def test_a_resume_from_a_checkpoint_inside_a_run_passes_over_what_the_scan_did(
        library: Library) -> None:
    """A safe point never lies inside a run: resumed there, the run's first line is reported
    again (the same finding, which a database holds once) and the rest passed over."""
    lines = [VERSION, stats(1)] + [ACCESS] * 30 + [stats(2), stats(3), VERSION, stats(4)]
    data = ("\n".join(lines) + "\n").encode()
    matcher = Matcher(library.signatures)
    whole = BlockScanner(matcher, "s", REF)
    want = {(f.signature.id, f.lineno) for f in whole.feed(data) + whole.finish()}
    cut = data.index(stats(2).encode())
    first = BlockScanner(matcher, "s", REF)
    got = {(f.signature.id, f.lineno) for f in first.feed(data[:cut]) + first.flush()}
    offset, line = first.safe_point()
    assert (offset, line) == (data.index(stats(1).encode()), 2)  # the run's first line
    assert first.settled_point()[1] == 33
    again = BlockScanner(matcher, "s", REF, start_line=line)
    got |= {(f.signature.id, f.lineno) for f in again.feed(data[offset:]) + again.finish()}
    assert got == want and (SERVING, 33) not in want


def test_a_library_reloaded_under_a_live_source_starts_new_runs(library: Library) -> None:
    """The daemon's reload (ScanStreams.use): a new scanner from the settled point, fed what
    follows. Its runs start afresh, so the next stats line is reported once more; a kill -9
    and a resume after that reports nothing else (review: carrying the run over without its
    first line let a resume report a line inside the run)."""
    lines = [VERSION, stats(1), stats(2), stats(3), stats(4), stats(5), stats(6)]
    data = ("\n".join(lines) + "\n").encode()
    matcher = Matcher(library.signatures)
    half = data.index(stats(3).encode())
    before = BlockScanner(matcher, "s", REF)
    got = {(f.signature.id, f.lineno) for f in before.feed(data[:half]) + before.flush()}
    settled_bytes, settled_line = before.settled_point()
    after = BlockScanner(matcher, "s", REF, start_line=settled_line)
    cut = data.index(stats(5).encode()) - settled_bytes
    got |= {(f.signature.id, f.lineno) for f in after.feed(data[settled_bytes:][:cut])}
    offset, line = after.safe_point()  # kill -9 here
    again = BlockScanner(matcher, "s", REF, start_line=line)
    got |= {(f.signature.id, f.lineno)
            for f in again.feed(data[settled_bytes + offset:]) + again.finish()}
    assert sorted(n for s, n in got if s == SERVING) == [2, 4]


STALLED = '''\
id = "site.generation_stalled"
version = 1
status = "stable"
severity = "error"
fatal = false
category = "lifecycle"
title = "Generation stalled while requests run"
remedy = "none"
repeats = "first_of_run"
explanation = "gen {gen}"

[[patterns]]
regex = """PATTERN"""
literals = ["Avg generation throughput: "]
COND
[[examples]]
text = """INFO 05-02 10:00:10 [loggers.py:111] Avg generation throughput: EXAMPLE"""
captures = { gen = "CAPTURE" }

[[counter_examples]]
text = """INFO 05-02 10:00:10 [loggers.py:111] Avg generation throughput: 0.0 tokens/s, \
Running: 0 reqs"""
'''
STALLED_PATTERN = r"Avg generation throughput: (?P<gen>GEN) tokens/s, Running: [1-9]"
CONDITION = '\n[[conditions]]\ncapture = "gen"\nop = "=="\nvalue = 0.0\n'


def with_site(library: Library, pattern: str, condition: str = "",
              example: str = "0.0 tokens/s, Running: 3 reqs", capture: str = "0.0") -> Library:
    text = (STALLED.replace("PATTERN", pattern.replace("\\", "\\\\")).replace("COND", condition)
            .replace("EXAMPLE", example).replace("CAPTURE", capture))
    extra = load_library(SITE_HEADER, [[("site/site.toml", text)]])
    return replace(library, signatures=(*library.signatures, *extra.signatures))


def generation(second: int, gen: str) -> str:
    return (f"(APIServer pid=7) INFO 12-04 19:00:{second:02d} [loggers.py:123] Engine 000: "
            f"Avg generation throughput: {gen} tokens/s, Running: 3 reqs")


def test_a_line_whose_finding_hangs_on_a_condition_is_never_passed_over(
        library: Library) -> None:
    """Review: the judge ran the pattern only, so a run's second line, the first to meet the
    signature's condition, was passed over as alike its first, which gave no finding."""
    mixed = with_site(library, STALLED_PATTERN.replace("GEN", r"[\d.]+"), CONDITION)
    text = "\n".join([generation(1, "12.4"), generation(2, "0.0"), generation(3, "0.0")])
    for full in (False, True):
        found, passed = scan(mixed, text + "\n", full)
        stalled = [f for f in found if f[0] == "site.generation_stalled"]
        assert stalled == [("site.generation_stalled", 2)] and passed == 1, (full, found)


def test_a_line_two_run_signatures_find_is_alike_only_a_line_both_find(
        library: Library) -> None:
    """Review: the key named the first signature that matched, so a stats line that a second
    run signature also found (generation 0.0) was passed over as alike a plain stats line."""
    mixed = with_site(library, STALLED_PATTERN.replace("GEN", r"0\.0"))

    def line(second: int, gen: str) -> str:
        return stats(second).replace("12.4 tokens/s", f"{gen} tokens/s")

    lines = [line(1, "12.4"), line(2, "0.0"), line(3, "0.0")]
    reported, _ = both_paths(mixed, lines)
    found, _ = scan(mixed, "\n".join(lines) + "\n", False)
    assert reported == [1, 2] and ("site.generation_stalled", 2) in found
    assert ("site.generation_stalled", 3) not in found  # alike line 2: both find it


def test_a_runaway_run_pattern_is_disabled_as_the_matcher_disables_one(
        library: Library) -> None:
    """Review: the judge tried a pattern that runs over its budget on every line, each time,
    never counted; now it counts as the matcher counts, and once disabled is not tried."""
    mixed = with_site(library, r"Avg generation throughput: (?P<gen>(a|aa)+)$",
                      example="aaaa", capture="aaaa")
    matcher = Matcher(mixed.signatures)
    (pattern,) = {p for ps in matcher.run_literals.values() for p in ps
                  if p.signature.id == "site.generation_stalled"}
    tries = []

    class Counted:  # the compiled pattern, its searches counted
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def search(self, *args: Any, **kwargs: Any) -> Any:
            tries.append(1)
            return self.inner.search(*args, **kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    pattern._compiled = Counted(pattern.regex)  # type: ignore[assignment]
    line = generation(1, "x").replace("x tokens/s, Running: 3 reqs", "a" * 40 + "!")
    scanner = BlockScanner(matcher, "s", REF, whole_input=True)
    scanner.feed(("\n".join([line] * 40) + "\n").encode())
    scanner.finish()
    assert "site.generation_stalled" in matcher.disabled
    assert matcher.disable_after is not None
    assert len(tries) <= 2 * matcher.disable_after  # not once per line, 50 ms each


def test_reading_back_for_the_run_state_crosses_a_line_longer_than_its_window(
        tmp_path: Path) -> None:
    """Review: a line over 1 MiB before the lead-in left the read-back loop where it was,
    forever (`scan --jobs 2` hung)."""
    from logwatch.scan import parallel

    log = tmp_path / "long.log"
    head = (VERSION + "\n" + stats(1) + "\n").encode()
    log.write_bytes(head + b"x" * (3 << 20) + b"\n" + (ACCESS + "\n").encode() * 10)
    primed: list[bytes] = []

    class Probe:
        def prime_repeats(self, before: bytes) -> bool:
            primed.append(before)
            return stats(1).encode() in before

    with open(log, "rb") as stream:
        parallel._prime_runs(stream, Probe(), log.stat().st_size)  # type: ignore[arg-type]
    assert primed and stats(1).encode() in primed[-1]


@pytest.mark.parametrize("seed", range(3))
def test_random_chunks_and_restarts_pass_over_what_one_scan_does(library: Library,
                                                                 seed: int) -> None:
    rng = random.Random(seed)
    pool = [ACCESS, RECEIVED, VERSION] + [stats(s) for s in range(6)] + [stats(1, pid=8)]
    lines = [rng.choice(pool) for _ in range(600)]
    data = ("\n".join(lines) + "\n").encode()
    matcher = Matcher(library.signatures)
    whole = BlockScanner(matcher, "s", REF)
    want = {(f.signature.id, f.lineno) for f in whole.feed(data) + whole.finish()}
    assert whole.stats.repeated_lines > 0
    committed: set[tuple[str, int]] = set()
    scanner, base, pos = BlockScanner(matcher, "s", REF), 0, 0
    while pos < len(data):
        end = data.find(b"\n", min(len(data) - 1, pos + rng.randint(1, 4000))) + 1 or len(data)
        committed |= {(f.signature.id, f.lineno) for f in scanner.feed(data[pos:end])}
        pos = end
        if rng.random() < 0.15:  # kill -9, then resume from the last safe point
            safe_bytes, safe_line = scanner.safe_point()
            base += safe_bytes
            pos = base
            scanner = BlockScanner(matcher, "s", REF, start_line=safe_line)
    committed |= {(f.signature.id, f.lineno) for f in scanner.finish()}
    assert committed == want


def test_two_processes_pass_over_what_one_does(library: Library, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The cut falls in a long stretch without a hit line, inside a run: the second process
    takes the run's state from the last hit line before its lead-in, read back for it, and
    passes over the next stats line as one process does."""
    from logwatch.scan import parallel

    monkeypatch.setattr(parallel, "SPLIT_MIN_BYTES", 0)
    lines = [VERSION, stats(1)] + [ACCESS] * 30_000 + [stats(2), stats(3)]
    log = tmp_path / "serving.log"
    log.write_text("\n".join(lines) + "\n")
    inputs = resolve_inputs([str(log)])
    matchers = roomy_matcher(library), roomy_matcher(library), roomy_matcher(library)
    one = scan_inputs(inputs, library, mode="prefilter", jobs=1, matcher=matchers[0])
    two = scan_inputs(inputs, library, mode="prefilter", jobs=2, matcher=matchers[1])
    assert one["stats"]["repeated_lines"] == two["stats"]["repeated_lines"] == 2
    for key in ("launches", "incidents", "diagnoses"):
        assert two[key] == one[key], key
    # and the lead-in alone would not do: unprimed, the second process reports line 30,003
    monkeypatch.setattr(parallel, "_prime_runs", lambda *a: None)
    unprimed = scan_inputs(inputs, library, mode="prefilter", jobs=2, matcher=matchers[2])
    assert unprimed["stats"]["repeated_lines"] == 1
