"""Lint rules, the time bound on matching, redaction, and prefilter engine equivalence."""

from __future__ import annotations

from datetime import datetime

import pytest

from logwatch.core import prefilter
from logwatch.core.assemble import assemble
from logwatch.core.library import Library, load_library
from logwatch.core.lint import PROBE, branch_probes, lint_library, nested_quantifier, unanchored
from logwatch.core.matcher import Matcher
from logwatch.core.redact import redact
from logwatch.core.signature import Example, Pattern, Signature
from logwatch.core.vllm_format import parse_line
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
