"""Write the tiny model directories under samples/models/ (config + quantization config +
safetensors index with tensor names; no weights). Run again after editing; outputs are committed.

    python samples/models/generate.py
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent

NVFP4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16,
         "symmetric": True, "dynamic": False}
NVFP4_INPUT = {**NVFP4, "dynamic": "local"}
INT4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True,
        "dynamic": False}
FP8 = {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128],
       "symmetric": True, "dynamic": False}
FP8_INPUT = {"num_bits": 8, "type": "float", "strategy": "group", "group_size": 128,
             "symmetric": True, "dynamic": True}
NVFP4_PARAMS = ("weight_packed", "weight_scale", "weight_global_scale", "input_global_scale")
NVFP4A16_PARAMS = ("weight_packed", "weight_scale", "weight_global_scale")
INT4_PARAMS = ("weight_packed", "weight_scale", "weight_shape")


def ct_config(weights: dict, inputs: dict | None, fmt: str, ignore: list[str]) -> dict:
    return {"quant_method": "compressed-tensors", "format": fmt,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                          "input_activations": inputs, "format": fmt}},
            "ignore": ignore}


def qwen36_text(layers: int = 40) -> dict:
    return {"model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": layers,
            "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
            "moe_intermediate_size": 320, "shared_expert_intermediate_size": 512,
            "num_experts": 4, "vocab_size": 151936, "mtp_num_hidden_layers": 1}


def qwen_tensors(params: tuple[str, ...], mtp_params: tuple[str, ...]) -> list[str]:
    names = ["model.language_model.embed_tokens.weight", "lm_head.weight",
             "model.language_model.norm.weight"]
    for prefix, p in (("model.language_model.layers.0", params), ("mtp.layers.0", mtp_params)):
        names += [f"{prefix}.input_layernorm.weight", f"{prefix}.post_attention_layernorm.weight",
                  f"{prefix}.mlp.gate.weight", f"{prefix}.mlp.shared_expert_gate.weight"]
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            names += [f"{prefix}.self_attn.{proj}.{x}" for x in p]
        for e in range(4):
            for proj in ("gate_proj", "up_proj", "down_proj"):
                names += [f"{prefix}.mlp.experts.{e}.{proj}.{x}" for x in p]
        for proj in ("gate_proj", "up_proj", "down_proj"):
            names += [f"{prefix}.mlp.shared_expert.{proj}.{x}" for x in p]
    names += [f"mtp.fc.{x}" for x in mtp_params] + [
        "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.norm.weight"]
    return names


def deepseek_tensors(hidden: int, params: tuple[str, ...], mtp_params: tuple[str, ...],
                     experts: int = 2) -> list[str]:
    names = ["model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"]
    for layer, p in ((0, params), (hidden, mtp_params)):
        prefix = f"model.layers.{layer}"
        names += [f"{prefix}.input_layernorm.weight", f"{prefix}.mlp.gate.weight"]
        for proj in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"):
            names += [f"{prefix}.self_attn.{proj}.{x}" for x in p]
        for e in range(experts):
            for proj in ("gate_proj", "up_proj", "down_proj"):
                names += [f"{prefix}.mlp.experts.{e}.{proj}.{x}" for x in p]
        for proj in ("gate_proj", "up_proj", "down_proj"):
            names += [f"{prefix}.mlp.shared_experts.{proj}.{x}" for x in p]
    mtp = f"model.layers.{hidden}"
    names += [f"{mtp}.eh_proj.{x}" for x in mtp_params]
    names += [f"{mtp}.enorm.weight", f"{mtp}.hnorm.weight", f"{mtp}.shared_head.norm.weight",
              f"{mtp}.shared_head.head.weight", f"{mtp}.embed_tokens.weight"]
    return names


def write(name: str, config: dict, tensors: list[str], extra: dict[str, dict] | None = None,
          readme: str = "") -> None:
    path = HERE / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    index = {"metadata": {"total_size": 0},
             "weight_map": {t: f"model-0000{1 + i % 2}-of-00002.safetensors"
                            for i, t in enumerate(tensors)}}
    (path / "model.safetensors.index.json").write_text(json.dumps(index, indent=1) + "\n")
    for filename, data in (extra or {}).items():
        (path / filename).write_text(json.dumps(data, indent=2) + "\n")
    (path / "README.md").write_text(readme.strip() + "\n")


def main() -> None:
    qwen_ignore = ["lm_head", "re:.*mlp.gate$", "re:.*shared_expert_gate$", "re:^model.visual.*"]
    qwen_arch = {"architectures": ["Qwen3_5MoeForConditionalGeneration"],
                 "model_type": "qwen3_5_moe", "text_config": qwen36_text()}
    write("qwen3.6-35b-a3b-nvfp4-mtp-uncovered",
          {**qwen_arch, "quantization_config": ct_config(NVFP4, NVFP4_INPUT,
                                                         "nvfp4-pack-quantized", qwen_ignore)},
          qwen_tensors(NVFP4_PARAMS, ("weight",)),
          readme="W4A4 NVFP4 (llm-compressor) Qwen3.6 MoE; MTP stored BF16 under `mtp.` but "
                 "the ignore list does not cover it: the draft is built NVFP4 (garbage load).")
    write("qwen3.6-35b-a3b-nvfp4-mtp-covered",
          {**qwen_arch, "quantization_config": ct_config(
              NVFP4, NVFP4_INPUT, "nvfp4-pack-quantized", [*qwen_ignore, "re:^mtp\\."])},
          qwen_tensors(NVFP4_PARAMS, ("weight",)),
          readme="The same checkpoint with `re:^mtp\\.` in its ignore list: MTP covered on "
                 "every release that runs Qwen3.6 (0.17.1 on).")
    write("qwen3.6-35b-a3b-nvfp4a16",
          {**qwen_arch, "quantization_config": ct_config(
              NVFP4, None, "nvfp4-pack-quantized", [*qwen_ignore, "re:^mtp\\."])},
          qwen_tensors(NVFP4A16_PARAMS, ("weight",)),
          readme="NVFP4A16 (weight-only FP4): Marlin on every GPU below compute capability 10.0.")
    write("qwen3-32b-w4a16",
          {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120,
           "intermediate_size": 25600, "num_hidden_layers": 64, "num_attention_heads": 64,
           "num_key_value_heads": 8, "head_dim": 128,
           "quantization_config": ct_config(INT4, None, "pack-quantized", ["lm_head"])},
          ["model.embed_tokens.weight", "lm_head.weight"]
          + [f"model.layers.0.self_attn.{p}.{x}" for p in ("q_proj", "k_proj", "v_proj", "o_proj")
             for x in INT4_PARAMS]
          + [f"model.layers.0.mlp.{p}.{x}" for p in ("gate_proj", "up_proj", "down_proj")
             for x in INT4_PARAMS],
          readme="compressed-tensors W4A16 (int4 pack-quantized): Marlin.")
    ds_text = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
               "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
               "num_hidden_layers": 61, "num_nextn_predict_layers": 1, "n_routed_experts": 256,
               "num_attention_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512}
    write("deepseek-v3-modelopt-nvfp4-legacy",
          ds_text, deepseek_tensors(61, ("weight", "weight_scale", "weight_scale_2",
                                         "input_scale"), ("weight",)),
          {"hf_quant_config.json": {
              "producer": {"name": "modelopt", "version": "0.29.0"},
              "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None,
                               "group_size": 16,
                               "exclude_modules": ["lm_head", "model.layers.61.self_attn*",
                                                   "model.layers.61.shared_head*"]}}},
          readme="ModelOpt 0.29 (legacy hf_quant_config.json) NVFP4 DeepSeek-V3; the MTP layer "
                 "61 is BF16 but exclude_modules covers only its attention and head (by glob: "
                 "from vLLM 0.9.2; eh_proj is never quantized).")
    write("modelopt-nvfp4-autodowngrade",
          {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
           "intermediate_size": 12288, "num_hidden_layers": 36,
           "quantization_config": {
               "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
               "ignore": ["lm_head"],
               "config_groups": {"group_0": {"targets": ["Linear"], "weights": NVFP4,
                                             "input_activations": None}}}},
          ["model.layers.0.self_attn.q_proj.weight",
           "model.layers.0.self_attn.q_proj.weight_scale"],
          readme="ModelOpt NVFP4 whose groups have no input activations: vLLM serves it as "
                 "W4A16_NVFP4 (auto-downgrade).")
    write("glm-5.2-quark-mxfp4",
          {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa",
           "hidden_size": 6144, "moe_intermediate_size": 2048, "num_hidden_layers": 78,
           "num_nextn_predict_layers": 1,
           "quantization_config": {
               "quant_method": "quark",
               "global_quant_config": {"weight": {"dtype": "fp4", "group_size": 32},
                                       "input_tensors": {"dtype": "fp4", "group_size": 32}},
               "exclude": ["lm_head", "model.layers.78.mlp.experts.0.down_proj",
                           "re:model\\.layers\\.78\\.self_attn\\..*"]}},
          deepseek_tensors(78, ("weight", "weight_scale"), ("weight",)),
          readme="Quark MXFP4 GLM-5.2 (vLLM PR #46757): the exclude list names one expert child "
                 "(the MoE children rule covers the experts from vLLM 0.26.0; on 0.16.0-0.25.1 "
                 "they stay MXFP4) and the attention, but not the shared experts (eh_proj and "
                 "shared_head.head are never quantized under Quark).")
    write("llama-3.1-8b-fp8",
          {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
           "intermediate_size": 14336, "num_hidden_layers": 32,
           "quantization_config": ct_config(FP8, FP8_INPUT, "float-quantized", ["lm_head"])},
          ["model.layers.0.mlp.down_proj.weight", "model.layers.0.mlp.down_proj.weight_scale"],
          readme="compressed-tensors FP8 W8A8: native on compute capability 8.9+, Marlin below.")
    write("qwen2.5-72b-gptq-int4",
          {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 8192,
           "intermediate_size": 29568, "num_hidden_layers": 80,
           "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128,
                                   "desc_act": False}},
          ["model.layers.0.mlp.down_proj.qweight", "model.layers.0.mlp.down_proj.scales"],
          readme="GPTQ int4: gptq_marlin.")
    broken = HERE / "broken-config"
    shutil.rmtree(broken, ignore_errors=True)
    broken.mkdir()
    (broken / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"], '
                                        '"quantization_config": {"quant_method": \n')
    (broken / "model.safetensors.index.json").write_text('{"weight_map": {"a.weight": "x"}}\n')
    (broken / "README.md").write_text("A truncated config.json: logwatch names the file and line "
                                      "and still reads the index.\n")
    tiny_llama()


TINY_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
              "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
              "num_key_value_heads": 1, "vocab_size": 64, "max_position_embeddings": 512,
              "tie_word_embeddings": True, "torch_dtype": "bfloat16"}


def tiny_llama() -> None:
    """Two real checkpoints of a one-layer Llama (safetensors headers over zeroed BF16 data,
    a tokenizer): one sound, one whose gate_proj has half the rows config.json asks for."""
    h, inter, kv = 32, 64, 16
    shapes = {"model.embed_tokens.weight": [64, h], "model.norm.weight": [h],
              "model.layers.0.input_layernorm.weight": [h],
              "model.layers.0.post_attention_layernorm.weight": [h],
              "model.layers.0.self_attn.q_proj.weight": [h, h],
              "model.layers.0.self_attn.k_proj.weight": [kv, h],
              "model.layers.0.self_attn.v_proj.weight": [kv, h],
              "model.layers.0.self_attn.o_proj.weight": [h, h],
              "model.layers.0.mlp.gate_proj.weight": [inter, h],
              "model.layers.0.mlp.up_proj.weight": [inter, h],
              "model.layers.0.mlp.down_proj.weight": [h, inter]}
    for name, changed in (("tiny-llama", {}),
                          ("tiny-llama-wrong-shape",
                           {"model.layers.0.mlp.gate_proj.weight": [inter // 2, h]})):
        path = HERE / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir()
        (path / "config.json").write_text(json.dumps(TINY_LLAMA, indent=2) + "\n")
        header: dict = {"__metadata__": {"format": "pt"}}
        offset = 0
        for tensor, shape in {**shapes, **changed}.items():
            size = 2 * shape[0] * (shape[1] if len(shape) > 1 else 1)
            header[tensor] = {"dtype": "BF16", "shape": shape,
                              "data_offsets": [offset, offset + size]}
            offset += size
        raw = json.dumps(header).encode()
        (path / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw
                                                 + bytes(offset))
        (path / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {
            "type": "WordLevel", "vocab": {"<unk>": 0}, "unk_token": "<unk>"}}) + "\n")
        (path / "README.md").write_text(
            "A one-layer Llama with real safetensors headers (zeroed weights): "
            + ("sound." if not changed else "gate_proj saved with 32 rows where config.json's "
               "intermediate_size asks for 64: vLLM's loader fails on it.") + "\n")


if __name__ == "__main__":
    main()
