"""Plausible values for a template's placeholders, chosen from the placeholder's name the way
a real launch of a quantized MoE model on an H200 would fill it."""

from __future__ import annotations

import re

# (pattern on the placeholder name, value); first match wins
_BY_NAME: tuple[tuple[str, str], ...] = (
    (r"device_name|gpu_name|device\b", "NVIDIA H200"),
    (r"capability|\bcap\b|min_cap|sm\b|arch", "90"),
    (r"gib|_gb\b|GiB|memory|mem\b|bytes|free|total|usage|util", "0.9"),
    (r"max_model_len|max_seq_len|model_len|seq_len", "262144"),
    (r"world_size|tensor_parallel|tp_size|tp\b|num_gpus|gpus|ranks?\b", "8"),
    (r"heads", "12"),
    (r"group_size|group", "128"),
    (r"size_n|size_k|size_m|\bn\b|\bk\b|\bm\b|dim|size|shape|len|num|count|block|tile|"
     r"thread|width|height|hidden|intermediate", "2880"),
    (r"dtype|type", "torch.bfloat16"),
    (r"quant|method|scheme|format", "modelopt_fp4"),
    (r"backend|kernel|impl", "FLASHINFER_CUTLASS"),
    (r"layer|prefix|module|param|weight|name|key", "model.layers.3.mlp.experts.w13_weight"),
    (r"model|arch|path|repo", "nvidia/Qwen3-Next-80B-A3B-Instruct-NVFP4"),
    (r"env|var", "VLLM_USE_FLASHINFER_MOE_FP4"),
    (r"version", "0.25.1"),
    (r"str\(e\)|err|exc|\be\b|reason|msg|message", "CUDA error: invalid argument"),
)
_COMPILED = tuple((re.compile(pattern, re.I), value) for pattern, value in _BY_NAME)
DEFAULT = "7"


def plausible(name: str) -> str:
    """A value a real log would show for a placeholder named `name`."""
    for pattern, value in _COMPILED:
        if pattern.search(name):
            return value
    return DEFAULT
