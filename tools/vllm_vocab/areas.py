"""Which operator-facing area a message belongs to, from its file path and its wording."""

from __future__ import annotations

import re

AREAS = ("marlin", "quantization configs", "nvfp4/mxfp4 backends", "speculative decoding/MTP",
         "model loading", "worker/engine/memory", "distributed", "config validation", "other")

# Marlin and FP4 are recognised by path or wording before anything else (their messages live
# in generic quantization and MoE files too); then the first rule whose path matches wins,
# speculative decoding before model loading (MTP models live in models/); then wording.
_RULES: tuple[tuple[str, re.Pattern[str], re.Pattern[str]], ...] = (
    ("marlin", re.compile(r"marlin", re.I), re.compile(r"marlin", re.I)),
    ("nvfp4/mxfp4 backends", re.compile(r"fp4|nvfp|mxfp|cutlass_moe|flashinfer", re.I),
     # the backends and kernels, not the checkpoint formats a quantization config reads
     re.compile(r"(nvfp4|mxfp4|\bfp4).*(backend|kernel|compiled|\bSM\b|cutlass|flashinfer)|"
                r"(backend|kernel).*(nvfp4|mxfp4|\bfp4)", re.I)),
    ("speculative decoding/MTP",
     re.compile(r"spec_decode|speculative|_mtp\.py|/mtp|eagle|medusa|draft|rejection_sampler",
                re.I),
     re.compile(r"\bMTP\b|speculative|draft model|num_speculative_tokens|eagle", re.I)),
    ("quantization configs",
     re.compile(r"quantization|quant_utils|fused_moe/oracle|model_executor/kernels/(linear|mixed_precision|"
                r"scaled_mm)", re.I),
     re.compile(r"quantiz|\bAWQ\b|GPTQ|\bFP8\b|compressed.tensors|modelopt|\bquark\b|"
                r"weight_scale|block_n|block_k|capability", re.I)),
    ("distributed", re.compile(r"vllm/distributed/|parallel_state|csrc/custom_all_reduce|"
                               r"ray_", re.I),
     re.compile(r"\bNCCL\b|world.size|tensor.parallel|pipeline.parallel|all.reduce", re.I)),
    ("config validation",
     re.compile(r"vllm/config|arg_utils\.py|vllm/entrypoints/|vllm/envs\.py|"
                r"transformers_utils/config", re.I),
     re.compile(r"max_model_len|is not divisible by tensor|environment variable|"
                r"--[a-z-]+ ", re.I)),
    ("model loading", re.compile(r"model_loader|vllm/(model_executor/)?models/|weight_utils|"
                                 r"transformers_utils|model_executor/parameter", re.I),
     re.compile(r"checkpoint|safetensors|load(ing)? weights|architecture", re.I)),
    ("worker/engine/memory",
     re.compile(r"vllm/v1/engine|vllm/engine|vllm/worker|vllm/v1/worker|vllm/v1/core|"
                r"vllm/v1/executor|vllm/executor|vllm/core/|csrc/cache|memory", re.I),
     re.compile(r"memory|KV cache|cache blocks|EngineCore|out of memory", re.I)),
)


def area_of(path: str, text: str) -> str:
    """The area of a message at `path` (relative to the release root) with wording `text`:
    by path first, then by wording."""
    for area, by_path, by_text in _RULES[:2]:
        if by_path.search(path) or by_text.search(text):
            return area
    for area, by_path, _ in _RULES:
        if by_path.search(path):
            return area
    for area, _, by_text in _RULES:
        if by_text.search(text):
            return area
    return "other"
