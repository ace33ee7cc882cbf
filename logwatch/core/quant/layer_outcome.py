"""What vLLM builds for one checkpoint module under a release: quantized, unquantized, or a
load error; and, when the release is unknown, every outcome the releases allow.

A checkpoint module maps to the layer vLLM builds: a shard (`q_proj`) to its fused layer
(`qkv_proj`), an expert's projection (`...experts.7.down_proj`) to its MoE layer
(`...experts`), whose method every expert shares. Then the method's rules of that release
(core.quant.ignore_rules), and the layers some models build unquantized whatever the list says:
the MTP `eh_proj` of DeepSeek/GLM (a plain torch Linear), `shared_head.head` under
compressed-tensors, Quark and FP8 (their configs quantize linear layers only) and under ModelOpt
before 0.23 (no method for an LM head), and `mtp.fc` of
Qwen3.5 (from 0.20.2) and Qwen3-Next (from 0.25.1) under ModelOpt NVFP4.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from logwatch.core.quant.ignore_rules import (
    ERROR,
    FUSED,
    MATRIX,
    MODELOPT,
    QUANTIZED,
    SHARD_TO_FUSED,
    UNQUANTIZED,
    MixedShards,
    Release,
    awq_layer_skipped,
    ct_quark_layer_ignored,
    gptq_layer_quantized,
    modelopt_layer_excluded,
    modelopt_layer_skipped,
    release_text,
)

_EXPERT_CHILD = re.compile(r"^(.*\.experts)\.\d+\.[^.]+$")
MOE_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")
HEADS = ("shared_head.head", "lm_head")
# (model_type prefix, first release) where `mtp.fc` is built unquantized under modelopt_fp4
FC_FORCED_UNQUANTIZED = (("qwen3_5", (0, 20, 2)), ("qwen3_next", (0, 25, 1)))


@dataclass(frozen=True, slots=True)
class IgnoreRules:
    """A checkpoint's say in which layers stay unquantized, as vLLM reads it."""

    method: str | None  # compressed-tensors, quark, modelopt, modelopt_fp4, gptq, awq, fp8...
    entries: tuple[str, ...] = ()  # ignore / exclude / exclude_modules / modules_to_not_convert
    dynamic: Mapping[str, object] = field(default_factory=dict)  # GPTQ `dynamic`
    in_block: tuple[object, ...] = ()  # GPTQ `modules_in_block_to_quantize`
    model_type: str | None = None
    listed: tuple[str, ...] = ()  # ModelOpt mixed precision: the `quantized_layers` keys


def vllm_layer(module: str) -> tuple[str, bool]:
    """(the layer vLLM builds for a checkpoint module, whether it is an MoE layer)."""
    found = _EXPERT_CHILD.match(module)
    if found:
        return found.group(1), True
    head, _, leaf = module.rpartition(".")
    if leaf in SHARD_TO_FUSED and head:
        return f"{head}.{SHARD_TO_FUSED[leaf]}", False
    return module, module.endswith(".experts")


def _fixed(rules: IgnoreRules, release: Release, module: str) -> str | None:
    leaf = module.rsplit(".", 1)[-1]
    if leaf == "eh_proj":
        return UNQUANTIZED
    # a ParallelLMHead: compressed-tensors and Quark configs targeting Linear never match
    # it, FP8 gives it no method; ModelOpt quantizes it from 0.23, before it got none
    if module.endswith(HEADS) and (rules.method in ("compressed-tensors", "quark", "fp8") or (
            rules.method in MODELOPT and release < (0, 23, 0))):
        return UNQUANTIZED
    if rules.method == "modelopt_fp4" and re.fullmatch(r"(model\.)?mtp\.fc", module):
        for prefix, first in FC_FORCED_UNQUANTIZED:
            if (rules.model_type or "").startswith(prefix) and release >= first:
                return UNQUANTIZED
    return None


def _mixed(rules: IgnoreRules, release: Release, layer: str) -> str:
    """ModelOpt mixed precision (0.17.1 on): excluded, else quantized only when
    `quantized_layers` names the layer, one of its shards, or (an MoE layer) a child."""
    if modelopt_layer_excluded("modelopt_fp4", release, layer, rules.entries):
        return UNQUANTIZED
    names = set(rules.listed)
    head, _, leaf = layer.rpartition(".")
    listed = layer in names or any(f"{head}.{shard}" in names for shard in FUSED.get(leaf, ()))
    listed = listed or any(n.startswith(layer + ".") for n in names)
    return QUANTIZED if listed else UNQUANTIZED


def _linear(rules: IgnoreRules, release: Release, layer: str) -> str:
    method, entries = rules.method, rules.entries
    if method == "modelopt_mixed" and release >= (0, 17, 1):
        return _mixed(rules, release, layer)
    if method in ("compressed-tensors", "quark"):
        ignored = ct_quark_layer_ignored(method, release, layer, entries)
    elif method in MODELOPT:
        ignored = modelopt_layer_excluded(method, release, layer, entries)
    elif method == "gptq":
        ignored = not gptq_layer_quantized(release, layer, rules.dynamic, rules.in_block)
    elif method == "awq":
        ignored = awq_layer_skipped(release, layer, entries)
    elif method == "fp8":  # `ignored_layers`, by quant_utils' is_layer_skipped
        ignored = modelopt_layer_skipped(release, layer, entries)
    else:
        ignored = layer in entries
    return UNQUANTIZED if ignored else QUANTIZED


def _moe(rules: IgnoreRules, release: Release, layer: str) -> str:
    method, entries = rules.method, rules.entries
    if method == "compressed-tensors":
        if release < (0, 12, 0):
            # the MoE method never reads the list; until 0.10.0 an entry naming the layer
            # itself got it an unquantized *linear* method, which the MoE layer refuses
            ignored = release < (0, 10, 2) and ct_quark_layer_ignored(method, release, layer,
                                                                     entries)
            return ERROR if ignored else QUANTIZED
        flags = [ct_quark_layer_ignored(method, release, f"{layer}.0.{p}", entries)
                 for p in MOE_PROJECTIONS]
        return ERROR if any(flags) != all(flags) else UNQUANTIZED if all(flags) else QUANTIZED
    if method == "quark":
        if not ct_quark_layer_ignored(method, release, layer, entries, moe_children=True):
            return QUANTIZED
        return UNQUANTIZED if release >= (0, 26, 0) else ERROR  # linear method on an MoE
    if method == "modelopt_mixed" and release >= (0, 17, 1):
        return _mixed(rules, release, layer)
    if method in MODELOPT:
        fp8 = method == "modelopt"
        if release < ((0, 10, 0) if fp8 else (0, 9, 0)):
            return ERROR  # no MoE method: None, which FusedMoE asserted against until 0.11.1
        if release < ((0, 12, 0) if fp8 else (0, 11, 1)):
            return QUANTIZED  # the exclude list is not consulted for MoE layers
        excluded = modelopt_layer_excluded(method, release, layer, entries)
        return UNQUANTIZED if excluded else QUANTIZED
    if method == "fp8":  # the MoE layer reads `ignored_layers` from 0.11.0
        skipped = release >= (0, 11, 0) and modelopt_layer_skipped(release, layer, entries)
        return UNQUANTIZED if skipped else QUANTIZED
    return _linear(rules, release, layer)


def outcome(rules: IgnoreRules, release: Release, module: str) -> str:
    """What vLLM `release` builds for checkpoint `module`."""
    if rules.method is None:
        return UNQUANTIZED
    layer, moe = vllm_layer(module)
    # every expert of an MoE layer gets the layer's method: decide once per layer
    return _decide(rules.method, rules.entries, tuple(rules.dynamic), rules.in_block,
                   rules.model_type, rules.listed, release,
                   f"{layer}.0.down_proj" if moe else module)


@functools.lru_cache(maxsize=65536)
def _decide(method: str, entries: tuple[str, ...], dynamic: tuple[str, ...],
            in_block: tuple[object, ...], model_type: str | None, listed: tuple[str, ...],
            release: Release, module: str) -> str:
    rules = IgnoreRules(method, entries, dict.fromkeys(dynamic), in_block, model_type, listed)
    fixed = _fixed(rules, release, module)
    if fixed is not None:
        return fixed
    layer, moe = vllm_layer(module)
    try:
        return _moe(rules, release, layer) if moe else _linear(rules, release, layer)
    except MixedShards:
        return ERROR


def outcomes_by_release(rules: IgnoreRules, module: str,
                        releases: Iterable[Release] = MATRIX) -> dict[str, list[str]]:
    """outcome -> the releases (as text) that give it."""
    found: dict[str, list[str]] = {}
    for release in releases:
        found.setdefault(outcome(rules, release, module), []).append(release_text(release))
    return found


def possible_outcomes(rules: IgnoreRules, module: str, release: Release | None) -> set[str]:
    """The outcome for a known release; every outcome of the matrix for an unknown one."""
    if release is not None:
        return {outcome(rules, release, module)}
    return set(outcomes_by_release(rules, module))
