"""The signature model: a versioned rule with patterns, conditions and its own examples."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("info", "warning", "error", "critical")
STATUSES = ("experimental", "stable", "deprecated")
# A contract other tools rely on; extend it, never rename an entry.
CATEGORIES = (
    "marlin_tile", "marlin_shape", "marlin_padding", "nvfp4_marlin_fallback", "nvfp4_backend",
    "tensor_size_mismatch", "weight_shape_mismatch", "mtp_draft_load", "mtp_low_acceptance",
    "config_invalid", "spec_decode_config", "startup_timeout", "numerical_error",
    "weight_name_mismatch",
    "mixed_shard_scheme", "quant_method_mismatch", "quant_unsupported_gpu", "cuda_oom",
    "kv_cache_insufficient", "gpu_memory_insufficient", "nccl_error", "cuda_error",
    "model_unsupported", "model_not_found", "engine_core_failed", "worker_failed",
    "unknown_env_var", "lifecycle", "unrecognised", "unclassified",
    "quant_tp_split", "missing_dependency", "request_error", "draft_acceptance_low",
    "kernel_selection",
)
# Findings that report another's failure ("EngineCore failed to start"): never a root cause.
CONSEQUENCE_CATEGORIES = frozenset({"engine_core_failed", "worker_failed"})
# The generic rules (core.signatures.fallback): a cause only when no specific signature is one.
FALLBACK_CATEGORY = "unrecognised"
# What kind of fix a finding calls for; the remedy planner keys on these.
REMEDIES = (
    "none", "investigate", "switch_to_w4a4", "fix_mtp_ignore_list", "align_tensor_parallel",
    "fix_ignore_list", "fix_quantization_flag", "reduce_memory", "fix_model_path",
    "upgrade_vllm", "change_backend", "check_hardware", "fix_environment", "disable_mtp",
    "fix_arguments",
)
_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}
CONDITION_OPS = tuple(_OPERATORS)
# How a signature's findings repeat: on every line, or once per run of alike lines
# (core.signatures.repeats: a status line vLLM prints every few seconds while it serves).
REPEATS = ("every_line", "first_of_run")


@dataclass(frozen=True, slots=True)
class Pattern:
    regex: str
    literals: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Condition:
    capture: str
    op: str
    value: float

    def holds(self, captured: str) -> bool:
        number = parse_number(captured)
        if number is None or math.isnan(number):
            return False
        return _OPERATORS[self.op](number, self.value)


@dataclass(frozen=True, slots=True)
class Example:
    text: str
    captures: dict[str, str] | None = None  # None: any captures are fine


@dataclass(frozen=True, slots=True)
class Signature:
    id: str
    version: int
    status: str
    severity: str
    fatal: bool
    category: str
    title: str
    patterns: tuple[Pattern, ...]
    explanation: str
    remedy: str
    examples: tuple[Example, ...]
    counter_examples: tuple[Example, ...]
    conditions: tuple[Condition, ...] = ()
    key_captures: tuple[str, ...] | None = None  # None: every capture
    vllm_versions: str = ""
    references: tuple[str, ...] = ()
    path: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    repeats: str = "every_line"  # REPEATS

    @property
    def severity_rank(self) -> int:
        return SEVERITIES.index(self.severity)

    def conditions_hold(self, captures: dict[str, str]) -> bool:
        """All conditions on present captures hold, and at least one applied (if any exist)."""
        applicable = [c for c in self.conditions if c.capture in captures]
        if self.conditions and not applicable:
            return False
        return all(c.holds(captures[c.capture]) for c in applicable)

    def explain(self, captures: dict[str, str]) -> str:
        """The explanation with `{capture}` placeholders filled in (unknown ones left as-is)."""
        return _fill(self.explanation, captures)


def parse_number(text: str) -> float | None:
    """A capture as a number: "1,024" → 1024, "12.5%" → 12.5, "nan" → nan."""
    cleaned = text.strip().rstrip("%").replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return None


def _fill(template: str, captures: dict[str, str]) -> str:
    out: list[str] = []
    i = 0
    while i < len(template):
        start = template.find("{", i)
        if start < 0:
            out.append(template[i:])
            break
        end = template.find("}", start)
        if end < 0:
            out.append(template[i:])
            break
        name = template[start + 1:end]
        out.append(template[i:start])
        out.append(captures[name] if name in captures else template[start:end + 1])
        i = end + 1
    return "".join(out)
