"""Plausible values for a template's placeholders, chosen from the placeholder's name the way
a real launch of a quantized MoE model on an H200 would fill it."""

from __future__ import annotations

import re

# (pattern on the placeholder name, value); first match wins
_BY_NAME: tuple[tuple[str, str], ...] = (
    (r"device_name|gpu_name", "NVIDIA H200"),
    (r"device", "cuda:0"),
    (r"min_capability|required|min_cap", "100"),
    (r"capability|\bcap\b|version_num|sm_version|\bsm\b", "90"),
    (r"util", "0.92"),
    (r"cuda_memory|bytes", "76374687744"),
    (r"gib|_gb\b|memory|mem\b|free|total|usage", "71.21"),
    (r"max_model_len|max_seq_len|model_len|seq_len", "262144"),
    (r"gpu_count|available_gpus|device_count", "4"),
    (r"world_size|tensor_parallel|tp_size|tp\b|num_gpus|gpus|ranks?\b", "8"),
    (r"heads", "12"),
    (r"group_size|group", "128"),
    (r"size_n|size_k|size_m|\bn\b|\bk\b|\bm\b|dim|size|shape|len|num|count|block|tile|"
     r"thread|width|height|hidden|intermediate", "2880"),
    (r"dtype|type", "torch.bfloat16"),
    (r"quant|method|scheme|format", "modelopt_fp4"),
    (r"backend|kernel|impl", "FLASHINFER_CUTLASS"),
    (r"layer|prefix|module|param|weight|name|key", "model.layers.3.mlp.experts.w13_weight"),
    (r"architecture|arch", "Qwen3NextForCausalLM"),
    (r"model|path|repo", "nvidia/Qwen3-Next-80B-A3B-Instruct-NVFP4"),
    (r"env|var", "VLLM_USE_FLASHINFER_MOE_FP4"),
    (r"version", "0.25.1"),
    (r"str\(e\)|err|exc|\be\b|reason|msg|message", "operation not permitted"),
)
_COMPILED = tuple((re.compile(pattern, re.I), value) for pattern, value in _BY_NAME)
DEFAULT = "7"


def plausible(name: str) -> str:
    """A value a real log would show for a placeholder named `name`."""
    for pattern, value in _COMPILED:
        if pattern.search(name):
            return value
    return DEFAULT
