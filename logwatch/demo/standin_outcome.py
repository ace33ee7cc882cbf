"""What a simulated vLLM launch does: crash on a Marlin tile, crash loading a mis-quantized MTP
draft, refuse the model, or serve. A pure function of the model's facts (logwatch's own
readers), the launch, the simulated GPU and the simulated release, so tests and the demo can ask
it directly and the stand-in process only prints what it says.

The rules are logwatch's: `QuantFacts.marlin_path` (weight-only Marlin below compute
capability 10.0, or a backend flag forcing it), `marlin_split.repack_failures` (dense FP4/FP8
layers padded from 0.24, MoE experts never), `MtpLayout.uncovered_at` (the method's ignore rules
of the release, Quark MoE children included) and `releases.FIRST_RELEASE`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from logwatch.core.quant.ignore_rules import Release, parse_release, release_text
from logwatch.core.quant.marlin_split import (
    REPACK_SCHEMES,
    TILE_K_REPACK,
    TILE_N,
    Untileable,
    repack_failures,
    split_layers,
)
from logwatch.core.quant.releases import FIRST_RELEASE
from logwatch.core.snapshot.model import ModelFacts

DEFAULT_RELEASE = "0.33.0"


@dataclass(frozen=True, slots=True)
class SimulatedGpu:
    key: str  # h200, b200, rtx-pro-6000
    name: str  # as torch.cuda.get_device_name reports it
    capability: int  # 90 = compute capability 9.0
    memory_gib: float


GPUS = {
    "h200": SimulatedGpu("h200", "NVIDIA H200", 90, 139.8),
    "b200": SimulatedGpu("b200", "NVIDIA B200", 100, 178.4),
    "rtx-pro-6000": SimulatedGpu("rtx-pro-6000",
                                 "NVIDIA RTX PRO 6000 Blackwell Server Edition", 120, 94.9),
}


@dataclass(frozen=True, slots=True)
class Launch:
    """What the stand-in read from its command line (already validated)."""

    model: str
    served_model_names: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 8000
    tensor_parallel_size: int = 1
    quantization: str | None = None
    speculative_config: dict[str, Any] | None = None
    hf_overrides: dict[str, Any] | None = None
    max_model_len: int | None = None
    linear_backend: str | None = None
    moe_backend: str | None = None
    non_default: dict[str, Any] = field(default_factory=dict)  # as vLLM logs them

    @property
    def uses_mtp(self) -> bool:
        method = str((self.speculative_config or {}).get("method", "")).lower()
        return method == "mtp" or method.endswith("_mtp")

    @property
    def served_name(self) -> str:
        return self.served_model_names[0] if self.served_model_names else self.model


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the launch does. `kind`: serve, marlin_tile, tensor_mismatch,
    unsupported_architecture, too_few_gpus."""

    kind: str
    release: str
    marlin: bool = False  # weight-only Marlin runs the quantized layers
    padded: tuple[str, ...] = ()  # dense layers this release pads for Marlin (warned, served)
    tile_error: str | None = None  # "size_n = 160 is not divisible by tile_n_size = 64"
    failing_layer: str | None = None
    mismatch: tuple[int, int] | None = None  # (size of tensor a, size of tensor b)
    mismatch_module: str | None = None
    unknown_env: tuple[str, ...] = ()  # VLLM_* variables this release warns about
    supported: tuple[str, ...] = ()  # architectures registered (unsupported_architecture)
    world: tuple[int, int] | None = None  # (world size, GPUs visible) for too_few_gpus
    garbage_draft: bool = False  # serves, but the draft's weights were loaded wrongly

    @property
    def fails(self) -> bool:
        return self.kind != "serve"


# Variables the releases checked no longer know (absent from envs.py in 0.25.1 and 0.33.0,
# which warn "Unknown vLLM environment variable detected"; 0.11.2 has both and no warning).
REMOVED_ENV = ("VLLM_NVFP4_GEMM_BACKEND", "VLLM_USE_FLASHINFER_MOE_FP4")
UNKNOWN_ENV_WARNING_FROM: Release = (0, 25, 1)


# values per stored element along K: FP4 two a byte; compressed-tensors pack-quantized integers
# eight (4-bit) or four (8-bit) an int32. A model of the failure, not read per release.
PACKED_ALONG_K = {"W4A16": 8, "W8A16": 4}


def release_of(text: str) -> Release:
    """A release tuple, or ValueError naming the text."""
    found = parse_release(text)
    if found is None:
        raise ValueError(f"not a vLLM release: {text!r} (expected e.g. 0.33.0)")
    return found


def _unknown_env(env: dict[str, str], release: Release) -> tuple[str, ...]:
    if release < UNKNOWN_ENV_WARNING_FROM:
        return ()
    return tuple(name for name in REMOVED_ENV if name in env)


def _forces_marlin(launch: Launch) -> bool:
    return any((b or "").lower() == "marlin" for b in (launch.linear_backend,
                                                       launch.moe_backend))


def _tile_error(failure: Untileable) -> str:
    """The repack check's text: K is checked before N (csrc marlin repack)."""
    layer = failure.layer
    if layer.k % TILE_K_REPACK:
        return f"size_k = {layer.k} is not divisible by tile_k_size = {TILE_K_REPACK}"
    return f"size_n = {layer.n} is not divisible by tile_n_size = {TILE_N}"


def input_width(module: str, dims: dict[str, int], tp: int) -> int:
    """The input channels (K) vLLM's parameter for `module` has per rank."""
    hidden = dims.get("hidden_size", 0)
    leaf = module.rstrip("*").rstrip(".").rsplit(".", 1)[-1]
    if leaf in ("fc", "eh_proj"):
        return 2 * hidden  # embedding and hidden state concatenated
    if leaf == "o_proj":
        heads, head_dim = dims.get("num_attention_heads"), dims.get("head_dim")
        return (heads * head_dim if heads and head_dim else hidden) // max(tp, 1)
    if leaf == "down_proj":
        if ".experts" in module or "shared_expert" in module:
            # a shared expert without its own size in config.json: one routed expert's
            size = dims.get("shared_expert_intermediate_size") if "shared_expert" in module \
                else None
            size = size or dims.get("moe_intermediate_size")
        else:
            size = dims.get("intermediate_size")
        size = size or hidden
        return size // max(tp, 1)
    return hidden


def outcome(facts: ModelFacts, launch: Launch, gpu: SimulatedGpu, release_text_: str,
            env: dict[str, str] | None = None, gpu_count: int = 8) -> Outcome:
    """What vLLM `release_text_` does with this model and launch on `gpu_count` of `gpu`."""
    release = release_of(release_text_)
    name = release_text(release)
    unknown = _unknown_env(env or {}, release)
    registered = tuple(sorted(a for a, first in FIRST_RELEASE.items() if first <= release))
    known_arch = [a for a in facts.architectures if a in FIRST_RELEASE]
    if known_arch and not any(FIRST_RELEASE[a] <= release for a in known_arch):
        return Outcome("unsupported_architecture", name, unknown_env=unknown,
                       supported=registered)
    quant = facts.quant
    tp = max(launch.tensor_parallel_size, 1)
    if tp > gpu_count:  # ParallelConfig refuses it before any engine starts
        return Outcome("too_few_gpus", name, unknown_env=unknown, world=(tp, gpu_count))
    marlin = bool(quant.marlin_path(gpu.capability)) or (quant.quantized and _forces_marlin(
        launch))
    padded: tuple[str, ...] = ()
    if marlin and quant.scheme in REPACK_SCHEMES:
        layers = split_layers(facts.dims, tp)
        failures = repack_failures(layers, name)
        if failures:
            first = failures[0]
            return Outcome("marlin_tile", name, True, tile_error=_tile_error(first),
                           failing_layer=first.layer.name, unknown_env=unknown)
        padded = tuple(f.layer.name for f in repack_failures(layers, None))
    if launch.uses_mtp and facts.mtp is not None:
        uncovered = facts.mtp.uncovered_at(release)
        if uncovered:
            module = uncovered[0]
            k = input_width(module, facts.dims, tp)
            factor = PACKED_ALONG_K.get(quant.scheme, 2 if quant.fp4 else 1)
            if factor == 1:  # same shape, other dtype: copied in, scales never set
                return Outcome("serve", name, marlin, padded, unknown_env=unknown,
                               garbage_draft=True)
            return Outcome("tensor_mismatch", name, marlin, padded, mismatch=(k // factor, k),
                           mismatch_module=module, unknown_env=unknown)
    return Outcome("serve", name, marlin, padded, unknown_env=unknown)
