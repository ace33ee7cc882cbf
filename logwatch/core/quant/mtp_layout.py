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
from dataclasses import dataclass, field, replace
from typing import Any

from logwatch.core.quant.ignore_rules import (
    ERROR,
    QUANTIZED,
    UNQUANTIZED,
    Release,
    parse_release,
    release_ranges,
    release_text,
)
from logwatch.core.quant.layer_outcome import IgnoreRules, outcome, vllm_layer
from logwatch.core.quant.mtp_entries import IgnoreSuggestion, suggest
from logwatch.core.quant.releases import candidate_releases

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
    ignored_by: str | None  # the entry that keeps it unquantized on the newest release
    # outcome -> the releases (of those that run the model) where vLLM builds it so
    built: tuple[tuple[str, tuple[Release, ...]], ...] = ()

    def outcomes(self, release: Release | None, rules: IgnoreRules) -> set[str]:
        """How vLLM builds it: at `release`, or every way across the candidate releases."""
        if release is not None:
            return {outcome(rules, release, self.name)}
        return {built for built, _ in self.built}

    def mismatched_at(self, release: Release | None, rules: IgnoreRules) -> bool:
        """vLLM builds it (or may, when the release is unknown) in a precision other than
        the one it is stored in, or refuses the model over it."""
        built = self.outcomes(release, rules)
        wrong = {QUANTIZED, ERROR} if self.stored == "bf16" else {UNQUANTIZED, ERROR}
        return bool(built & wrong)

    @property
    def mismatched(self) -> bool:
        return (self.stored == "bf16" and any(b != UNQUANTIZED for b, _ in self.built)) or (
            self.stored == "quantized" and any(b != QUANTIZED for b, _ in self.built))


@dataclass(frozen=True, slots=True)
class MtpLayout:
    layout: str  # "mtp_prefix" (Qwen) or "extra_layers" (DeepSeek/GLM)
    layers: int  # num_nextn_predict_layers / mtp_num_hidden_layers
    first_layer: int | None  # N for the extra_layers layout
    modules: tuple[MtpModule, ...]
    rules: IgnoreRules = field(default_factory=lambda: IgnoreRules(None))
    releases: tuple[Release, ...] = ()  # the releases that run this architecture

    def release_for(self, version: str | None) -> Release | None:
        """The release whose rules apply to a vLLM version string: None when unknown, or
        older than every release that registers the architecture (a build running it is not
        that release's code, so its rules say nothing)."""
        found = parse_release(version)
        if found is not None and self.releases and found < self.releases[0]:
            return None
        return found

    def uncovered_at(self, release: Release | None) -> tuple[str, ...]:
        """BF16 modules vLLM builds quantized (or fails on) at `release`; with the release
        unknown, those it does on at least one candidate release."""
        return collapse_experts(m.name for m in self.modules if m.stored == "bf16"
                                and m.mismatched_at(release, self.rules))

    def load_errors_at(self, release: Release | None) -> tuple[str, ...]:
        """Modules over which vLLM refuses the model at `release` (unknown: on some release):
        an entry naming a Quark MoE layer before 0.26, some but not all shards of a fused
        layer, some but not all of compressed-tensors' expert-0 projections."""
        return collapse_experts(m.name for m in self.modules
                                if ERROR in m.outcomes(release, self.rules))

    def ignored_quantized_at(self, release: Release | None) -> tuple[str, ...]:
        return collapse_experts(m.name for m in self.modules if m.stored == "quantized"
                                and m.mismatched_at(release, self.rules))

    def covered_at(self, release: Release | None) -> bool:
        return not any(m.mismatched_at(release, self.rules) for m in self.modules)

    @property
    def uncovered_bf16(self) -> tuple[str, ...]:
        """BF16 modules the ignore list may miss: vLLM builds them quantized (garbage draft)
        on at least one release that runs the model."""
        return self.uncovered_at(None)

    @property
    def ignored_quantized(self) -> tuple[str, ...]:
        """Quantized modules the ignore list names: vLLM builds them unquantized."""
        return self.ignored_quantized_at(None)

    @property
    def covered(self) -> bool:
        return self.covered_at(None)

    def suggestion(self, release: Release | None, key: str) -> IgnoreSuggestion | None:
        """Entries for the `key` list that cover the uncovered BF16 modules, checked under the
        rules of `release` (unknown: of every release that runs the model); None when
        nothing is uncovered."""
        missing = self.uncovered_at(release)
        if not missing:
            return None
        if self.layout == "mtp_prefix":
            prefixes = ["mtp."]
        else:
            assert self.first_layer is not None
            prefixes = [f"model.layers.{n}." for n in
                        range(self.first_layer, self.first_layer + max(self.layers, 1))]
        bf16 = [m.name for m in self.modules if m.stored == "bf16"]
        exact = tuple(n for n in bf16 if collapse_experts([n])[0] in missing)
        return suggest(self.rules, key, prefixes, bf16, exact,
                       (release,) if release is not None else self.releases, self.releases)

    def suggested_entries(self, release: Release | None = None) -> tuple[str, ...]:
        """The checked entries for the method's list, () when none covers every BF16 module
        on `release` (unknown: on every release that runs the model)."""
        found = self.suggestion(release, "ignore")
        return found.entries if found is not None and found.covers else ()

    def differing_releases(self) -> dict[str, list[str]]:
        """When the coverage depends on the release: 'covered' / 'NOT covered' -> ranges."""
        split: dict[str, list[Release]] = {}
        for release in self.releases:
            key = "covered" if self.covered_at(release) else "NOT covered"
            split.setdefault(key, []).append(release)
        return {k: release_ranges(v, self.releases) for k, v in split.items()} \
            if len(split) > 1 else {}

    def to_dict(self, version: str | None = None) -> dict[str, Any]:
        """`covered` and the module lists under the rules of vLLM `version` (unknown: on
        every release that runs the model)."""
        release = self.release_for(version)
        return {
            "layout": self.layout, "layers": self.layers, "first_layer": self.first_layer,
            "modules": len(self.modules), "covered": self.covered_at(release),
            "judged_on": release_text(release) if release else "any release",
            "uncovered_bf16": list(self.uncovered_at(release)),
            "ignored_quantized": list(self.ignored_quantized_at(release)),
            "load_errors": list(self.load_errors_at(release)),
            "stored": {s: sum(1 for m in self.modules if m.stored == s)
                       for s in ("quantized", "bf16")},
            "coverage_by_release": self.differing_releases(),
            "module_list": self.module_table(),
        }

    def module_table(self) -> list[dict[str, Any]]:
        """Every MTP module (experts collapsed), how it is stored, what ignores it, and how
        vLLM builds it (outcome -> release ranges) when that depends on the release."""
        rows: dict[str, dict[str, Any]] = {}
        for module in self.modules:
            name = collapse_experts([module.name])[0]
            row: dict[str, Any] = {"module": name, "stored": module.stored,
                                   "ignored_by": module.ignored_by}
            if len(module.built) > 1:
                row["built"] = {b: release_ranges(r, self.releases) for b, r in module.built}
            rows.setdefault(name, row)
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


def covering_entry(rules: IgnoreRules, release: Release, module: str) -> str | None:
    """The first entry that on its own keeps `module` unquantized at `release`."""
    for entry in rules.entries:
        alone, none = replace(rules, entries=(entry,)), replace(rules, entries=())
        if outcome(alone, release, module) == UNQUANTIZED and outcome(
                none, release, module) != UNQUANTIZED:
            return entry
    return None


def mtp_layout(config: dict[str, Any], tensor_names: Sequence[str],
               rules: IgnoreRules) -> MtpLayout | None:
    """The draft's modules and how each release builds them; None without MTP layers."""
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
            if found and len(found.group(1)) <= 9 and int(found.group(1)) >= hidden:
                draft[m] = p
    else:
        return None
    if rules.method == "gptq" and not rules.in_block:
        # without modules_in_block_to_quantize, vLLM (0.11 on) takes the modules that have
        # non-float tensors in the checkpoint; those that can match a draft module suffice
        packed = [m for m, p in modules.items() if p & set(QUANT_PARAMS)]
        rules = replace(rules, in_block=tuple(m for m in packed if any(m in d for d in draft)))
    releases = candidate_releases(config.get("architectures") or ())
    newest = releases[-1]
    found_modules = []
    # the experts of one MoE layer share its method: judge each layer once
    judged: dict[str, tuple[str | None, tuple[tuple[str, tuple[Release, ...]], ...]]] = {}
    for name in sorted(draft):
        params = draft[name]
        if not _is_linear(name, params):
            continue
        stored = "quantized" if params & set(QUANT_PARAMS) else "bf16"
        layer, moe = vllm_layer(name)
        key = layer if moe else name
        if key not in judged:
            by_outcome: dict[str, list[Release]] = {}
            for release in releases:
                by_outcome.setdefault(outcome(rules, release, name), []).append(release)
            judged[key] = (covering_entry(rules, newest, name),
                           tuple((k, tuple(v)) for k, v in by_outcome.items()))
        entry, built = judged[key]
        found_modules.append(MtpModule(name, stored, entry, built))
    return MtpLayout(layout, layers, first, tuple(found_modules), rules, releases)

