"""A corrected launch, worked out from what went wrong: each change to the argv, the
environment and the model directory with its reason, the preconditions that must hold, and
what undoes it. Both seed problems are fixed in one relaunch when both apply.

- A weight-only Marlin path that cannot tile a layer: serve the W4A4 NVFP4 variant of the same
  base model through FlashInfer CUTLASS (core.remedy.fp4_backend picks the release's switches). Only
  on a GPU with native FP4 (compute capability 10.0 and newer): below that W4A4 falls back to
  Marlin too, so there is no plan, only the diagnosis' alternatives.
- BF16 MTP modules the ignore list misses: the list, merged with the entries core.quant.mtp_entries
  verified under the method's rules of the release, in an overlay of the model directory (the
  operator's files stay as they are).

Pure: the candidate variants' facts are read by the caller (host/variants.py). Nothing in a
plan comes from a log: paths come from the configuration or the directories beside the model,
flag and variable values from logwatch's own tables, ignore entries from core.quant.mtp_entries, and
the argv a plan edits is the launch's own, given when the plan is applied.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from logwatch.core.diagnosis.latent import LATENT_MARLIN, LATENT_MTP
from logwatch.core.diagnosis.model import Diagnosis, Remedy
from logwatch.core.quant.ignore_rules import parse_release
from logwatch.core.quant.scheme import NATIVE_FP4_CAPABILITY
from logwatch.core.remedy.fp4_backend import (
    GEMM_ENV,
    GEMM_ENV_VALUE,
    LINEAR_FLAG,
    MOE_ENV,
    MOE_ENV_VALUE,
    MOE_FLAG,
    fp4_switches,
)
from logwatch.core.snapshot.argv import LaunchSpec
from logwatch.core.snapshot.model import ModelFacts, Snapshot
from logwatch.core.snapshot.vllm_cli import CliVocabulary

W4A4 = "W4A4_NVFP4"
PATH_CAUSES = frozenset({"marlin_weight_only_tile", LATENT_MARLIN, "marlin_on_native_fp4"})
MTP_CAUSES = frozenset({"mtp_ignore_list_gap", LATENT_MTP})
SAME_BASE_KEYS = ("hidden_size", "intermediate_size", "moe_intermediate_size",
                  "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size")


@dataclass(frozen=True, slots=True)
class Change:
    """One edit to the launch. `kind`: model (serve another directory: `value`, or the
    overlay when None), flag / unset_flag, env / unset_env, keep_served_name (name the served
    model as the launch did, so clients keep working after the path changes)."""

    kind: str
    name: str
    value: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "value": self.value,
                "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Overlay:
    """The model directory served through a copy of its directory entries (symlinks) whose
    quantization config lists `entries` too, merged after the existing ones."""

    model_dir: str
    file: str  # config.json, hf_quant_config.json or quantization_config.json
    key: str  # ignore, exclude, exclude_modules, dynamic, modules_to_not_convert
    entries: tuple[str, ...]
    merged: tuple[str, ...]  # the whole list after the merge

    def to_dict(self) -> dict[str, Any]:
        return {"model_dir": self.model_dir, "file": self.file, "key": self.key,
                "entries": list(self.entries), "merged": list(self.merged)}


@dataclass(frozen=True, slots=True)
class Check:
    """A precondition: None when the snapshot cannot tell."""

    name: str
    holds: bool | None
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "holds": self.holds, "why": self.why}


@dataclass(frozen=True, slots=True)
class Plan:
    causes: tuple[str, ...]
    changes: tuple[Change, ...] = ()
    overlay: Overlay | None = None
    checks: tuple[Check, ...] = ()
    refused: tuple[str, ...] = ()  # why no relaunch can work
    alternatives: tuple[Remedy, ...] = ()  # what else the diagnoses found, for a person
    notes: tuple[str, ...] = ()
    target: str | None = None

    @property
    def startable(self) -> bool:
        """Something to change, nothing refused, every precondition known to hold."""
        return bool(self.changes) and not self.refused and all(c.holds for c in self.checks)

    @property
    def digest(self) -> str:
        """What the plan does, hashed: the same changes give the same plan id."""
        body = {"changes": [c.to_dict() for c in self.changes],
                "overlay": self.overlay.to_dict() if self.overlay else None}
        blob = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.digest, "target": self.target, "causes": list(self.causes),
                "startable": self.startable, "changes": [c.to_dict() for c in self.changes],
                "overlay": self.overlay.to_dict() if self.overlay else None,
                "checks": [c.to_dict() for c in self.checks], "refused": list(self.refused),
                "alternatives": [r.to_dict() for r in self.alternatives],
                "notes": list(self.notes),
                "undo": "restore the launch's previous argv and environment; remove the "
                        "overlay directory" if self.overlay else
                        "restore the launch's previous argv and environment"}


def same_base(a: ModelFacts, b: ModelFacts) -> str | None:
    """Why `b` is not a variant of the same base model as `a` (None: it is)."""
    if a.architectures != b.architectures:
        return f"architecture {', '.join(b.architectures) or '?'}"
    if a.num_hidden_layers != b.num_hidden_layers:
        return f"{b.num_hidden_layers} layers, not {a.num_hidden_layers}"
    for key in SAME_BASE_KEYS:
        if a.dims.get(key) != b.dims.get(key):
            return f"{key} {b.dims.get(key)}, not {a.dims.get(key)}"
    if (a.mtp is None) != (b.mtp is None):
        return "no MTP layers" if b.mtp is None else "MTP layers the model has not"
    return None


def choose_variant(current: ModelFacts, candidates: Mapping[str, ModelFacts]
                   ) -> tuple[str | None, list[str]]:
    """The first candidate (in the order given: the target's variants, then the directories
    beside the model) that is W4A4 NVFP4 of the same base model, and why each other one is
    not."""
    rejected = []
    for name, facts in candidates.items():
        if facts.path == current.path:
            continue
        if facts.quant.scheme != W4A4:
            rejected.append(f"{name}: {facts.quant.scheme}, not W4A4 NVFP4")
            continue
        if (why := same_base(current, facts)) is not None:
            rejected.append(f"{name}: another model ({why})")
            continue
        return name, rejected
    return None, rejected


def plan_relaunch(diagnoses: Sequence[Diagnosis], snapshot: Snapshot,
                  candidates: Mapping[str, ModelFacts] | None = None,
                  target: str | None = None, vocab: CliVocabulary | None = None
                  ) -> Plan | None:
    """The plan that answers these diagnoses in this snapshot; None when none of them is a
    cause a relaunch fixes. `candidates`: model facts of the possible W4A4 variants, by the
    name the operator knows them by (a variant's name or its directory). `vocab`: the flags
    and variables of each release (core.snapshot.vllm_cli), which choose the backend switches."""
    causes = tuple(dict.fromkeys(d.cause for d in diagnoses
                                 if d.cause in PATH_CAUSES | MTP_CAUSES))
    if not causes:
        return None
    model = snapshot.model
    alternatives = tuple(r for d in diagnoses if d.cause in causes for r in d.remedies
                         if r.applicable is not False and r.kind not in
                         ("switch_to_w4a4", "fix_mtp_ignore_list", "change_backend"))
    plan = Plan(causes, alternatives=alternatives, target=target)
    if model is None:
        return replace(plan, refused=("no model directory in the snapshot: give --model-dir",))
    changes: list[Change] = []
    checks: list[Check] = []
    refused: list[str] = []
    notes: list[str] = []
    served, variant = model, None
    release = parse_release(snapshot.vllm_version)
    if any(c in PATH_CAUSES for c in causes):
        served, variant = _path_fix(model, snapshot, candidates or {}, vocab, changes,
                                    checks, refused, notes)
    overlay = None
    if snapshot.uses_mtp or any(c in MTP_CAUSES for c in causes):
        overlay = _ignore_fix(served, snapshot.vllm_version, checks, refused)
    if overlay is not None:
        covers = f"its {overlay.key} list covers the BF16 MTP modules"
        changes.insert(0, Change("model", "model", None, f"{variant}, through an overlay: "
                                 f"{covers}" if variant else
                                 f"an overlay of {served.path}: {covers}"))
    elif variant is not None:
        changes.insert(0, Change("model", "model", served.path, variant))
    if changes and changes[0].kind == "model":
        changes.append(Change("keep_served_name", "--served-model-name", None,
                              "the served model keeps the name clients ask for"))
    if release is None and changes:
        notes.append("vLLM release unknown: the plan holds for every release checked, or "
                     "says where it does not")
    return replace(plan, changes=tuple(changes), overlay=overlay, checks=tuple(checks),
                   refused=tuple(refused), notes=tuple(notes))


def _path_fix(model: ModelFacts, snapshot: Snapshot, candidates: Mapping[str, ModelFacts],
              vocab: CliVocabulary | None, changes: list[Change], checks: list[Check],
              refused: list[str], notes: list[str]) -> tuple[ModelFacts, str | None]:
    """Serve the W4A4 variant through FlashInfer CUTLASS: the model then served, and why
    it replaces the launch's (None: the launch's own is W4A4 already)."""
    cap = snapshot.gpu.capability
    if cap is None:
        checks.append(Check("native_fp4", None, "GPU compute capability unknown: W4A4 needs "
                            "10.0 or newer (give --gpu-capability)"))
    elif cap < NATIVE_FP4_CAPABILITY:
        refused.append(f"compute capability {cap / 10:.1f} has no native FP4: a W4A4 "
                       "checkpoint falls back to Marlin here as well")
        return model, None
    else:
        checks.append(Check("native_fp4", True, f"compute capability {cap / 10:.1f} runs "
                            "W4A4 NVFP4 natively"))
    served, variant = model, None
    if model.quant.scheme != W4A4:
        name, rejected = choose_variant(model, candidates)
        if name is None:
            refused.append("no W4A4 NVFP4 variant of this model was found (give the "
                           "target's variants, or put it beside the model directory)"
                           + (": " + "; ".join(rejected) if rejected else ""))
            return model, None
        served = candidates[name]
        variant = f"the W4A4 NVFP4 variant of the same model ({name})"
        checks.append(Check("same_base_model", True, f"{name} has the architecture and "
                            "shapes of the model served"))
    if snapshot.launch.get("quantization") not in (None, served.quant.method):
        changes.append(Change("unset_flag", "--quantization", None, "vLLM reads the "
                              "variant's quantization from its config"))
    has_moe = "moe_intermediate_size" in served.dims
    switches, switch_notes = fp4_switches(parse_release(snapshot.vllm_version), has_moe,
                                          vocab)
    notes.extend(switch_notes)
    for switch in switches:
        changes.append(Change("flag" if switch.kind == "flag" else "env", switch.name,
                              switch.value, "FlashInfer CUTLASS kernels for NVFP4 (never a "
                              "Marlin repack)"))
    chosen = {s.name for s in switches}
    for name, wanted in ((GEMM_ENV, GEMM_ENV_VALUE), (MOE_ENV, MOE_ENV_VALUE)):
        if snapshot.env.get(name, wanted) != wanted and name not in chosen:
            changes.append(Change("unset_env", name, None, "it chooses another NVFP4 backend "
                                  "(Marlin included)"))
    for flag, key in ((LINEAR_FLAG, "linear_backend"), (MOE_FLAG, "moe_backend")):
        if snapshot.launch.get(key) not in (None, "auto") and flag not in chosen:
            changes.append(Change("unset_flag", flag, None, "it chooses another backend "
                                  "(Marlin included)"))
    return served, variant


def _ignore_fix(model: ModelFacts, version: str | None, checks: list[Check],
                refused: list[str]) -> Overlay | None:
    """The overlay whose ignore list covers `model`'s BF16 MTP modules; None when nothing is
    uncovered (or nothing can cover them, said in `refused`)."""
    mtp = model.mtp
    if mtp is None:
        return None
    release = mtp.release_for(version)
    if not mtp.uncovered_at(release):
        return None
    key = model.quant.ignore_key or "ignore"
    suggestion = mtp.suggestion(release, key)
    if suggestion is None:
        return None
    if not suggestion.covers:
        refused.append(f"no {suggestion.key} entry keeps every BF16 MTP module unquantized "
                       f"on vLLM {', '.join(suggestion.failing)}: upgrade vLLM")
        return None
    checks.append(Check("mtp_covered", True, f"with {', '.join(suggestion.entries)} every "
                        "BF16 MTP module is built unquantized under the method's rules of "
                        + (f"vLLM {version}" if release else "every release that runs it")))
    existing = model.quant.ignore if suggestion.key != "dynamic" else model.quant.dynamic_keys
    merged = tuple(existing) + tuple(e for e in suggestion.entries if e not in existing)
    return Overlay(model.path, model.quant.source, suggestion.key, suggestion.entries, merged)


@dataclass(frozen=True, slots=True)
class Launch:
    """What a launch runs: its parsed argv and the environment the caller knows of it (a
    child's whole environment; for a unit, what its drop-in sets)."""

    spec: LaunchSpec
    env: dict[str, str] = field(default_factory=dict)


def apply_plan(plan: Plan, launch: Launch, overlay_dir: str | None = None) -> Launch:
    """The launch after the plan: `launch` is the real one (the unit's ExecStart, the
    child's argv), never one read from a log; `overlay_dir` where the overlay was made."""
    spec, env = launch.spec, dict(launch.env)
    old_model = spec.model
    for change in plan.changes:
        if change.kind == "model":
            path = change.value if change.value is not None else overlay_dir
            if path is None:
                raise ValueError("the plan serves an overlay: make it first (overlay_dir)")
            spec = spec.with_model(path)
        elif change.kind == "flag":
            spec = spec.with_option(change.name, change.value)
        elif change.kind == "unset_flag":
            spec = spec.without_option(change.name)
        elif change.kind == "env" and change.value is not None:
            env[change.name] = change.value
        elif change.kind == "unset_env":
            env.pop(change.name, None)
        elif (change.kind == "keep_served_name" and old_model is not None
              and spec.option("--served-model-name") is None):
            spec = spec.with_option("--served-model-name", old_model)
    return Launch(spec, env)


def merge_ignore_list(data: dict[str, Any], overlay: Overlay) -> dict[str, Any]:
    """`data` (the parsed `overlay.file`) with the overlay's entries merged into the list vLLM
    reads, found where core.quant.scheme finds it; the rest unchanged."""
    out: dict[str, Any] = json.loads(json.dumps(data))
    holder = _quant_dict(out, overlay.file)
    if holder is None:
        raise ValueError(f"{overlay.file} has no quantization config to merge into")
    if overlay.key == "dynamic":
        found = holder.get("dynamic")
        dynamic: dict[str, Any] = found if isinstance(found, dict) else {}
        holder["dynamic"] = {**{e: {} for e in overlay.entries if e not in dynamic}, **dynamic}
        return out
    current = holder.get(overlay.key)
    listed = list(current) if isinstance(current, list) else []
    holder[overlay.key] = listed + [e for e in overlay.entries if e not in listed]
    return out


def _quant_dict(data: dict[str, Any], file: str) -> dict[str, Any] | None:
    if file == "config.json":
        text = data.get("text_config") if isinstance(data.get("text_config"), dict) else {}
        qc = data.get("quantization_config") or (text or {}).get("quantization_config")
    else:
        qc = data
    if not isinstance(qc, dict):
        return None
    inner = qc.get("quantization")
    found: dict[str, Any] = inner if isinstance(inner, dict) else qc  # ModelOpt nests it
    return found


def render_plan(plan: Plan, snapshot: Snapshot) -> str:
    """The plan as a readable diff of the launch, with the reasons and preconditions."""
    name = f" for {plan.target}" if plan.target else ""
    out = [f"PLAN{name} {plan.digest}: " + ", ".join(plan.causes)]
    model = snapshot.model.path if snapshot.model else snapshot.launch.get("model")
    for change in plan.changes:
        if change.kind == "model":
            out.append(f"  serve      {model}  ->  {change.value or '(the overlay below)'}")
        elif change.kind == "flag":
            out.append(f"  set flag   {change.name} {change.value}")
        elif change.kind == "env":
            out.append(f"  set env    {change.name}={change.value}")
        elif change.kind in ("unset_flag", "unset_env"):
            out.append(f"  unset {change.kind[6:]:4s} {change.name}")
        else:
            out.append(f"  set flag   {change.name} (the model name the launch served)")
        out.append(f"             why: {change.reason}")
    if plan.overlay:
        o = plan.overlay
        out.append(f"  overlay of {o.model_dir}: {o.file} {o.key} += "
                   + ", ".join(o.entries))
        out.append(f"      merged: {', '.join(o.merged)}")
    for check in plan.checks:
        mark = {True: "ok", False: "NO", None: "??"}[check.holds]
        out.append(f"  [{mark}] {check.name}: {check.why}")
    for reason in plan.refused:
        out.append(f"  REFUSED: {reason}")
    for note in plan.notes:
        out.append(f"  note: {note}")
    if plan.alternatives and not plan.startable:
        out.append("  what else may work:")
        out.extend(f"    - {r.summary} ({r.why})" for r in plan.alternatives)
    out.append("  startable" if plan.startable else "  not startable")
    return "\n".join(out) + "\n"
