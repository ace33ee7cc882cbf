"""Quantization schemes, ignore-list rules and MTP coverage, on the sample model directories."""

from __future__ import annotations

import pytest

from logwatch.core.quant.ignore import merge_overrides
from logwatch.core.quant.ignore_rules import ERROR, QUANTIZED, UNQUANTIZED, parse_release
from logwatch.core.quant.layer_outcome import (
    IgnoreRules,
    outcome,
    outcomes_by_release,
    possible_outcomes,
)
from logwatch.core.quant.scheme import derive_quant
from logwatch.host.model_dir import read_model_dir
from tests.conftest import ROOT

MODELS = ROOT / "samples" / "models"


@pytest.mark.parametrize(
    ("model", "method", "scheme", "marlin_h200", "marlin_b200"),
    [
        ("qwen3.6-35b-a3b-nvfp4-mtp-uncovered", "compressed-tensors", "W4A4_NVFP4", True, False),
        ("qwen3.6-35b-a3b-nvfp4a16", "compressed-tensors", "NVFP4A16", True, False),
        ("qwen3-32b-w4a16", "compressed-tensors", "W4A16", True, True),
        ("deepseek-v3-modelopt-nvfp4-legacy", "modelopt_fp4", "W4A4_NVFP4", True, False),
        ("modelopt-nvfp4-autodowngrade", "modelopt_fp4", "W4A16_NVFP4", True, False),
        ("glm-5.2-quark-mxfp4", "quark", "MXFP4", True, False),
        ("llama-3.1-8b-fp8", "compressed-tensors", "FP8", False, False),
        ("qwen2.5-72b-gptq-int4", "gptq", "GPTQ", True, True),
    ],
)
def test_scheme_and_marlin_path(model: str, method: str, scheme: str, marlin_h200: bool,
                                marlin_b200: bool) -> None:
    facts, problems = read_model_dir(MODELS / model)
    assert facts is not None and problems == []
    assert (facts.quant.method, facts.quant.scheme) == (method, scheme)
    assert facts.quant.marlin_path(90) is marlin_h200
    assert facts.quant.marlin_path(100) is marlin_b200
    unknown_gpu = True if scheme in ("W4A16", "GPTQ") else None  # int4 is Marlin everywhere
    assert facts.quant.marlin_path(None) is unknown_gpu


def test_legacy_hf_quant_config_is_read_only_without_quantization_config() -> None:
    legacy = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4",
                                                                 "exclude_modules": ["x"]}}
    assert derive_quant({}, legacy).source == "hf_quant_config.json"
    ct = {"quantization_config": {"quant_method": "gptq", "bits": 4}}
    assert derive_quant(ct, legacy).method == "gptq"


def test_autodowngrade_is_explained() -> None:
    facts, _ = read_model_dir(MODELS / "modelopt-nvfp4-autodowngrade")
    assert facts is not None and facts.quant.weight_only
    assert any("auto-downgrades" in n for n in facts.quant.notes)


@pytest.mark.parametrize(
    ("module", "entries", "method", "release", "expected"),
    [
        ("mtp.fc", ["re:^mtp\\."], "compressed-tensors", "0.33.0", UNQUANTIZED),
        ("mtp.fc", ["mtp.*"], "compressed-tensors", "0.33.0", QUANTIZED),  # no fnmatch
        ("mtp.fc", ["mtp.*"], "modelopt_fp4", "0.33.0", UNQUANTIZED),  # ModelOpt: fnmatch
        ("mtp.layers.0.self_attn.o_proj", ["re:^mtp\\."], "modelopt_fp4", "0.33.0",
         QUANTIZED),  # ModelOpt reads no `re:` entry, in any release
        ("mtp.fc", ["re:^mtp\\."], "modelopt", "0.10.2", QUANTIZED),
        ("mtp.fc", ["mtp.*"], "modelopt", "0.11.2", QUANTIZED),  # FP8: no glob before 0.12
        ("mtp.fc", ["mtp."], "modelopt", "0.11.2", UNQUANTIZED),  # ... but substrings
        ("model.layers.61.self_attn.q_a_proj", ["model.layers.61.self_attn"], "modelopt_fp4",
         "0.20.2", UNQUANTIZED),  # ModelOpt legacy substring match
        ("x.self_attn.q_proj", ["x.self_attn.qkv_proj"], "compressed-tensors", "0.20.2",
         UNQUANTIZED),  # a shard matches through its exact fused name
        ("x.self_attn.q_proj", ["x.self_attn.qkv_proj"], "quark", "0.29.0", QUANTIZED),
        ("x.self_attn.q_proj", ["x.self_attn.qkv_proj"], "quark", "0.30.0", UNQUANTIZED),
        ("x.mlp.up_proj", ["re:.*gate_up_proj"], "compressed-tensors", "0.29.0", QUANTIZED),
        ("x.mlp.up_proj", ["re:.*gate_up_proj"], "compressed-tensors", "0.30.0", UNQUANTIZED),
        ("x.self_attn.q_a_proj", ["x.self_attn.q_a_proj"], "compressed-tensors", "0.33.0",
         ERROR),  # fused_qkv_a_proj: one shard of two ignored
        ("model.layers.78.mlp.experts.5.up_proj", ["model.layers.78.mlp.experts.0.down_proj"],
         "quark", "0.26.0", UNQUANTIZED),  # Quark's MoE children rule
        ("model.layers.78.mlp.experts.5.up_proj", ["model.layers.78.mlp.experts.0.down_proj"],
         "quark", "0.25.1", QUANTIZED),  # ... not before 0.26: the 256 vs 512 mismatch
        ("model.layers.78.mlp.experts.5.up_proj", ["model.layers.78.mlp.experts"],
         "quark", "0.25.1", ERROR),  # the parent named: the bare assert
        ("model.layers.78.mlp.experts.5.up_proj", ["model.layers.78.mlp.experts.0.down_proj"],
         "compressed-tensors", "0.33.0", ERROR),  # expert 0 decides: mixed
        ("mtp.layers.0.mlp.experts.5.up_proj", ["re:^mtp\\."], "compressed-tensors", "0.11.2",
         QUANTIZED),  # the ignore list is not read for MoE layers before 0.12
        ("model.layers.61.eh_proj", [], "compressed-tensors", "0.33.0", UNQUANTIZED),
        ("model.layers.61.shared_head.head", [], "quark", "0.33.0", UNQUANTIZED),
        ("mtp.fc", [], "modelopt_fp4", "0.19.1", QUANTIZED),
        ("mtp.fc", [], "modelopt_fp4", "0.20.2", UNQUANTIZED),  # Qwen3.5 forces it
    ],
)
def test_ignore_rules(module: str, entries: list[str], method: str, release: str,
                      expected: str) -> None:
    rules = IgnoreRules(method, tuple(entries), model_type="qwen3_5_moe")
    parsed = parse_release(release)
    assert parsed is not None and outcome(rules, parsed, module) == expected


def test_pathological_pattern_ignores_nothing() -> None:
    rules = IgnoreRules("compressed-tensors", ("re:(a|aa)+$",))
    assert outcome(rules, (0, 33, 0), "a" * 40 + "b.down_proj") == QUANTIZED


def test_unknown_release_gives_every_possible_outcome() -> None:
    rules = IgnoreRules("quark", ("model.layers.78.mlp.experts",))
    module = "model.layers.78.mlp.experts.1.up_proj"
    assert possible_outcomes(rules, module, None) == {ERROR, UNQUANTIZED}
    assert possible_outcomes(rules, module, (0, 26, 0)) == {UNQUANTIZED}
    assert outcomes_by_release(rules, module)[UNQUANTIZED][0] == "0.26.0"


def test_mtp_coverage_on_the_samples() -> None:
    uncovered, _ = read_model_dir(MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered")
    covered, _ = read_model_dir(MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-covered")
    assert uncovered is not None and uncovered.mtp is not None
    assert covered is not None and covered.mtp is not None
    assert not uncovered.mtp.covered and covered.mtp.covered
    assert uncovered.mtp.releases[0] == (0, 17, 1)  # the first release running Qwen3.5 MoE
    assert uncovered.mtp.layout == "mtp_prefix"
    assert "mtp.fc" in uncovered.mtp.uncovered_bf16
    assert "mtp.layers.0.mlp.experts.*.down_proj" in uncovered.mtp.uncovered_bf16
    assert not any("gate." in n or n.endswith(".gate") for n in uncovered.mtp.uncovered_bf16)

    deepseek, _ = read_model_dir(MODELS / "deepseek-v3-modelopt-nvfp4-legacy")
    assert deepseek is not None and deepseek.mtp is not None
    assert (deepseek.mtp.layout, deepseek.mtp.first_layer) == ("extra_layers", 61)
    missing = deepseek.mtp.uncovered_at((0, 33, 0))
    assert "model.layers.61.eh_proj" not in missing  # a plain Linear: never quantized
    assert not any(".self_attn." in n for n in missing)  # `model.layers.61.self_attn*` covers
    assert any(".self_attn." in n for n in deepseek.mtp.uncovered_at((0, 8, 5)))  # no glob yet

    glm, _ = read_model_dir(MODELS / "glm-5.2-quark-mxfp4")
    assert glm is not None and glm.mtp is not None
    assert not any(".experts." in n for n in glm.mtp.uncovered_at((0, 26, 0)))  # children
    assert any(".experts." in n for n in glm.mtp.uncovered_at((0, 25, 1)))  # rule from 0.26
    assert "model.layers.78.mlp.shared_experts.down_proj" in glm.mtp.uncovered_bf16
    assert glm.mtp.differing_releases() == {"NOT covered": ["0.16.0-0.33.0"]} or \
        "model.layers.78.mlp.shared_experts.down_proj" in glm.mtp.uncovered_at((0, 33, 0))


def test_hf_overrides_replacing_the_ignore_list_is_noted() -> None:
    override = {"quantization_config": {"ignore": ["lm_head", "re:^mtp\\."]}}
    facts, _ = read_model_dir(MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered", override)
    assert facts is not None and facts.mtp is not None
    assert facts.mtp.covered  # the override covers MTP ...
    assert "re:.*mlp.gate$" in facts.ignore_replaced  # ... but dropped the router entries
    assert facts.effective_ignore == ("lm_head", "re:^mtp\\.")
    assert merge_overrides({"a": {"b": 1, "c": [1]}}, {"a": {"c": [2]}}) == {"a": {"b": 1,
                                                                                   "c": [2]}}


def test_more_scheme_sources() -> None:
    standalone = {"quant_method": "awq", "bits": 4, "group_size": 128}
    facts = derive_quant({"architectures": ["X"]}, None, standalone)
    assert (facts.method, facts.scheme, facts.source) == ("awq", "AWQ",
                                                          "quantization_config.json")
    explicit = derive_quant({"quantization_config": {"quant_method": "modelopt",
                                                     "quant_algo": "W4A16_NVFP4",
                                                     "exclude_modules": ["lm_head"]}})
    assert (explicit.scheme, explicit.weight_only, explicit.ignore_key) == (
        "W4A16_NVFP4", True, "exclude_modules")
    unknown = derive_quant({"quantization_config": {"quant_method": "bitsandbytes"}})
    assert unknown.scheme == "unknown" and "not one logwatch interprets" in unknown.notes[0]
    assert derive_quant({}).quantized is False
