"""Decide whether a module is on a checkpoint's ignore list, by the quantization method's rules.

vllm-logs.md §3.3-3.5: compressed-tensors and Quark match exact names or `re:` patterns
(anchored at the start); ModelOpt matches exactly, then by legacy substring, then by fnmatch;
fused layers (qkv_proj, gate_up_proj) match by their fused name or shard by shard; Quark counts
an MoE `experts` parent as ignored when an exclude entry names one of its children.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Any

import regex

# Checkpoint shard name -> the fused module vLLM builds from it.
FUSED_SHARDS = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
                "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"}
PATTERN_TIMEOUT_S = 0.05


def _re_match(pattern: str, name: str) -> bool:
    try:
        return regex.match(pattern, name, timeout=PATTERN_TIMEOUT_S) is not None
    except (regex.error, TimeoutError):
        return False  # a broken or pathological entry ignores nothing, as in vLLM (it raises)


def _entry_matches(entry: str, name: str, method: str | None) -> bool:
    if entry.startswith("re:"):
        return _re_match(entry[3:], name)
    if entry == name:
        return True
    if method in ("modelopt", "modelopt_fp4", "modelopt_mixed"):
        stripped = name.replace("language_model.", "", 1)
        if entry in name or entry in stripped:  # legacy substring match
            return True
        return any(ch in entry for ch in "*?[") and fnmatch.fnmatchcase(name, entry)
    if method not in ("compressed-tensors", "quark"):
        return any(ch in entry for ch in "*?[") and fnmatch.fnmatchcase(name, entry)
    return False


def fused_name(module: str) -> str | None:
    head, _, leaf = module.rpartition(".")
    fused = FUSED_SHARDS.get(leaf)
    return f"{head}.{fused}" if fused and head else None


def ignored_by(module: str, entries: Sequence[str], method: str | None) -> str | None:
    """The ignore entry that covers `module` (a checkpoint module name), or None."""
    candidates = [module]
    if (fused := fused_name(module)) is not None:
        candidates.append(fused)
    for entry in entries:
        if any(_entry_matches(entry, name, method) for name in candidates):
            return entry
    if method == "quark" and ".experts." in module:  # the MoE children rule
        parent = module[: module.index(".experts.") + len(".experts")]
        for entry in entries:
            if not entry.startswith("re:") and (entry == parent
                                                or entry.startswith(parent + ".")):
                return entry
    return None


def merge_overrides(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Apply `--hf-overrides` the way it behaves for nested configs: dicts merge key by key,
    everything else (lists included) replaces."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_overrides(merged[key], value)
        else:
            merged[key] = value
    return merged
