"""Lint rules, the time bound on matching, redaction, and prefilter engine equivalence."""

from __future__ import annotations

import importlib.util
import time
from datetime import datetime

import pytest

from logwatch.core.lines.assemble import assemble
from logwatch.core.lines.records import Record
from logwatch.core.lines.vllm_format import parse_line
from logwatch.core.safe_text.redact import redact
from logwatch.core.signatures import prefilter
from logwatch.core.signatures.library import Library, load_library
from logwatch.core.signatures.lint import (
    PROBE,
    branch_probes,
    lint_library,
    nested_quantifier,
    unanchored,
)
from logwatch.core.signatures.matcher import Matcher, compile_pattern
from logwatch.core.signatures.signature import Example, Pattern, Signature
from tests.test_library_loader import GOOD, HEADER


def test_nested_quantifiers_are_flagged() -> None:
    assert nested_quantifier(r"^(a+)+$")
    assert nested_quantifier(r"(?:\w*\s?)*done")
    assert not nested_quantifier(r"(?:[^\n]*\n){0,2}x")
    assert not nested_quantifier(r"size_n = (?P<n>\d+) is")
    assert nested_quantifier(r"^(a|aa)+$")
    assert not nested_quantifier(r"(?:, [^\n]*?)?x(?:a|b)")


def test_unanchored_wildcards_are_flagged() -> None:
    assert unanchored(r".*boom")
    assert unanchored(r"boom[^x]*")
    assert not unanchored(r"^[^\w]*version (\d+)")
    assert not unanchored(r"boom\s*$")


def test_branch_probes_cover_every_alternative() -> None:
    probes = dict(branch_probes(r"(?:^|Error: )x (?P<k>a|b)"))
    assert probes == {
        "^": rf"(?:(?P<{PROBE}>^)|Error: )x (?P<k>a|b)",
        "Error: ": rf"(?:^|(?P<{PROBE}>Error: ))x (?P<k>a|b)",
        "a": rf"(?:^|Error: )x (?P<k>(?P<{PROBE}>a)|b)",
        "b": rf"(?:^|Error: )x (?P<k>a|(?P<{PROBE}>b))",
    }
    assert dict(branch_probes(r"x[a|b]y")) == {}  # a `|` inside a class is not a branch


def test_lint_reports_untested_branch_catastrophe_and_shared_examples() -> None:
    risky = GOOD.replace("^boom (?P<n>\\d+)", "^boom (?P<n>\\d+)(?: (?:\\w+\\s?)*)?(?:!|\\?)?")
    twin = GOOD.replace("site.example", "site.twin")
    library = load_library(HEADER, [[("site/a.toml", risky), ("site/b.toml", twin)]])
    kinds = {(i.signature, i.kind) for i in lint_library(library)}
    assert ("site.example", "catastrophic") in kinds
    assert ("site.example", "untested-branch") in kinds
    assert ("site.example", "shared-example") in kinds


def test_the_shipped_library_is_lint_clean(library: Library) -> None:
    assert [str(i) for i in lint_library(library)] == []


def _evil_signature() -> Signature:
    return Signature(
        id="site.evil", version=1, status="experimental", severity="error", fatal=False,
        category="cuda_error", title="evil", patterns=(Pattern(r"^boom(a|aa)+$", ("boom",)),),
        explanation="", remedy="investigate", examples=(Example("boom"),),
        counter_examples=(Example("x"),))


def test_a_catastrophic_pattern_times_out_instead_of_hanging() -> None:
    matcher = Matcher([_evil_signature()], engine="python", timeout=0.02)
    line = parse_line("t", 1, "boom" + "a" * 60 + "!", datetime(2026, 1, 1))
    (record,) = assemble([line])
    assert matcher.match_record(record) == []
    assert matcher.timeouts["site.evil"] == 1


def test_redaction() -> None:
    assert redact("HF_TOKEN=hf_" + "a" * 34) == "HF_TOKEN=***"
    assert redact("{'api_key': 'sk-live-123'}") == "{'api_key': '***'}"
    assert redact("--api-key s3cret --port 8000") == "--api-key *** --port 8000"
    assert redact("https://bob:hunter2@example.org/x") == "https://bob:***@example.org/x"
    assert redact("Authorization: Bearer abcdefghijkl") == "Authorization: Bearer ***"
    harmless = "max_num_batched_tokens=8192 tokenizer='/m' Accepted: 5 tokens"
    assert redact(harmless) == harmless


def test_secrets_in_matched_lines_never_reach_captures_or_evidence(library: Library) -> None:
    matcher = Matcher(library.signatures)
    text = ("(APIServer pid=1) INFO 11-29 22:38:00 [startup.py:75] non-default args: "
            "{'model_tag': '/m', 'hf_token': 'hf_abcdefghijklmnopqrstuvwxyz012345'}")
    (record,) = assemble([parse_line("t", 1, text, datetime(2026, 11, 29))])
    (finding,) = matcher.match_record(record)
    assert "hf_abcdef" not in str(finding.captures)
    assert "hf_abcdef" not in str(finding.evidence)


@pytest.mark.skipif(prefilter._hs is None, reason="hyperscan is not installed here")
def test_hyperscan_and_python_engines_agree() -> None:
    literals = ["is not divisible by tile_n_size", "CUDA error: ", "é unicode", "boom"]
    data = ("x size_n = 4 is not divisible by tile_n_size = 64\nCUDA error: y\n"
            "é unicode boom boom\n").encode()
    hs = prefilter.make_scanner(literals, "hyperscan")
    py = prefilter.make_scanner(literals, "python")
    assert hs.hits(data) == py.hits(data)
    for line in data.decode().splitlines():
        assert hs.present(line) == py.present(line)


def _record_of(*texts: str, first: int = 1) -> Record:
    lines = [parse_line("t", first + i, text, datetime(2026, 11, 29)) for i, text in
             enumerate(texts)]
    (record,) = assemble(lines)
    return record


_TRACEBACK = [
    "(Worker_TP{rank} pid=9{rank}) ERROR 11-29 03:40:4{rank} [multiproc_executor.py:631] "
    + message for message in (
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/site-packages/vllm/v1/worker/gpu_worker.py", line 240, '
        "in load_model",
        "    self.model_runner.load_model()",
        "RuntimeError: The size of tensor a (256) must match the size of tensor b (512) at "
        "non-singleton dimension 1")]


def test_a_repeated_record_is_matched_from_memory_with_its_own_lines(library: Library) -> None:
    """Every rank prints the same traceback: the second costs a lookup, and its findings
    name its own lines, process and time, exactly as matching it afresh would."""
    remembering = Matcher(library.signatures)
    records = [_record_of(*(t.format(rank=rank) for t in _TRACEBACK), first=1 + 10 * rank)
               for rank in range(4)]
    got = [remembering.match_record(r) for r in records]
    assert len(remembering._memo) == 1
    for record, findings in zip(records, got, strict=True):
        fresh = Matcher(library.signatures).match_record(record)
        assert [(f.signature.id, f.captures, f.lineno, f.process, f.time) for f in findings] \
            == [(f.signature.id, f.captures, f.lineno, f.process, f.time) for f in fresh]
    assert [f.lineno for fs in got for f in fs] == [4, 14, 24, 34]
    assert {f.process for fs in got for f in fs} == {f"Worker_TP{r}" for r in range(4)}
    got[0][0].captures["a"] = "changed"  # a finding's captures are its own, not the memo's
    assert remembering.match_record(records[1])[0].captures["a"] == "256"


def test_the_memory_tells_levels_apart(library: Library) -> None:
    """The same text at ERROR is an unrecognised error; at WARNING it is nothing."""
    matcher = Matcher(library.signatures)
    text = "Could not reach the frobnicator at 10.0.0.7:9000"
    error = _record_of(f"(APIServer pid=1) ERROR 03-01 20:10:41 [frob.py:12] {text}")
    warning = _record_of(f"(APIServer pid=1) WARNING 03-01 20:10:41 [frob.py:12] {text}")
    for _ in range(2):
        assert [f.signature.id for f in matcher.match_record(error)] == ["generic.error_line"]
        assert matcher.match_record(warning) == []


def test_a_record_that_ran_over_is_not_remembered() -> None:
    matcher = Matcher([_evil_signature()], engine="python", timeout=0.02, disable_after=None)
    record = _record_of("boom" + "a" * 60 + "!")
    assert matcher.match_record(record) == []
    assert matcher.timeouts["site.evil"] == 1 and matcher._memo == {}


def test_fallback_rules_are_not_tried_once_a_cause_is_found(library: Library) -> None:
    """settle_record drops generic findings beside a specific cause, so they come last and
    are skipped; the outcome is what trying them all and settling gives."""
    record = _record_of(*(t.format(rank=0) for t in _TRACEBACK))
    matcher = Matcher(library.signatures)
    tried: list[str] = []
    for pattern in matcher.candidates(record.message):
        if pattern.generic:
            assert tried, "a generic pattern before the specific ones"
        else:
            tried.append(pattern.signature.id)
    found = matcher.match_record(record)
    assert [f.signature.id for f in found] == ["weights.tensor_size_mismatch"]
    assert any(p.generic for p in matcher.candidates(record.message))


def test_fast_init_builds_what_the_dataclass_init_builds() -> None:
    """ParsedLine and Finding are made once per line and finding, by a quicker __init__:
    the same fields, defaults and errors, and still frozen."""
    import dataclasses

    from logwatch.core.lines.fast_init import fast_init

    @dataclasses.dataclass(frozen=True, slots=True)
    class Plain:
        a: int
        b: str = "x"
        c: tuple[int, ...] = ()

    Quick = fast_init(dataclasses.dataclass(frozen=True, slots=True)(
        type("Quick", (), {"__annotations__": {"a": "int", "b": "str", "c": "tuple[int, ...]"},
                           "b": "x", "c": ()})))
    for args, kwargs in (((1,), {}), ((1, "y"), {}), ((1,), {"c": (2,)}), ((), {"a": 3})):
        assert dataclasses.astuple(Quick(*args, **kwargs)) == dataclasses.astuple(
            Plain(*args, **kwargs))
    with pytest.raises(dataclasses.FrozenInstanceError):
        Quick(1).a = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        Quick()
    with pytest.raises(TypeError):
        fast_init(dataclasses.dataclass(frozen=True, slots=True)(type("Bad", (), {
            "__annotations__": {"a": "list[int]"},
            "a": dataclasses.field(default_factory=list)})))


def _slow_but_matching() -> Signature:
    """Its first branch backtracks for a while on "boom aaa…a!", then the second matches."""
    return Signature(
        id="site.slow", version=1, status="experimental", severity="error", fatal=False,
        category="cuda_error", title="slow",
        patterns=(Pattern(r"^boom (?:(?:a|aa)+b|(?P<tail>a+!))", ("boom",)),),
        explanation="", remedy="investigate", examples=(Example("boom a!"),),
        counter_examples=(Example("x"),))


def test_other_threads_spending_cpu_never_make_a_healthy_pattern_run_over() -> None:
    """`regex` counts its timeout in the process's CPU time. While another thread of the
    daemon computes (DuckDB, hashing, decompressing: code that lets go of the GIL), a
    search that fits this thread's budget must still end in its finding, not a timeout."""
    import hashlib
    import threading

    stop = threading.Event()
    data = b"x" * (32 << 20)

    def burn() -> None:
        while not stop.is_set():
            hashlib.sha256(data).digest()  # releases the GIL: another core's CPU time

    burner = threading.Thread(target=burn, daemon=True)
    burner.start()
    try:
        # a line this pattern needs 10-40 ms of this thread's CPU for, measured beside the
        # other thread (a core shared with it does less in a millisecond)
        rx = compile_pattern(_slow_but_matching().patterns[0].regex)
        n = 16
        while True:
            text = "boom " + "a" * n + "!"
            began = time.thread_time()
            assert rx.search(text)
            needed = time.thread_time() - began
            if needed >= 0.01 or n > 40:
                break
            n += 1
        (record,) = assemble([parse_line("t", 1, text, datetime(2026, 1, 1))])
        matcher = Matcher([_slow_but_matching()], engine="python", timeout=2 * needed,
                          disable_after=None)
        process, thread = time.process_time(), time.thread_time()
        found = [matcher.match_record(record) for _ in range(5)]
        ratio = (time.process_time() - process) / (time.thread_time() - thread)
    finally:
        stop.set()
        burner.join()
    if ratio < 1.6:
        pytest.skip(f"no second core was free for the other thread (CPU ratio {ratio:.2f})")
    assert not matcher.timeouts, f"ran over with the process at {ratio:.1f}x this thread"
    assert all(f and f[0].captures == {"tail": "a" * n + "!"} for f in found)


def test_a_warm_matcher_compiles_nothing_on_its_first_findings(
        library: Library, monkeypatch: pytest.MonkeyPatch) -> None:
    """Matcher.warm (a daemon calls it before it says it is ready) compiles every pattern
    and the secret trigger: matching after it compiles nothing, so a first finding does not
    wait for compiling (30 ms of a daemon's first write -> committed). Without it, the
    first match compiles both."""
    from logwatch.core.safe_text import redact as redact_module
    from logwatch.core.signatures import matcher as matcher_module
    from logwatch.core.signatures.block_scan import BlockScanner
    from tests.conftest import SAMPLES

    data = (SAMPLES / "demo_marlin_and_mtp.log").read_bytes()

    def scan(matcher: Matcher) -> int:
        scanner = BlockScanner(matcher, "file:x", datetime(2026, 11, 29))
        return len(scanner.feed(data) + scanner.finish())

    compiled: list[str] = []
    real_compile, real_trigger = matcher_module.compile_pattern, redact_module._NativeTrigger

    def counting_compile(text: str) -> object:
        compiled.append(text)
        return real_compile(text)

    def counting_trigger(hs: object) -> object:
        compiled.append("trigger")
        return real_trigger(hs)

    monkeypatch.setattr(matcher_module, "compile_pattern", counting_compile)
    monkeypatch.setattr(redact_module, "_NativeTrigger", counting_trigger)
    redact_module._native_trigger.cache_clear()
    cold = scan(Matcher(library.signatures))
    native = importlib.util.find_spec("hyperscan") is not None  # the trigger needs it
    assert ("trigger" in compiled) == native and len(compiled) > 1  # compiled on the way
    redact_module._native_trigger.cache_clear()
    warm = Matcher(library.signatures)
    warm.warm()
    assert len([c for c in compiled if c != "trigger"]) > 200
    compiled.clear()
    assert scan(warm) == cold > 0
    assert compiled == []
