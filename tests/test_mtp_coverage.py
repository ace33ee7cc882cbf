"""MTP coverage as a function of the vLLM release, what `snapshot show` says of it, and the
ignore-list remedy, offered only once its entries are checked under the method's rules."""

from __future__ import annotations

import json
from pathlib import Path

from logwatch.cli.snapshot import render_snapshot
from logwatch.core.diagnosis.mtp_coverage import suggest_mtp_entries, uncovered_mtp_modules
from logwatch.core.quant.ignore_rules import ERROR, QUANTIZED, UNQUANTIZED
from logwatch.core.quant.layer_outcome import outcome
from logwatch.core.quant.scheme import derive_quant
from logwatch.core.snapshot.model import Snapshot, build_snapshot
from logwatch.host.model_dir import read_model_dir
from tests.conftest import ROOT

MODELS = ROOT / "samples" / "models"
GLM = MODELS / "glm-5.2-quark-mxfp4"
GLM_SHARED = r"re:model\.layers\.78\.mlp\.shared_experts\..*"


def snapshot(model: str | Path, version: str | None = None,
             overrides: dict | None = None) -> Snapshot:
    facts, problems = read_model_dir(MODELS / model if isinstance(model, str) else model,
                                     overrides)
    assert facts is not None and problems == []
    return build_snapshot(model=facts, vllm_version=version)


def glm_with_shared_experts_excluded(version: str | None = None) -> Snapshot:
    exclude = json.loads((GLM / "config.json").read_text())["quantization_config"]["exclude"]
    return snapshot(GLM, version, {"quantization_config": {"exclude": [*exclude, GLM_SHARED]}})


def test_quark_children_rule_covers_from_026_only() -> None:
    old, new = glm_with_shared_experts_excluded("0.25.1"), glm_with_shared_experts_excluded(
        "0.26.0")
    assert "model.layers.78.mlp.experts.*.down_proj" in uncovered_mtp_modules(old)
    assert uncovered_mtp_modules(new) == ()
    unknown = glm_with_shared_experts_excluded()
    assert unknown.model is not None and unknown.model.mtp is not None
    assert unknown.model.mtp.differing_releases() == {"NOT covered": ["0.16.0-0.25.1"],
                                                      "covered": ["0.26.0-0.33.0"]}
    assert uncovered_mtp_modules(unknown, "0.26.0") == ()  # an explicit release wins


def test_snapshot_show_names_the_releases_that_differ() -> None:
    text = render_snapshot(glm_with_shared_experts_excluded())
    assert "NOT covered (vLLM version unknown; judged on 0.16.0-0.33.0)" in text
    assert "NOT covered on 0.16.0-0.25.1" in text and "covered on 0.26.0-0.33.0" in text
    assert "quantized on 0.16.0-0.25.1; unquantized on 0.26.0-0.33.0" in text
    assert "no exclude entry covers it on 0.16.0-0.25.1: upgrade vLLM" in text
    known = render_snapshot(glm_with_shared_experts_excluded("0.26.0"))
    assert "ignore list: covered (under vLLM 0.26.0)" in known


def test_no_entry_is_offered_where_none_can_work() -> None:
    """Quark <= 0.25.1: children entries leave the MoE quantized, a parent entry crashes."""
    suggestion = suggest_mtp_entries(glm_with_shared_experts_excluded("0.25.1"), "exclude")
    assert suggestion is not None and not suggestion.covers
    assert suggestion.failing == ("0.25.1",)
    rules = derive_quant({"quantization_config": {"quant_method": "quark", "exclude": [
        "model.layers.78.mlp.experts"]}}).ignore_rules()
    assert outcome(rules, (0, 25, 1), "model.layers.78.mlp.experts.3.up_proj") == ERROR


def test_modelopt_gets_glob_entries_never_regex() -> None:
    deepseek = snapshot("deepseek-v3-modelopt-nvfp4-legacy", "0.33.0")
    suggestion = suggest_mtp_entries(deepseek, "exclude_modules")
    assert suggestion is not None and suggestion.covers
    assert suggestion.entries == ("model.layers.61.*",)
    assert suggestion.key == "exclude_modules"
    # on 0.9.2-0.11.0 ModelOpt NVFP4 never consults the list for MoE layers
    old = suggest_mtp_entries(snapshot("deepseek-v3-modelopt-nvfp4-legacy", "0.10.2"),
                              "exclude_modules")
    assert old is not None and not old.covers


def test_compressed_tensors_gets_a_regex_entry() -> None:
    uncovered = snapshot("qwen3.6-35b-a3b-nvfp4-mtp-uncovered", "0.33.0")
    suggestion = suggest_mtp_entries(uncovered, "ignore")
    assert suggestion is not None and suggestion.covers and suggestion.entries == (
        r"re:^mtp\.",)
    covered = snapshot("qwen3.6-35b-a3b-nvfp4-mtp-covered", "0.33.0")
    assert suggest_mtp_entries(covered, "ignore") is None
    assert uncovered_mtp_modules(covered) == ()


def test_a_release_older_than_the_architecture_is_not_used() -> None:
    """Qwen3.5 MoE is registered from 0.17.1: a log saying 0.11.2 (whose compressed-tensors
    never reads `ignore` for MoE layers) is judged by the releases that run the model."""
    covered = snapshot("qwen3.6-35b-a3b-nvfp4-mtp-covered", "0.11.2")
    assert uncovered_mtp_modules(covered) == ()
    assert "predates this architecture" in render_snapshot(covered)


def test_gptq_reads_dynamic_and_modules_in_block() -> None:
    quant = derive_quant({"quantization_config": {
        "quant_method": "gptq", "bits": 4, "dynamic": {r"-:^mtp\.": {}},
        "modules_in_block_to_quantize": [["self_attn.q_proj"], ["mlp.down_proj"]]}})
    assert quant.dynamic_keys == (r"-:^mtp\.",) and quant.in_block == ("self_attn.q_proj",
                                                                        "mlp.down_proj")
    rules = quant.ignore_rules()
    assert outcome(rules, (0, 33, 0), "mtp.fc") == UNQUANTIZED
    assert outcome(rules, (0, 33, 0), "model.layers.0.mlp.down_proj") == QUANTIZED
    assert outcome(rules, (0, 33, 0), "model.layers.0.mlp.up_proj") == UNQUANTIZED
    assert outcome(rules, (0, 10, 2), "model.layers.0.mlp.up_proj") == QUANTIZED  # not read
    awq = derive_quant({"quantization_config": {"quant_method": "awq",
                                                "modules_to_not_convert": ["mtp."]}})
    assert outcome(awq.ignore_rules(), (0, 33, 0), "mtp.fc") == UNQUANTIZED


def test_the_snapshot_body_and_history_judge_under_its_release() -> None:
    """`covered` in the snapshot's body (what the history's mtp_covered column reads) follows
    the vLLM release of the snapshot."""
    old = glm_with_shared_experts_excluded("0.25.1").to_dict()["model"]["mtp"]
    new = glm_with_shared_experts_excluded("0.26.0").to_dict()["model"]["mtp"]
    unknown = glm_with_shared_experts_excluded().to_dict()["model"]["mtp"]
    assert (old["covered"], new["covered"], unknown["covered"]) == (False, True, False)
    assert (old["judged_on"], unknown["judged_on"]) == ("0.25.1", "any release")
    assert new["uncovered_bf16"] == [] and "model.layers.78.mlp.experts.*.up_proj" in \
        old["uncovered_bf16"]


def test_an_exclude_entry_naming_the_moe_layer_is_a_load_error_before_026() -> None:
    entries = ["lm_head", "model.layers.78.mlp.experts", GLM_SHARED,
               r"re:model\.layers\.78\.self_attn\..*"]
    old = snapshot(GLM, "0.25.1", {"quantization_config": {"exclude": entries}})
    new = snapshot(GLM, "0.26.0", {"quantization_config": {"exclude": entries}})
    assert "load error: model.layers.78.mlp.experts.*.down_proj" in render_snapshot(old)
    assert uncovered_mtp_modules(new) == ()
    assert old.to_dict()["model"]["mtp"]["load_errors"] == [
        f"model.layers.78.mlp.experts.*.{p}" for p in ("down_proj", "gate_proj", "up_proj")]


def test_the_layout_offers_only_checked_entries() -> None:
    """MtpLayout.suggested_entries: the method's form, and () where nothing can work."""
    deepseek = snapshot("deepseek-v3-modelopt-nvfp4-legacy").model
    assert deepseek is not None and deepseek.mtp is not None
    assert deepseek.mtp.suggested_entries((0, 33, 0)) == ("model.layers.61.*",)
    assert deepseek.mtp.suggested_entries((0, 10, 2)) == ()
    assert deepseek.mtp.suggested_entries() == ()  # 0.8.5-0.11.0 run it too
    qwen = snapshot("qwen3.6-35b-a3b-nvfp4-mtp-uncovered").model
    assert qwen is not None and qwen.mtp is not None
    assert qwen.mtp.suggested_entries() == (r"re:^mtp\.",)


def test_modelopt_mixed_precision_reads_quantized_layers() -> None:
    quant = derive_quant({"quantization_config": {"quant_method": "modelopt", "quantization": {
        "quant_algo": "MIXED_PRECISION", "exclude_modules": ["lm_head"],
        "quantized_layers": {"model.layers.0.self_attn.q_proj": {"quant_algo": "NVFP4"}}}}})
    rules = quant.ignore_rules()
    assert quant.method == "modelopt_mixed" and quant.listed == ("model.layers.0.self_attn.q_proj",)
    assert outcome(rules, (0, 33, 0), "model.layers.0.self_attn.q_proj") == QUANTIZED
    assert outcome(rules, (0, 33, 0), "mtp.fc") == UNQUANTIZED  # not listed
