"""logwatch's release-aware ignore rules against vLLM's own functions, release by release.

For every release of core.quant.ignore_rules.MATRIX whose sources are at hand
(LOGWATCH_VLLM_SOURCES),
the quantization configs' `get_quant_method` dispatch and the matching functions it calls
(tests/vllm_oracles.py; GPTQ and AWQ: tests/test_ignore_rules_sources.py) answer a table of
cases, the discrepancies of issue 10 among them, and logwatch's model must answer the same."""

from __future__ import annotations

import pytest

from logwatch.core.quant.ignore_rules import MATRIX, release_text
from logwatch.core.quant.layer_outcome import IgnoreRules, outcome
from tests import vllm_functions as vs
from tests.vllm_oracles import (
    MODELOPT_CLASSES,
    as_release,
    ct_oracle,
    fp8_oracle,
    mixed_oracle,
    modelopt_oracle,
    quark_oracle,
)

# Each test loads and runs a release's sources: seconds on a busy machine.
pytestmark = pytest.mark.slow
RELEASES = [release_text(r) for r in MATRIX]
AVAILABLE = [r for r in RELEASES if vs.has_release(r)]
NO_SOURCES = f"no vLLM sources under {vs.SOURCES} (set LOGWATCH_VLLM_SOURCES)"

MTP_Q = "mtp.layers.0.self_attn"
MTP_MOE = "mtp.layers.0.mlp.experts"
DS_MTP = "model.layers.61"
CHILDREN = [f"{MTP_MOE}.{e}.{p}" for e in range(2) for p in ("gate_proj", "up_proj",
                                                               "down_proj")]
GLM_CHILDREN = [f"{MTP_MOE}.*.{p}" for p in ("gate_proj", "up_proj", "down_proj")]
# (checkpoint module, ignore entries): the discrepancy cases of issue 10 and their neighbours
CASES: list[tuple[str, tuple[str, ...]]] = [
    (name, tuple(entries)) for name, entries in [
        ("mtp.fc", []), ("mtp.fc", ["mtp.fc"]), ("mtp.fc", [r"re:^mtp\."]),
        ("mtp.fc", ["mtp.*"]), ("mtp.fc", ["mtp."]), ("mtp.fc", ["mtp"]),
        (f"{MTP_Q}.q_proj", [f"{MTP_Q}.q_proj", f"{MTP_Q}.k_proj", f"{MTP_Q}.v_proj"]),
        (f"{MTP_Q}.q_proj", [f"{MTP_Q}.qkv_proj"]), (f"{MTP_Q}.q_proj", ["re:.*qkv_proj"]),
        (f"{MTP_Q}.q_proj", [f"{MTP_Q}.q_proj"]), (f"{MTP_Q}.q_proj", [r"re:^mtp\."]),
        (f"{MTP_Q}.q_proj", ["mtp.*"]), (f"{MTP_Q}.o_proj", ["mtp.layers.0"]),
        (f"{DS_MTP}.self_attn.q_a_proj", [f"{DS_MTP}.self_attn.q_a_proj",
                                          f"{DS_MTP}.self_attn.kv_a_proj_with_mqa"]),
        (f"{DS_MTP}.self_attn.q_a_proj", [f"{DS_MTP}.self_attn.fused_qkv_a_proj"]),
        (f"{DS_MTP}.self_attn.q_a_proj", [r"re:^model\.layers\.61\."]),
        (f"{DS_MTP}.self_attn.q_a_proj", [f"{DS_MTP}.*"]),
        (f"{DS_MTP}.mlp.shared_experts.down_proj", [f"{DS_MTP}.mlp.shared_experts"]),
        ("language_model.model.layers.0.mlp.down_proj", ["model.layers.0.mlp.down_proj"]),
        (f"{MTP_MOE}.0.down_proj", []), (f"{MTP_MOE}.0.down_proj", CHILDREN),
        (f"{MTP_MOE}.0.down_proj", GLM_CHILDREN), (f"{MTP_MOE}.0.down_proj", [MTP_MOE]),
        (f"{MTP_MOE}.0.down_proj", [r"re:^mtp\."]), (f"{MTP_MOE}.0.down_proj", ["mtp.*"]),
        (f"{MTP_MOE}.0.down_proj", [f"{MTP_MOE}.0.gate_proj"]),
        (f"{MTP_MOE}.0.down_proj", [r"re:.*experts\.0\.(gate|up)_proj"]),
        (f"{MTP_MOE}.3.down_proj", [f"{MTP_MOE}.0.gate_proj", f"{MTP_MOE}.0.up_proj",
                                    f"{MTP_MOE}.0.down_proj"]),
    ]]
# LM heads (a ParallelLMHead, not a LinearBase)
HEAD_CASES = [(f"{DS_MTP}.shared_head.head", ()), (f"{DS_MTP}.shared_head.head",
                                                    (f"{DS_MTP}.shared_head*",))]

@pytest.mark.parametrize("release", RELEASES)
def test_compressed_tensors_matches_vllm(release: str) -> None:
    if release not in AVAILABLE:
        pytest.skip(NO_SOURCES)
    oracle = ct_oracle(release)
    rules = lambda entries: IgnoreRules("compressed-tensors", entries)  # noqa: E731
    wrong = [(m, e, got, want) for m, e in CASES + HEAD_CASES
             if (got := outcome(rules(e), as_release(release), m)) != (want := oracle(m, e))]
    assert wrong == []


@pytest.mark.parametrize("release", RELEASES)
def test_quark_matches_vllm(release: str) -> None:
    if release not in AVAILABLE:
        pytest.skip(NO_SOURCES)
    oracle = quark_oracle(release)
    wrong = [(m, e, got, want) for m, e in CASES + HEAD_CASES
             if (got := outcome(IgnoreRules("quark", e), as_release(release), m))
             != (want := oracle(m, e))]
    assert wrong == []


@pytest.mark.parametrize("method", sorted(MODELOPT_CLASSES))
@pytest.mark.parametrize("release", RELEASES)
def test_modelopt_matches_vllm(release: str, method: str) -> None:
    if release not in AVAILABLE:
        pytest.skip(NO_SOURCES)
    oracle = modelopt_oracle(release, method)
    wrong = [(m, e, got, want) for m, e in CASES + HEAD_CASES
             if (got := outcome(IgnoreRules(method, e), as_release(release), m))
             != (want := oracle(m, e))]
    assert wrong == []


@pytest.mark.parametrize("release", RELEASES)
def test_fp8_matches_vllm(release: str) -> None:
    if release not in AVAILABLE:
        pytest.skip(NO_SOURCES)
    oracle = fp8_oracle(release)
    wrong = [(m, e, got, want) for m, e in CASES + HEAD_CASES
             if (got := outcome(IgnoreRules("fp8", e), as_release(release), m))
             != (want := oracle(m, e))]
    assert wrong == []


MIXED_LISTED = (f"{MTP_Q}.q_proj", f"{MTP_Q}.k_proj", f"{MTP_Q}.v_proj", "mtp.fc",
                f"{MTP_MOE}.0.gate_proj", f"{DS_MTP}.self_attn.q_a_proj",
                f"{DS_MTP}.self_attn.kv_a_proj_with_mqa", f"{DS_MTP}.shared_head.head")


@pytest.mark.parametrize("release", RELEASES)
def test_modelopt_mixed_precision_matches_vllm(release: str) -> None:
    """Quantized only where `quantized_layers` says so, unless excluded (0.17.1 on)."""
    if release not in AVAILABLE:
        pytest.skip(NO_SOURCES)
    oracle = mixed_oracle(release, MIXED_LISTED)
    if oracle is None:
        assert as_release(release) < (0, 17, 1)
        return
    rules = lambda e: IgnoreRules("modelopt_mixed", e, listed=MIXED_LISTED)  # noqa: E731
    wrong = [(m, e, got, want) for m, e in CASES + HEAD_CASES
             if (got := outcome(rules(e), as_release(release), m)) != (want := oracle(m, e))]
    assert wrong == []
