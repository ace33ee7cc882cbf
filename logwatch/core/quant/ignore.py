"""How `--hf-overrides` changes the configuration vLLM reads (the ignore list among it).

Whether an ignore entry keeps a layer unquantized depends on the method and the release:
core.quant.ignore_rules and core.quant.layer_outcome.
"""

from __future__ import annotations

from typing import Any


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
