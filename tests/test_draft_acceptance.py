"""Draft acceptance against a target the configuration sets, in every form vLLM prints it.

vLLM 0.32.0 prints `Avg Draft acceptance rate: 27.3%` after the per-position rates; 0.8.4-0.10.0
`Draft acceptance rate: 31.0%` first; V0 a fraction (`Draft acceptance rate: 0.242`). A rate
under the target (50% by default) is a warning, under 10% a garbage draft (an error), at or
above it a working draft; `scan --min-acceptance` and the daemon's
`signatures.min_acceptance_percent` move the target."""

from __future__ import annotations

import json

import pytest

from logwatch.core.settings.config import parse_config
from logwatch.core.signatures.library import Library, with_acceptance_target
from logwatch.core.signatures.matcher import Matcher
from logwatch.scan.offline import ScanInput, scan_inputs
from tests.inprocess import logwatch_text

HEAD = "(APIServer pid=1) INFO 12-04 19:20:10 [metrics.py:101] "
V1 = (HEAD + "SpecDecoding metrics: Mean acceptance length: 1.55, Accepted throughput: 41.20 "
      "tokens/s, Drafted throughput: 150.90 tokens/s, Accepted: 412 tokens, Drafted: 1509 "
      "tokens, Per-position acceptance rate: 0.412, 0.134, Avg Draft acceptance rate: {}%")
V1_085 = (HEAD + "SpecDecoding metrics: Draft acceptance rate: {}%, Accepted: 310 tokens, "
          "Drafted: 1000 tokens")
V0 = ("INFO 01-05 12:00:00 metrics.py:400] Speculative metrics: Draft acceptance rate: {}, "
      "System efficiency: 0.350, Number of speculative tokens: 2, Number of accepted tokens: "
      "242, Number of draft tokens: 1000, Number of emitted tokens: 600.")
FORMS = {"v1-avg": (V1, 1.0), "v1-0.8.5": (V1_085, 1.0), "v0-fraction": (V0, 0.01)}


def signatures_for(library: Library, line: str) -> list[str]:
    import io

    report = scan_inputs([ScanInput("<stdin>", None, stream=True)], library,
                         stdin=io.BytesIO((line + "\n").encode()),
                         matcher=Matcher(library.signatures))
    return [i["signature"] for i in report["incidents"]]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("percent", "target", "expected"), [
    (27.3, 50.0, "spec_decode.acceptance_below_target"),
    (27.3, 25.0, "spec_decode.acceptance"),
    (80.3, 50.0, "spec_decode.acceptance"),
    (80.3, 90.0, "spec_decode.acceptance_below_target"),
    (4.0, 50.0, "spec_decode.low_acceptance"),
    (4.0, 12.0, "spec_decode.low_acceptance"),  # the garbage line does not move
])
def test_each_form_against_the_target(library: Library, form: str, percent: float,
                                      target: float, expected: str) -> None:
    template, scale = FORMS[form]
    line = template.format(f"{percent * scale:.3f}" if scale != 1 else f"{percent:.1f}")
    targeted = with_acceptance_target(library, target) if target != 50.0 else library
    assert signatures_for(targeted, line) == [expected]


def test_the_scan_flag_moves_the_target_and_refuses_a_garbage_one(tmp_path: object) -> None:
    line = V1.format("27.3") + "\n"
    for flag, expected in ((None, "spec_decode.acceptance_below_target"),
                           ("25", "spec_decode.acceptance")):
        args = ["scan", "--json", "-"] + (["--min-acceptance", flag] if flag else [])
        done = logwatch_text(*args, stdin=line.encode())
        assert [i["signature"] for i in json.loads(done.stdout)["incidents"]] == [expected]
    refused = logwatch_text("scan", "--min-acceptance", "5", "-", stdin=line.encode())
    assert refused.returncode == 2 and "more than 10" in refused.stderr


def test_the_daemon_configuration_key_is_checked() -> None:
    good = parse_config("lw.toml", "[signatures]\nmin_acceptance_percent = 35\n")
    assert not good.problems and good.get("signatures.min_acceptance_percent") == 35
    bad = parse_config("lw.toml", "[signatures]\nmin_acceptance_percent = 8\n")
    assert [p.message for p in bad.problems] == [
        "signatures.min_acceptance_percent is 8: more than 10 (below 10 a draft is garbage, "
        "spec_decode.low_acceptance), at most 100"]
    with pytest.raises(ValueError, match="more than 10"):
        with_acceptance_target(Library("0", (), ()), 10)
