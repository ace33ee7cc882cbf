"""Model directories for the pre-flight's tests: real file formats (config.json, safetensors
shards with their JSON headers and zero-filled data, the index), tiny shapes."""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F16": 2, "BF16": 2, "I32": 4, "F32": 4,
         "I64": 8}
Shape = tuple[str, tuple[int, ...]]  # (dtype, shape)
Tensors = Mapping[str, Shape]  # by name

TINY_LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 96, "max_position_embeddings": 512,
    "tie_word_embeddings": False, "torch_dtype": "float32"}


def llama_tensors(config: Mapping[str, Any] = TINY_LLAMA, dtype: str = "F32") -> dict[str, Shape]:
    """The tensors transformers' LlamaForCausalLM saves, written out by hand from its
    modelling code's layer list (not from logwatch's tables)."""
    h, inter = config["hidden_size"], config["intermediate_size"]
    d = h // config["num_attention_heads"]
    q, kv = config["num_attention_heads"] * d, config["num_key_value_heads"] * d
    out = {"model.embed_tokens.weight": (dtype, (config["vocab_size"], h)),
           "model.norm.weight": (dtype, (h,)),
           "lm_head.weight": (dtype, (config["vocab_size"], h))}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out |= {p + "input_layernorm.weight": (dtype, (h,)),
                p + "post_attention_layernorm.weight": (dtype, (h,)),
                p + "self_attn.q_proj.weight": (dtype, (q, h)),
                p + "self_attn.k_proj.weight": (dtype, (kv, h)),
                p + "self_attn.v_proj.weight": (dtype, (kv, h)),
                p + "self_attn.o_proj.weight": (dtype, (h, q)),
                p + "mlp.gate_proj.weight": (dtype, (inter, h)),
                p + "mlp.up_proj.weight": (dtype, (inter, h)),
                p + "mlp.down_proj.weight": (dtype, (h, inter))}
    return out


def mlp(prefix: str, inter: int, hidden: int, dtype: str = "BF16") -> dict[str, Shape]:
    """A gated MLP's three projections under `prefix` (e.g. `model.layers.0.mlp.`)."""
    return {prefix + "gate_proj.weight": (dtype, (inter, hidden)),
            prefix + "up_proj.weight": (dtype, (inter, hidden)),
            prefix + "down_proj.weight": (dtype, (hidden, inter))}


def write_safetensors(path: Path, tensors: Tensors, pad_header: int = 0) -> None:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = SIZES[dtype]
        for n in shape:
            size *= n
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode() + b" " * pad_header
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        fh.truncate(8 + len(raw) + offset)  # zeros, sparse: no weight is ever read


def model_dir(path: Path, config: Mapping[str, Any] | None = None,
              tensors: Tensors | None = None, shards: int = 1,
              tokenizer: bool = True) -> Path:
    """A checkpoint directory: config.json, `shards` safetensors files (an index when more
    than one), and a tokenizer's files."""
    config = dict(TINY_LLAMA if config is None else config)
    tensors = dict(llama_tensors(config) if tensors is None else tensors)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config, indent=2))
    names = list(tensors)
    if shards == 1:
        write_safetensors(path / "model.safetensors", tensors)
    else:
        weight_map = {}
        for k in range(shards):
            shard = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: tensors[n] for n in names[k::shards]}
            write_safetensors(path / shard, part)
            weight_map |= dict.fromkeys(part, shard)
        (path / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {}, "weight_map": weight_map}, indent=2))
    if tokenizer:
        (path / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {}}))
        (path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 512}))
    return path
