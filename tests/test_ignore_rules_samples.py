"""`snapshot show` and the diagnosis agree with vLLM on the sample models, release by release:
uncovered_mtp_modules names exactly the BF16 MTP modules vLLM's own dispatch (tests/vllm_oracles)
builds quantized or fails on, and the remedy offered covers them there."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from logwatch.core.diagnosis.mtp_coverage import suggest_mtp_entries, uncovered_mtp_modules
from logwatch.core.quant.ignore_rules import MATRIX, UNQUANTIZED, Release, release_text
from logwatch.core.quant.layer_outcome import FC_FORCED_UNQUANTIZED
from logwatch.core.quant.mtp_layout import collapse_experts
from logwatch.core.snapshot.model import build_snapshot
from logwatch.host.model_dir import read_model_dir
from tests import vllm_functions as vs
from tests.conftest import ROOT
from tests.vllm_oracles import classify, oracle_for

pytestmark = pytest.mark.slow
AVAILABLE = [release_text(r) for r in MATRIX if vs.has_release(release_text(r))]
NO_SOURCES = f"no vLLM sources under {vs.SOURCES} (set LOGWATCH_VLLM_SOURCES)"
SAMPLES = ROOT / "samples" / "models"
MTP_SAMPLES = ["qwen3.6-35b-a3b-nvfp4-mtp-uncovered", "qwen3.6-35b-a3b-nvfp4-mtp-covered",
               "glm-5.2-quark-mxfp4", "deepseek-v3-modelopt-nvfp4-legacy"]


@pytest.mark.parametrize("sample", MTP_SAMPLES)
def test_sample_snapshots_agree_with_vllm_on_every_release(sample: str) -> None:
    """`snapshot show` and the diagnosis read uncovered_mtp_modules: for each release that runs
    the sample's architecture, it names exactly the BF16 MTP modules vLLM's own dispatch
    builds quantized (or fails on); the ignore-list remedy it offers covers them there."""
    if not AVAILABLE:
        pytest.skip(NO_SOURCES)
    facts, problems = read_model_dir(SAMPLES / sample)
    assert facts is not None and facts.mtp is not None and problems == []
    method, entries = facts.quant.method, facts.quant.ignore
    assert method is not None
    checked = 0
    for release in (r for r in facts.mtp.releases if release_text(r) in AVAILABLE):
        oracle = oracle_for(method, release_text(release))
        bf16 = [m.name for m in facts.mtp.modules if m.stored == "bf16"]
        want = collapse_experts(m for m in bf16 if _sample_outcome(
            oracle, method, release, m, entries, facts.model_type) != UNQUANTIZED)
        snapshot = build_snapshot(model=facts, vllm_version=release_text(release))
        assert uncovered_mtp_modules(snapshot) == want, release
        suggestion = suggest_mtp_entries(snapshot, facts.quant.ignore_key or "ignore")
        if suggestion is not None and suggestion.covers:
            more = entries + suggestion.entries
            assert all(_sample_outcome(oracle, method, release, m, more, facts.model_type)
                       == UNQUANTIZED for m in bf16), (release, suggestion.entries)
            assert not any(e.startswith("re:") for e in suggestion.entries) or \
                not method.startswith("modelopt")
        checked += 1
    assert checked


def _sample_outcome(oracle: Callable[[str, tuple[str, ...]], str], method: str,
                    release: Release, module: str, entries: tuple[str, ...],
                    model_type: str | None) -> str:
    """vLLM's answer for one sample module: the model file decides first (an nn.Linear
    `eh_proj`; `mtp.fc` built without a quant config, tests/test_ignore_rules_sources.py),
    then the quantization config's dispatch."""
    if module.endswith(".eh_proj"):
        return classify(None, False, release)  # PlainLinear: never asked
    forced = [first for prefix, first in FC_FORCED_UNQUANTIZED
              if (model_type or "").startswith(prefix)]
    if module == "mtp.fc" and method == "modelopt_fp4" and forced and release >= forced[0]:
        return UNQUANTIZED
    return oracle(module, entries)
