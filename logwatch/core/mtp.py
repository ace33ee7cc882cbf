"""The MTP layout of a checkpoint: which modules form the draft, how each is stored, and
whether the ignore list covers it (vllm-logs.md §4.2).

Qwen3-Next / Qwen3.5 / Qwen3.6 store the draft under `mtp.`; DeepSeek, GLM and their kin store
it as extra decoder layers `model.layers.{N}` at N >= num_hidden_layers. Only tensor names are
read (from model.safetensors.index.json); a module is stored quantized when it has quantization
parameters (weight_packed, weight_scale, qweight, ...), BF16 when it has a plain weight only.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from logwatch.core.ignore import ignored_by

QUANT_PARAMS = ("weight_packed", "weight_scale", "weight_scale_2", "weight_global_scale",
                "input_global_scale", "input_scale", "weight_scale_inv", "weight_zero_point",
                "weight_shape", "qweight", "qzeros", "scales", "g_idx")
PLAIN_PARAMS = ("weight", "bias")
_LAYER = re.compile(r"^(?:model\.(?:language_model\.)?)?layers\.(\d+)\.")
_EXPERT = re.compile(r"\.experts\.\d+\.")


@dataclass(frozen=True, slots=True)
class MtpModule:
    name: str  # checkpoint module name, e.g. "mtp.fc" or "model.layers.61.eh_proj"
    stored: str  # "quantized" or "bf16"
    ignored_by: str | None  # the ignore entry that covers it

    @property
    def mismatched(self) -> bool:
        """vLLM will build it in a precision other than the one it is stored in."""
        return (self.stored == "bf16") == (self.ignored_by is None)


@dataclass(frozen=True, slots=True)
class MtpLayout:
    layout: str  # "mtp_prefix" (Qwen) or "extra_layers" (DeepSeek/GLM)
    layers: int  # num_nextn_predict_layers / mtp_num_hidden_layers
    first_layer: int | None  # N for the extra_layers layout
    modules: tuple[MtpModule, ...]

    @property
    def uncovered_bf16(self) -> tuple[str, ...]:
        """BF16 modules the ignore list misses: vLLM builds them quantized (garbage draft)."""
        return collapse_experts(m.name for m in self.modules
                                if m.stored == "bf16" and m.ignored_by is None)

    @property
    def ignored_quantized(self) -> tuple[str, ...]:
        """Quantized modules the ignore list names: vLLM builds them unquantized."""
        return collapse_experts(m.name for m in self.modules
                                if m.stored == "quantized" and m.ignored_by is not None)

    @property
    def covered(self) -> bool:
        return not any(m.mismatched for m in self.modules)

    def suggested_entries(self) -> tuple[str, ...]:
        """Ignore entries that cover the uncovered BF16 modules, in vLLM's `re:` form."""
        if not self.uncovered_bf16:
            return ()
        if self.layout == "mtp_prefix":
            return (r"re:^mtp\.",)
        assert self.first_layer is not None
        return tuple(rf"re:^model\.layers\.{n}\." for n in
                     range(self.first_layer, self.first_layer + max(self.layers, 1)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "layout": self.layout, "layers": self.layers, "first_layer": self.first_layer,
            "modules": len(self.modules), "covered": self.covered,
            "uncovered_bf16": list(self.uncovered_bf16),
            "ignored_quantized": list(self.ignored_quantized),
            "stored": {s: sum(1 for m in self.modules if m.stored == s)
                       for s in ("quantized", "bf16")},
            "module_list": self.module_table(),
        }

    def module_table(self) -> list[dict[str, Any]]:
        """Every MTP module (experts collapsed), how it is stored, what ignores it."""
        rows: dict[str, dict[str, Any]] = {}
        for module in self.modules:
            name = collapse_experts([module.name])[0]
            rows.setdefault(name, {"module": name, "stored": module.stored,
                                   "ignored_by": module.ignored_by})
        return list(rows.values())


def collapse_experts(names: Iterable[str]) -> tuple[str, ...]:
    """`...experts.7.down_proj` and its siblings become one `...experts.*.down_proj`."""
    return tuple(sorted({_EXPERT.sub(".experts.*.", n) for n in names}))


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's config (nested as text_config in multimodal checkpoints)."""
    nested = config.get("text_config")
    return nested if isinstance(nested, dict) else config


def mtp_layer_count(config: dict[str, Any]) -> int:
    text = text_config(config)
    for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers"):
        value = text.get(key, config.get(key))
        if isinstance(value, int) and value > 0:
            return value
    return 0


def _modules(tensor_names: Iterable[str]) -> dict[str, set[str]]:
    modules: dict[str, set[str]] = defaultdict(set)
    for name in tensor_names:
        module, _, param = name.rpartition(".")
        if module:
            modules[module].add(param)
    return modules


# Built unquantized whatever the checkpoint says: routers, norms, embeddings.
NEVER_QUANTIZED = ("gate", "shared_expert_gate", "embed_tokens", "rotary_emb")


def _is_linear(module: str, params: set[str]) -> bool:
    leaf = module.rsplit(".", 1)[-1]
    if "norm" in leaf or leaf in NEVER_QUANTIZED:
        return False
    return bool(params & set(QUANT_PARAMS)) or "weight" in params


def mtp_layout(config: dict[str, Any], tensor_names: Sequence[str], ignore: Sequence[str],
               method: str | None) -> MtpLayout | None:
    """The draft's modules and their coverage; None when the checkpoint has no MTP layers."""
    layers = mtp_layer_count(config)
    hidden = text_config(config).get("num_hidden_layers")
    modules = _modules(tensor_names)
    if any(m.startswith(("mtp.", "model.mtp.")) for m in modules):
        layout, first = "mtp_prefix", None
        draft = {m: p for m, p in modules.items() if m.startswith(("mtp.", "model.mtp."))}
    elif isinstance(hidden, int) and layers:
        layout, first = "extra_layers", hidden
        draft = {}
        for m, p in modules.items():
            found = _LAYER.match(m + ".")
            if found and int(found.group(1)) >= hidden:
                draft[m] = p
    else:
        return None
    found_modules = []
    for name in sorted(draft):
        params = draft[name]
        if not _is_linear(name, params):
            continue
        stored = "quantized" if params & set(QUANT_PARAMS) else "bf16"
        found_modules.append(MtpModule(name, stored, ignored_by(name, ignore, method)))
    return MtpLayout(layout, layers, first, tuple(found_modules))
