"""Which layers of a checkpoint Marlin cannot tile at a tensor-parallel size, from config.json.

Each projection is split the way vLLM splits it (column-parallel layers on their output
channels N, row-parallel ones on their input channels K, MoE experts on their intermediate
size) and its per-rank shape is checked against what the Marlin path of the checkpoint's
scheme requires, as read in vLLM's sources:

- FP4/FP8 on a GPU without the native kernels repack every weight through
  `gptq_marlin_repack`: N a multiple of 64 (tile_n_size), K a multiple of 16 (tile_k_size).
  Dense layers are padded up to a tile from 0.24.0 (`marlin_padded_nk`); MoE experts are
  repacked unpadded in every release checked (0.11.2-0.33.0). A shape that fails is a hard
  start-up failure.
- Integer weight-only schemes (GPTQ, AWQ, W4A16, W8A16) ask Marlin first
  (`check_marlin_supports_shape`: N % 64, K % 128, K % group_size; MoE:
  `check_moe_marlin_supports_layer`: hidden % 128, intermediate per rank % max(64, group))
  and fall back to another kernel when it refuses: slower, or "Failed to find a kernel".

Only projections config.json spells out are checked (attention, dense MLP, shared expert,
MoE experts); model-specific layers (linear attention, MLA) are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TILE_N = 64
TILE_K_REPACK = 16
MIN_THREAD_K = 128
DENSE_PADDING_RELEASE = (0, 24)  # dense FP4/FP8 layers padded for Marlin from 0.24.0
REPACK_SCHEMES = ("NVFP4A16", "W4A4_NVFP4", "W4A16_NVFP4", "MXFP4", "MXFP4A16", "FP8",
                  "W8A16_FP8")
TP_CHOICES = (1, 2, 4, 8, 16)


@dataclass(frozen=True, slots=True)
class SplitLayer:
    name: str  # e.g. "experts w13 (gate_up)"
    n: int  # output channels per rank
    k: int  # input channels per rank
    moe: bool


@dataclass(frozen=True, slots=True)
class Untileable:
    layer: SplitLayer
    why: str  # which requirement fails, with the numbers


def split_layers(dims: dict[str, int], tp: int) -> list[SplitLayer]:
    """The per-rank (N, K) of each projection config.json describes, at tensor-parallel `tp`."""
    hidden = dims.get("hidden_size")
    if not hidden or tp < 1:
        return []
    out: list[SplitLayer] = []
    heads, kv = dims.get("num_attention_heads"), dims.get("num_key_value_heads")
    head_dim = dims.get("head_dim") or (hidden // heads if heads else None)
    if heads and head_dim and "kv_lora_rank" not in dims and heads % tp == 0:
        kv_per_rank = max(1, (kv or heads) // tp)  # fewer KV heads than ranks: replicated
        out.append(SplitLayer("qkv_proj", (heads // tp + 2 * kv_per_rank) * head_dim, hidden,
                              False))
        out.append(SplitLayer("o_proj", hidden, heads * head_dim // tp, False))
    for key, label, moe in (("intermediate_size", "mlp", False),
                            ("shared_expert_intermediate_size", "shared_expert", False),
                            ("moe_intermediate_size", "experts", True)):
        size = dims.get(key)
        if not size or size % tp:
            continue
        per_rank = size // tp
        up = "w13 (gate_up)" if moe else "gate_up_proj"
        down = "w2 (down)" if moe else "down_proj"
        out.append(SplitLayer(f"{label} {up}", 2 * per_rank, hidden, moe))
        out.append(SplitLayer(f"{label} {down}", hidden, per_rank, moe))
    return out


def _version(text: str | None) -> tuple[int, int] | None:
    found = re.match(r"(\d{1,6})\.(\d{1,6})(?!\d)", text or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def repack_failures(layers: list[SplitLayer], vllm_version: str | None
                    ) -> list[Untileable]:
    """FP4/FP8 through Marlin: layers whose repack fails (dense ones only before 0.24.0, or
    when the release is unknown)."""
    version = _version(vllm_version)
    padded_dense = version is not None and version >= DENSE_PADDING_RELEASE
    out = []
    for layer in layers:
        if padded_dense and not layer.moe:
            continue
        if layer.n % TILE_N:
            out.append(Untileable(layer, f"N = {layer.n} per rank is not a multiple of "
                                         f"tile_n_size {TILE_N}"))
        elif layer.k % TILE_K_REPACK:
            out.append(Untileable(layer, f"K = {layer.k} per rank is not a multiple of "
                                         f"tile_k_size {TILE_K_REPACK}"))
    return out


def integer_refusals(layers: list[SplitLayer], group_size: int | None) -> list[Untileable]:
    """Integer weight-only schemes: layers Marlin refuses (vLLM then tries other kernels)."""
    group = group_size if group_size and group_size > 0 else None
    out = []
    for layer in layers:
        if layer.moe:
            need = max(64, group or 0)
            if layer.name.endswith("w13 (gate_up)") and layer.k % MIN_THREAD_K:
                out.append(Untileable(layer, f"hidden size {layer.k} is not a multiple of "
                                             f"{MIN_THREAD_K}"))
            elif layer.name.endswith("w2 (down)") and layer.k % need:
                out.append(Untileable(layer, f"intermediate size per rank {layer.k} is not "
                                             f"a multiple of {need}"))
            continue
        if layer.n % TILE_N:
            out.append(Untileable(layer, f"N = {layer.n} per rank is not a multiple of "
                                         f"min_thread_n {TILE_N}"))
        elif layer.k % MIN_THREAD_K:
            out.append(Untileable(layer, f"K = {layer.k} per rank is not a multiple of "
                                         f"min_thread_k {MIN_THREAD_K}"))
        elif group and layer.k % group:
            out.append(Untileable(layer, f"K = {layer.k} per rank is not a multiple of "
                                         f"group_size {group}"))
    return out


def untileable(dims: dict[str, int], tp: int, scheme: str, group_size: int | None,
               vllm_version: str | None) -> list[Untileable]:
    """The layers Marlin cannot take at `tp` for this scheme (empty: none known)."""
    layers = split_layers(dims, tp)
    if scheme in REPACK_SCHEMES:
        return repack_failures(layers, vllm_version)
    return integer_refusals(layers, group_size)


def aligned_sizes(dims: dict[str, int], scheme: str, group_size: int | None,
                  vllm_version: str | None) -> list[int]:
    """Tensor-parallel sizes at which every checked layer tiles."""
    return [tp for tp in TP_CHOICES if split_layers(dims, tp)
            and not untileable(dims, tp, scheme, group_size, vllm_version)]
