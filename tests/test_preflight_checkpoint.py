"""The pre-flight's checkpoint checks on model directories written here in the real formats
(tests/model_dirs.py): headers read and never a weight, each failure vLLM meets when loading
predicted with the file and tensor that show it, and a sound checkpoint of every described
family judged sound."""

from __future__ import annotations

import json
import shlex
import struct
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.checkpoint.checks import checkpoint_problems
from logwatch.core.quant.scheme import derive_quant
from logwatch.host.checkpoint_files import read_checkpoint
from tests.conftest import ROOT
from tests.inprocess import logwatch_text
from tests.model_dirs import TINY_LLAMA, Shape, llama_tensors, mlp, model_dir, write_safetensors


def judge(path: Path, release: tuple[int, int, int] | None = (0, 32, 0)):  # type: ignore[no-untyped-def]
    files = read_checkpoint(path)
    assert files is not None
    quant = derive_quant(files.config) if files.config is not None else None
    return checkpoint_problems(files, quant, release)


def kinds(found) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(p.kind for p in found.certain)


@pytest.mark.parametrize("shards", [1, 3])
def test_a_sound_checkpoint_predicts_nothing(tmp_path: Path, shards: int) -> None:
    found = judge(model_dir(tmp_path / "m", shards=shards))
    assert found.certain == [] and found.uncertain == [] and found.notes == []


def test_a_tensor_of_the_wrong_shape_is_named_with_its_file_and_the_config_keys(
        tmp_path: Path) -> None:
    tensors = llama_tensors()
    tensors["model.layers.1.mlp.gate_proj.weight"] = ("F32", (64, 64))  # 128 rows wanted
    found = judge(model_dir(tmp_path / "m", tensors=tensors, shards=2))
    assert kinds(found) == ["weight_shape"]
    problem = found.certain[0]
    assert "model.layers.1.mlp.gate_proj.weight is F32 [64, 64], expected [128, 64] " \
           "(intermediate_size, hidden_size)" in problem.reason
    assert problem.evidence == ("model-00001-of-00002.safetensors: "
                                "model.layers.1.mlp.gate_proj.weight",) or \
        problem.evidence == ("model-00002-of-00002.safetensors: "
                             "model.layers.1.mlp.gate_proj.weight",)
    assert problem.signature == "weights.narrow_out_of_range"


def test_a_config_that_disagrees_everywhere_is_one_problem_with_a_few_examples(
        tmp_path: Path) -> None:
    path = model_dir(tmp_path / "m")
    (path / "config.json").write_text(json.dumps({**TINY_LLAMA, "hidden_size": 128}))
    (problem,) = judge(path).certain
    assert problem.config["mismatched"] == 1 + 2 * 9 + 1 + 1  # every tensor but none
    assert len(problem.details) == 4


def test_an_index_naming_a_shard_that_is_not_there(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "m", shards=2)
    (path / "model-00002-of-00002.safetensors").unlink()
    found = judge(path)
    assert kinds(found) == ["shard_missing"]
    assert "model-00002-of-00002.safetensors" in found.certain[0].reason
    assert found.certain[0].signature == "model.shard_missing"


def test_a_shard_cut_short_or_not_a_safetensors_file(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "m", shards=2)
    shard = path / "model-00001-of-00002.safetensors"
    with open(shard, "r+b") as fh:
        fh.truncate(shard.stat().st_size - 1)
    (path / "model-00002-of-00002.safetensors").write_bytes(struct.pack("<Q", 1 << 40) + b"{")
    found = judge(path)
    assert kinds(found) == ["shard_damaged", "shard_damaged"]
    reasons = " / ".join(p.reason for p in found.certain)
    assert "model-00001-of-00002.safetensors: its tensors need" in reasons
    assert "cut short" in reasons and "not a safetensors file" in reasons


@pytest.mark.parametrize("header", [b"not json", b"[1, 2]",
                                    b'{"a": {"dtype": "F32", "shape": [2], '
                                    b'"data_offsets": [0, 4]}}'])
def test_a_header_that_is_not_what_it_says_is_damage_not_a_crash(tmp_path: Path,
                                                                 header: bytes) -> None:
    path = model_dir(tmp_path / "m")
    (path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header
                                             + b"\0" * 64)
    assert kinds(judge(path)) == ["shard_damaged"]


@pytest.mark.parametrize("text", ['{"model_type": "llama", "hidden', "\xff\xfe", "[]"])
def test_a_config_json_vllm_cannot_read(tmp_path: Path, text: str) -> None:
    path = model_dir(tmp_path / "m")
    (path / "config.json").write_bytes(text.encode("latin-1"))
    (problem,) = judge(path).certain
    assert problem.kind == "config_unreadable"
    if text.startswith("{"):
        assert "not valid JSON" in problem.reason and "line 1" in problem.reason
        assert problem.signature == "model.config_not_json"


def test_a_directory_without_weights(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "m")
    (path / "model.safetensors").unlink()
    assert kinds(judge(path)) == ["no_weights"]
    (path / "pytorch_model.bin").write_bytes(b"")
    found = judge(path)
    assert found.certain == [] and "not in safetensors" in found.notes[0]


GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False, "sym": True}


def gptq_tensors(config: dict[str, Any], pack_in: int = 8) -> dict[str, Shape]:
    """GPTQ's packed layout, by hand: qweight int32 (in / 8, out), qzeros (in / group,
    out / 8), scales F16 (in / group, out), g_idx (in,)."""
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name, (dtype, shape) in llama_tensors(config, "F16").items():
        if len(shape) == 2 and ".layers." in name:
            o, i = shape
            m = name.removesuffix(".weight")
            out |= {f"{m}.qweight": ("I32", (i // pack_in, o)),
                    f"{m}.qzeros": ("I32", (i // 32, o // 8)),
                    f"{m}.scales": ("F16", (i // 32, o)), f"{m}.g_idx": ("I32", (i,))}
        else:
            out[name] = (dtype, shape)
    return out


def test_gptq_packed_as_gptq_packs_is_sound_and_unpacked_weights_are_not(tmp_path: Path) -> None:
    config = {**TINY_LLAMA, "quantization_config": GPTQ, "torch_dtype": "float16"}
    assert judge(model_dir(tmp_path / "packed", config, gptq_tensors(config))).certain == []
    unpacked = judge(model_dir(tmp_path / "plain", config, llama_tensors(config, "F16")))
    assert kinds(unpacked) == ["weight_not_quantized"]
    assert "model.layers.0.mlp.down_proj.weight first" in unpacked.certain[0].reason


def test_a_packed_layer_whose_unpacked_width_disagrees(tmp_path: Path) -> None:
    config = {**TINY_LLAMA, "quantization_config": GPTQ}
    tensors = gptq_tensors(config)
    tensors["model.layers.0.mlp.down_proj.qweight"] = ("I32", (8, 64))  # in 64, want 128
    (problem,) = judge(model_dir(tmp_path / "m", config, tensors)).certain
    assert "model.layers.0.mlp.down_proj.qweight is I32 [8, 64] (GPTQ 4-bit, 8 a word " \
           "along in), unpacked [64, 64], expected [64, 128]" in problem.reason


def test_nvfp4_two_values_a_byte(tmp_path: Path) -> None:
    config = {**TINY_LLAMA, "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
        "exclude_modules": ["lm_head"]}}
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name, (dtype, shape) in llama_tensors(config, "BF16").items():
        if len(shape) == 2 and ".layers." in name:
            m = name.removesuffix(".weight")
            tensors |= {name: ("U8", (shape[0], shape[1] // 2)),
                        f"{m}.weight_scale": ("F8_E4M3", (shape[0], shape[1] // 16)),
                        f"{m}.weight_scale_2": ("F32", ()), f"{m}.input_scale": ("F32", ())}
        else:
            tensors[name] = (dtype, shape)
    assert judge(model_dir(tmp_path / "ok", config, tensors)).certain == []
    tensors["model.layers.1.self_attn.o_proj.weight"] = ("U8", (64, 16))  # in 32: short
    (problem,) = judge(model_dir(tmp_path / "bad", config, tensors)).certain
    assert "o_proj.weight is U8 [64, 16] (FP4, 2 a byte), unpacked [64, 32], expected " \
           "[64, 64] (hidden_size, num_attention_heads x head_dim)" in problem.reason


QWEN3_MOE = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
             "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32,
             "num_experts": 4, "num_experts_per_tok": 2, "decoder_sparse_step": 1,
             "mlp_only_layers": [0], "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 96,
             "tie_word_embeddings": True}


def qwen3_moe_tensors() -> dict[str, tuple[str, tuple[int, ...]]]:
    """Qwen3-MoE's tensors by hand: q/k norms over head_dim, head_dim given (not hidden /
    heads), layer 0 dense (mlp_only_layers), layer 1 routed experts and a router."""
    t: dict[str, tuple[str, tuple[int, ...]]] = {
        "model.embed_tokens.weight": ("BF16", (96, 64)), "model.norm.weight": ("BF16", (64,))}
    for i in range(2):
        p = f"model.layers.{i}."
        t |= {p + "input_layernorm.weight": ("BF16", (64,)),
              p + "post_attention_layernorm.weight": ("BF16", (64,)),
              p + "self_attn.q_proj.weight": ("BF16", (128, 64)),
              p + "self_attn.k_proj.weight": ("BF16", (64, 64)),
              p + "self_attn.v_proj.weight": ("BF16", (64, 64)),
              p + "self_attn.o_proj.weight": ("BF16", (64, 128)),
              p + "self_attn.q_norm.weight": ("BF16", (32,)),
              p + "self_attn.k_norm.weight": ("BF16", (32,))}
    t |= mlp("model.layers.0.mlp.", 96, 64) | {"model.layers.1.mlp.gate.weight": ("BF16", (4, 64))}
    for e in range(4):
        t |= mlp(f"model.layers.1.mlp.experts.{e}.", 32, 64)
    return t


def test_a_qwen3_moe_checkpoint_and_an_expert_of_the_wrong_width(tmp_path: Path) -> None:
    tensors = qwen3_moe_tensors()
    assert judge(model_dir(tmp_path / "ok", QWEN3_MOE, tensors)).certain == []
    tensors["model.layers.1.mlp.experts.3.down_proj.weight"] = ("BF16", (64, 16))
    (problem,) = judge(model_dir(tmp_path / "bad", QWEN3_MOE, tensors)).certain
    assert "experts.3.down_proj.weight is BF16 [64, 16], expected [64, 32] (hidden_size, " \
           "moe_intermediate_size)" in problem.reason


def test_larger_along_the_loaders_share_is_cut_to_size_a_maybe(tmp_path: Path) -> None:
    """vLLM narrows a column-parallel weight's rows (a row-parallel one's columns) to its
    share and copies: a checkpoint larger there loads cut, without a word (vLLM 0.32.0's
    parameter loaders); larger along the other dimension fails its shape assertion."""
    tensors = llama_tensors()
    tensors["model.layers.0.mlp.up_proj.weight"] = ("F32", (256, 64))  # out 256 > 128
    tensors["model.layers.0.mlp.down_proj.weight"] = ("F32", (64, 256))  # in 256 > 128
    found = judge(model_dir(tmp_path / "cut", tensors=tensors))
    assert found.certain == [] and [p.kind for p in found.uncertain] == ["weight_cut"]
    assert found.uncertain[0].config == {"cut": 2}
    tensors["model.layers.0.mlp.up_proj.weight"] = ("F32", (128, 96))  # in: must be equal
    tensors["model.norm.weight"] = ("F32", (65,))
    tensors["model.embed_tokens.weight"] = ("F32", (128, 64))  # vocab rows: exactly 96
    found = judge(model_dir(tmp_path / "fail", tensors=tensors))
    assert kinds(found) == ["weight_shape"] and found.certain[0].config == {"mismatched": 3}


DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
               "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 16,
               "n_routed_experts": 4, "n_shared_experts": 1, "first_k_dense_replace": 1,
               "moe_layer_freq": 1, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 4, "q_lora_rank": 48, "kv_lora_rank": 32,
               "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
               "vocab_size": 96, "num_nextn_predict_layers": 1}


def deepseek_tensors() -> dict[str, tuple[str, tuple[int, ...]]]:
    """DeepSeek-V3's tensors by hand: MLA (q LoRA 48, kv LoRA 32 + rope 8), layer 0 dense,
    layer 1 four routed experts of 16, one shared, a router with its score bias; an MTP
    layer (index 2) that is not judged."""
    t: dict[str, tuple[str, tuple[int, ...]]] = {
        "model.embed_tokens.weight": ("BF16", (96, 64)), "model.norm.weight": ("BF16", (64,)),
        "lm_head.weight": ("BF16", (96, 64)),
        "model.layers.2.eh_proj.weight": ("BF16", (64, 128))}
    for i in range(2):
        p = f"model.layers.{i}."
        t |= {p + "input_layernorm.weight": ("BF16", (64,)),
              p + "post_attention_layernorm.weight": ("BF16", (64,)),
              p + "self_attn.q_a_proj.weight": ("BF16", (48, 64)),
              p + "self_attn.q_a_layernorm.weight": ("BF16", (48,)),
              p + "self_attn.q_b_proj.weight": ("BF16", (4 * 24, 48)),
              p + "self_attn.kv_a_proj_with_mqa.weight": ("BF16", (40, 64)),
              p + "self_attn.kv_a_layernorm.weight": ("BF16", (32,)),
              p + "self_attn.kv_b_proj.weight": ("BF16", (4 * 32, 32)),
              p + "self_attn.o_proj.weight": ("BF16", (64, 64))}
    t |= mlp("model.layers.0.mlp.", 96, 64) | mlp("model.layers.1.mlp.shared_experts.", 16, 64)
    t |= {"model.layers.1.mlp.gate.weight": ("BF16", (4, 64)),
          "model.layers.1.mlp.gate.e_score_correction_bias": ("F32", (4,))}
    for e in range(4):
        t |= mlp(f"model.layers.1.mlp.experts.{e}.", 16, 64)
    return t


def test_a_deepseek_v3_checkpoint_and_a_kv_lora_rank_that_disagrees(tmp_path: Path) -> None:
    assert judge(model_dir(tmp_path / "ok", DEEPSEEK_V3, deepseek_tensors())).certain == []
    (problem,) = judge(model_dir(tmp_path / "bad", {**DEEPSEEK_V3, "kv_lora_rank": 64},
                                 deepseek_tensors())).certain
    assert "kv_lora_rank" in problem.reason


def test_a_family_not_described_is_not_judged(tmp_path: Path) -> None:
    config = {**TINY_LLAMA, "model_type": "phi3", "architectures": ["Phi3ForCausalLM"]}
    tensors = llama_tensors()
    tensors["model.layers.0.mlp.gate_proj.weight"] = ("F32", (1, 1))
    found = judge(model_dir(tmp_path / "m", config, tensors))
    assert found.certain == [] and "'phi3' is not among the families" in found.notes[0]


def test_headers_are_read_not_weights(tmp_path: Path) -> None:
    """A shard of 4 GiB of (sparse) data is judged from its header alone."""
    path = model_dir(tmp_path / "m")
    big = llama_tensors()
    big["model.embed_tokens.weight"] = ("F32", (1 << 20, 1 << 10))
    write_safetensors(path / "model.safetensors", big)
    (problem,) = judge(path).certain
    assert "model.embed_tokens.weight is F32 [1048576, 1024]" in problem.reason


def run_preflight(model: Path, flags: str = "", *extra: str, env: str = ""):  # type: ignore[no-untyped-def]
    cmdline = f"{env} vllm serve {shlex.quote(str(model))} {flags}".strip()
    return logwatch_text("preflight", "--model-dir", str(model), "--cmdline", cmdline,
                         "--vllm-version", "0.32.0", *extra)


def test_preflight_names_the_failure_vllm_prints_and_its_evidence(tmp_path: Path) -> None:
    tensors = llama_tensors()
    tensors["model.layers.0.mlp.gate_proj.weight"] = ("F32", (64, 64))
    path = model_dir(tmp_path / "wrong-shape", tensors=tensors)
    done = run_preflight(path, "--dtype float32")
    assert done.returncode == 1, done.stderr
    assert "FAIL    tensor shapes disagree with config.json" in done.stdout
    assert "evidence: model.safetensors: model.layers.0.mlp.gate_proj.weight" in done.stdout
    body = json.loads(run_preflight(path, "", "--json").stdout)
    (problem,) = body["problems"]
    assert problem["stage"] == "weights" and problem["signature"] == "weights.narrow_out_of_range"
    assert run_preflight(model_dir(tmp_path / "sound")).returncode == 0


def test_a_model_that_is_not_there_is_a_prediction_not_a_usage_error(tmp_path: Path) -> None:
    done = run_preflight(tmp_path / "no-such-model", "", "--json")
    assert done.returncode == 1, done.stderr
    (problem,) = json.loads(done.stdout)["problems"]
    assert problem["kind"] == "model_not_found" and "Repo id must be" in problem["message"]


def test_a_broken_config_json_is_predicted(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "m")
    (path / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "hid')
    done = run_preflight(path)
    assert done.returncode == 1, done.stderr
    assert "config.json is not valid JSON" in done.stdout


def test_a_configuration_only_copy_is_a_maybe_not_a_refusal() -> None:
    """The sample checkpoints hold config.json and the index, not the shards: the
    configuration is judged and the absent shards said, not counted as a failure."""
    sample = ROOT / "samples" / "models" / "qwen3-32b-w4a16"
    done = run_preflight(sample, "", "--json")
    body = json.loads(done.stdout)
    assert body["problems"] == [] and done.returncode == 0
    assert [p["kind"] for p in body["uncertain"]] == ["tokenizer_missing", "shard_missing"]
    assert "a copy of the configuration only?" in body["uncertain"][1]["reason"]


def test_tensors_of_a_layer_the_config_does_not_have(tmp_path: Path) -> None:
    """Found by running the real vLLM 0.32.0 on held-out cases: a checkpoint with a third
    layer under a config of two fails ("There is no module or parameter named 'layers.2'");
    a tied checkpoint that still carries lm_head starts, and DeepSeek's MTP layer beyond
    num_hidden_layers is the draft's, not an error."""
    tensors = llama_tensors({**TINY_LLAMA, "num_hidden_layers": 3})
    (problem,) = judge(model_dir(tmp_path / "extra", TINY_LLAMA, tensors)).certain
    assert problem.kind == "weight_unexpected" and problem.config["layers"] == [2]
    assert "named 'layers.2'" in problem.message
    tied = judge(model_dir(tmp_path / "tied", {**TINY_LLAMA, "tie_word_embeddings": True}))
    assert tied.certain == []
    assert judge(model_dir(tmp_path / "mtp", DEEPSEEK_V3, deepseek_tensors())).certain == []
