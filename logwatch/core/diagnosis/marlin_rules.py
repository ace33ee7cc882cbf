"""The Marlin tile diagnosis: which layer a weight-only Marlin split cannot tile, named from
config.json, and the remedies that apply on this GPU (the W4A4 variant on native FP4, a
tensor-parallel size that aligns every layer, a release that pads dense FP4 layers).
"""

from __future__ import annotations

import re

from logwatch.core.diagnosis.model import Context, Diagnosis, Remedy
from logwatch.core.launches.incidents import Incident
from logwatch.core.numbers import COUNT_MAX, bounded_number
from logwatch.core.quant.marlin_split import aligned_sizes
from logwatch.core.quant.scheme import NATIVE_FP4_CAPABILITY
from logwatch.core.signatures.signature import parse_number
from logwatch.core.snapshot.model import Snapshot

TP_CHOICES = (1, 2, 4, 8, 16)
# vLLM pads dense FP4 layers up to a Marlin tile from 0.24.0 (`marlin_padded_nk` in
# marlin_utils_fp4.py); MoE experts are repacked unpadded in every release up to 0.33.0.
PADDING_RELEASE = (0, 24)


def _version_tuple(text: str | None) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", text or "")
    major, minor = (bounded_number(m.group(1)), bounded_number(m.group(2))) if m else (None, None)
    return (major, minor) if major is not None and minor is not None else None


def _layers_of_width(width: int, dims: dict[str, int]) -> list[str]:
    """Which projections of this model are `width` channels wide (output side)."""
    heads, kv, head_dim = dims.get("num_attention_heads"), dims.get("num_key_value_heads"), \
        dims.get("head_dim")
    candidates: list[tuple[str, int | None]] = []
    for key, fused in (("intermediate_size", "gate_up_proj"),
                       ("moe_intermediate_size", "experts w13 (gate_up)"),
                       ("shared_expert_intermediate_size", "shared_expert gate_up_proj")):
        if key in dims:
            candidates.append((f"{fused} ({key} {dims[key]} x 2)", 2 * dims[key]))
            candidates.append((f"{key.replace('_size', '')} down_proj input / up or gate shard "
                               f"({key} {dims[key]})", dims[key]))
    if heads and head_dim:
        candidates.append((f"q_proj ({heads} heads x {head_dim})", heads * head_dim))
        if kv:
            candidates.append((f"qkv_proj (({heads} + 2x{kv}) x {head_dim})",
                               (heads + 2 * kv) * head_dim))
            candidates.append((f"k_proj / v_proj ({kv} heads x {head_dim})", kv * head_dim))
    if "hidden_size" in dims:
        candidates.append((f"o_proj / down_proj output (hidden_size {dims['hidden_size']})",
                           dims["hidden_size"]))
    return [name for name, value in candidates if value == width]


def rule_marlin_tile(incident: Incident, ctx: Context) -> Diagnosis | None:
    if incident.signature.category not in ("marlin_tile", "marlin_shape"):
        return None
    caps = incident.captures
    snap = ctx.snapshot
    tp = snap.tensor_parallel_size
    if "size_n" in caps or "output_size_per_partition" in caps or caps.get("dim") in (
            "size_n", "prob_n"):
        axis = "N"
        per_rank = caps.get("size_n") or caps.get("output_size_per_partition") or \
            caps.get("value")
    elif "size_k" in caps or "input_size_per_partition" in caps or caps.get("dim") in (
            "size_k", "prob_k"):
        axis = "K"
        per_rank = caps.get("size_k") or caps.get("input_size_per_partition") or \
            caps.get("value")
    else:
        return None
    tile_text = caps.get("tile_n_size") or caps.get("min_thread_n") or caps.get(
        "tile_k_size") or caps.get("min_thread_k") or caps.get("group_size") or caps.get(
        "divisor") or ("64" if axis == "N" else "16")
    value, tile = parse_number(per_rank or ""), parse_number(tile_text)
    if value is None or tile is None or not (0 < tile <= COUNT_MAX and 0 <= value <= COUNT_MAX):
        return None  # NaN, infinite or no width a layer has: garbage, not a Marlin shape
    width, tile_i = int(value) * tp, int(tile)
    model, quant = snap.model, (snap.model.quant if snap.model else None)
    path = quant.marlin_path(ctx.capability) if quant else None
    fallback_seen = ctx.has("nvfp4.marlin_fallback") is not None
    details = [f"{'size_n' if axis == 'N' else 'size_k'} = {int(value)} per rank x "
               f"tensor-parallel size {tp} = a layer {width} channels wide "
               f"({'output' if axis == 'N' else 'input'} side); Marlin needs multiples of "
               f"{tile_i} per rank."]
    layers = _layers_of_width(width, model.dims) if model else []
    if layers:
        details.append("Layers of that width in config.json: " + "; ".join(layers) + ".")
    elif model:
        details.append("No projection of that width is named in config.json (it may be a "
                       "fused or expert layer the config does not spell out).")
    details.append("Do not edit the model definition to force the shapes to align: the "
                   "quantized weights are packed for the original layout, and reshaping the "
                   "layers breaks the mapping between weights and layers (garbage output or a "
                   "load failure elsewhere).")
    scheme = quant.scheme if quant else "unknown"
    if quant:
        details.append(f"Checkpoint scheme {scheme} ({quant.method}); "
                       + ("runs through weight-only Marlin on this GPU." if path else
                          "Marlin on this GPU: unknown (GPU not identified)." if path is None
                          else "should not use Marlin on this GPU: a forced backend?"))
    every = aligned_sizes(model.dims, scheme, quant.group_size, snap.vllm_version) \
        if model and quant and model.dims else None
    remedies = [w4a4_remedy(ctx, scheme), _tp_remedy(width, tile_i, tp, snap.gpu.count, every),
                _padding_remedy(snap, scheme, experts_only=bool(layers) and all(
                    name.startswith("experts") for name in layers))]
    confidence = 0.95 if (path or fallback_seen) else 0.7 if path is None else 0.5
    config = {"tensor_parallel_size": tp, "failing_width": width, "per_rank": int(value),
              "tile": tile_i, "scheme": scheme, "gpu_capability": ctx.capability,
              "marlin_path": path, "marlin_fallback_logged": fallback_seen}
    return Diagnosis(
        "marlin_weight_only_tile", "Weight-only Marlin cannot tile this layer split",
        incident.signature.id,
        f"A {width}-wide layer split {tp} ways gives {int(value)} per rank, not a multiple of "
        f"Marlin's {tile_i}.", tuple(details), tuple(incident.evidence[-3:]), config,
        confidence, tuple(r for r in remedies if r is not None))


def w4a4_remedy(ctx: Context, scheme: str) -> Remedy:
    cap = ctx.capability
    summary = ("Serve the W4A4 NVFP4 variant of the checkpoint through CUTLASS/FlashInfer "
               "(never repacked through Marlin).")
    if cap is None:
        return Remedy("switch_to_w4a4", summary, None, "GPU compute capability unknown; needs "
                                                        "10.0 or newer (B200/B300/RTX 50).")
    if cap < NATIVE_FP4_CAPABILITY:
        return Remedy("switch_to_w4a4", summary, False,
                      f"this GPU is compute capability {cap / 10:.1f}: no native FP4, so even "
                      "a W4A4 checkpoint falls back to Marlin here.")
    why = "this GPU has native FP4 (compute capability %.1f)" % (cap / 10)
    if scheme == "W4A4_NVFP4":
        why += "; the checkpoint is already W4A4: remove what forces Marlin (backend flags)"
    return Remedy("switch_to_w4a4", summary, True, why + ".")


def _tp_remedy(width: int, tile: int, tp: int, gpus: int, every: list[int] | None) -> Remedy:
    """`every`: the sizes at which every layer config.json describes tiles (None: unknown)."""
    aligned = [n for n in TP_CHOICES if width % n == 0 and (width // n) % tile == 0
               and (not every or n in every)]
    limit = max(gpus, tp)
    usable = [n for n in aligned if n <= limit]
    if not aligned:
        return Remedy("align_tensor_parallel", "Choose a tensor-parallel size that aligns the "
                      "layer.", False, f"no size in {TP_CHOICES} splits {width} into multiples "
                      f"of {tile}.")
    return Remedy("align_tensor_parallel",
                  f"Use --tensor-parallel-size {' or '.join(map(str, usable or aligned))} "
                  f"(this layer then splits into multiples of {tile}).",
                  bool(usable) if gpus else None,
                  ("every layer config.json describes tiles at that size" if every else
                   "other layers may still need checking at that size") if usable else
                  f"needs more GPUs than the {gpus} seen")


def _padding_remedy(snap: Snapshot, scheme: str, experts_only: bool) -> Remedy | None:
    if scheme not in ("W4A4_NVFP4", "NVFP4A16", "W4A16_NVFP4", "MXFP4", "MXFP4A16"):
        return None
    version = _version_tuple(snap.vllm_version)
    summary = "Upgrade to vLLM 0.24 or newer, which pads dense FP4 layers for Marlin."
    if experts_only:
        return Remedy("upgrade_vllm", summary, False, "the failing layer is an MoE expert "
                      "projection, which no release up to 0.33 pads")
    if version is None:
        return Remedy("upgrade_vllm", summary, None, "vLLM version unknown; MoE experts are "
                      "still not padded on K.")
    if version >= PADDING_RELEASE:
        return Remedy("upgrade_vllm", summary, False, f"already {snap.vllm_version}: the failing "
                      "layer is one it does not pad (MoE experts).")
    return Remedy("upgrade_vllm", summary, True, f"running {snap.vllm_version}; dense layers "
                  "are padded from 0.24 on (slower forwards; MoE experts still not).")
