"""Join incidents and the snapshot in force into causes, with the evidence and the config
fields that prove them, a confidence, and the remedies that apply on this GPU.

Rules are small functions `(incident, context) -> Diagnosis | None`, tried in order; an
incident no rule explains still gets its signature's own explanation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from logwatch.core.findings import Evidence
from logwatch.core.ignore_rules import Release, parse_release
from logwatch.core.incidents import Incident
from logwatch.core.marlin_split import aligned_sizes
from logwatch.core.mtp import MtpLayout
from logwatch.core.mtp_coverage import snapshot_release, suggest_mtp_entries, uncovered_mtp_modules
from logwatch.core.mtp_entries import IgnoreSuggestion
from logwatch.core.quant import NATIVE_FP4_CAPABILITY
from logwatch.core.signature import parse_number
from logwatch.core.snapshot import Snapshot

TP_CHOICES = (1, 2, 4, 8, 16)
# vLLM pads dense FP4 layers up to a Marlin tile from 0.24.0 (`marlin_padded_nk` in
# marlin_utils_fp4.py); MoE experts are repacked unpadded in every release up to 0.33.0.
PADDING_RELEASE = (0, 24)
HIGH_ACCEPTANCE_PERCENT = 95.0


@dataclass(frozen=True, slots=True)
class Remedy:
    kind: str  # the remedy vocabulary of signatures (switch_to_w4a4, fix_mtp_ignore_list, ...)
    summary: str
    applicable: bool | None  # None: cannot tell from the snapshot
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "summary": self.summary, "applicable": self.applicable,
                "why": self.why}


@dataclass(frozen=True, slots=True)
class Diagnosis:
    cause: str
    title: str
    signature: str | None  # the incident's signature id (None: a configuration finding)
    summary: str
    details: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)  # the fields that prove it
    confidence: float = 0.5
    remedies: tuple[Remedy, ...] = ()
    incident: int | None = None  # index of the explained incident in the report
    latent: bool = False  # shown by the snapshot, not (yet) by the log: core/latent.py

    def to_dict(self) -> dict[str, Any]:
        return {"cause": self.cause, "title": self.title, "signature": self.signature,
                "incident": self.incident, "latent": self.latent,
                "summary": self.summary, "details": list(self.details),
                "evidence": [{"source": e.source, "line": e.lineno, "text": e.text}
                             for e in self.evidence],
                "config": self.config, "confidence": self.confidence,
                "remedies": [r.to_dict() for r in self.remedies]}


@dataclass(frozen=True, slots=True)
class Context:
    snapshot: Snapshot
    incidents: Sequence[Incident]

    def has(self, signature_id: str) -> Incident | None:
        return next((i for i in self.incidents if i.signature.id == signature_id), None)

    @property
    def capability(self) -> int | None:
        return self.snapshot.gpu.capability


def _version_tuple(text: str | None) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


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
    if value is None or tile is None or tile <= 0:
        return None
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


MTP_CATEGORIES = ("tensor_size_mismatch", "weight_shape_mismatch", "mtp_draft_load")


def mtp_module_details(missing: Sequence[str], extra: Sequence[str],
                       key: str = "ignore") -> list[str]:
    """The MTP modules the ignore list gets wrong, named: BF16 ones it misses, quantized ones
    it names."""
    details = []
    if missing:
        details.append(f"MTP modules stored BF16 but not in the {key} list ({len(missing)}): "
                       + ", ".join(missing) + ".")
    if extra:
        details.append(f"MTP modules stored quantized but in the {key} list ({len(extra)}): "
                       + ", ".join(extra) + ".")
    return details


def rule_mtp_ignore(incident: Incident, ctx: Context) -> Diagnosis | None:
    category = incident.signature.category
    if category not in MTP_CATEGORIES and category != "mtp_low_acceptance":
        return None
    snap = ctx.snapshot
    mtp = snap.model.mtp if snap.model else None
    if not snap.uses_mtp:
        return None
    release = snapshot_release(snap)
    if mtp is None or mtp.covered_at(release):
        if category == "mtp_low_acceptance" and mtp is not None:
            return None
        return Diagnosis(
            "mtp_draft_mismatch_unproven", "MTP draft load failed; layout not proven",
            incident.signature.id,
            "Speculative decoding with MTP is on and the draft failed to load, but the "
            "snapshot has no MTP module list to compare" + (
                "" if mtp is None else " (the ignore list covers every MTP module)") + ".",
            (incident.signature.explain(incident.captures),), tuple(incident.evidence[-3:]),
            {"speculative_config": snap.launch.get("speculative_config")}, 0.4)
    missing, extra = uncovered_mtp_modules(snap), mtp.ignored_quantized_at(release)
    quant = snap.model.quant if snap.model else None
    details = mtp_module_details(missing, extra)
    if errors := mtp.load_errors_at(release):
        details.append("vLLM refuses the model over these MTP modules, whatever they store "
                       "(an entry naming a Quark MoE layer before 0.26, or entries covering "
                       "only some shards of a fused layer or of expert 0): " + ", ".join(errors)
                       + ".")
    details.append("vLLM builds the MTP draft with the target's quantization (speculative.py "
                   "aligns the draft's quantization with the target's) unless the ignore list "
                   "names a module, so the draft's layers and its stored weights disagree.")
    details.extend(_release_details(mtp, release, snap.vllm_version))
    key = quant.ignore_key if quant and quant.ignore_key else "ignore"
    suggestion = suggest_mtp_entries(snap, key)
    merged = list(snap.model.effective_ignore if snap.model else ()) + list(
        suggestion.entries if suggestion and suggestion.covers else ())
    elsewhere = mtp.suggestion(None, key) if suggestion and not suggestion.covers else None
    remedies = [_ignore_remedy(suggestion, bool(missing), release, snap.vllm_version,
                               elsewhere)]
    remedies.append(Remedy("disable_mtp", "Or serve without --speculative-config until the "
                           "checkpoint is fixed.", True, "the target model is unaffected"))
    title = ("Near-zero acceptance: the MTP draft is built in the wrong precision"
             if category == "mtp_low_acceptance" else
             "MTP draft built with the target's quantization, stored in another")
    return Diagnosis(
        "mtp_ignore_list_gap", title, incident.signature.id,
        f"{len(missing)} BF16 MTP module group(s) are missing from the ignore list"
        + (f" and {len(extra)} quantized ones are ignored" if extra else "") + ".",
        tuple(details), tuple(incident.evidence[-3:]),
        {"speculative_config": snap.launch.get("speculative_config"),
         "ignore": list(quant.ignore if quant else ()), "mtp_layout": mtp.layout,
         "mtp_stored": mtp.to_dict()["stored"], "suggested_ignore": merged},
        0.95 if missing else 0.8, tuple(remedies))


def _release_details(mtp: MtpLayout, release: Release | None,
                     version: str | None) -> list[str]:
    if release is not None:
        return [f"Judged by the ignore-list rules of vLLM {version} (the method's matching "
                "changed between releases)."]
    out = [f"vLLM {version} predates every release that registers this architecture: judged "
           "by the rules of those that do."] if parse_release(version) else []
    split = mtp.differing_releases()
    if not split:
        return out
    return [*out, "The answer depends on the release: " + "; ".join(
        f"{status} on {', '.join(ranges)}" for status, ranges in split.items()) + "."]


def _ignore_remedy(suggestion: IgnoreSuggestion | None, missing: bool,
                   release: Release | None, version: str | None,
                   elsewhere: IgnoreSuggestion | None = None) -> Remedy:
    """The ignore-list fix, offered as applicable only when checked; `elsewhere`: the same
    check on every release that runs the model, to say which releases it works on."""
    if suggestion is None or not missing:
        return Remedy("fix_mtp_ignore_list", "Remove the ignore entries that name quantized "
                      "MTP modules.", bool(not missing), "the mismatch is quantized modules "
                      "being ignored")
    where = f"vLLM {version}" if release is not None else "every release that runs this model"
    add = (f"Add {', '.join(suggestion.entries)} to the {suggestion.key} list, merged with "
           "the existing entries (never replacing them).")
    if suggestion.covers:
        return Remedy("fix_mtp_ignore_list", add, True,
                      f"checked: covers every BF16 MTP module under the method's rules of {where}")
    ranges = (elsewhere or suggestion).releases
    works = f"; it does on {', '.join(ranges)}" if ranges else ""
    return Remedy("fix_mtp_ignore_list", add, False if release is not None else None,
                  f"no ignore entry keeps every BF16 MTP module unquantized on "
                  f"{', '.join(suggestion.failing)}{works}: upgrade vLLM there")


def rule_native_fp4_fallback(incident: Incident, ctx: Context) -> Diagnosis | None:
    if incident.signature.id != "nvfp4.marlin_fallback" or incident.captures.get(
            "dtype") != "FP4":
        return None
    cap = ctx.capability
    if cap is None or cap < NATIVE_FP4_CAPABILITY:
        return None
    snap = ctx.snapshot
    forced = [f"--linear-backend {snap.launch['linear_backend']}"
              for _ in [0] if snap.launch.get("linear_backend") == "marlin"]
    forced += [f"--moe-backend {snap.launch['moe_backend']}"
               for _ in [0] if snap.launch.get("moe_backend") == "marlin"]
    forced += [f"{k}={v}" for k, v in snap.env.items()
               if k in ("VLLM_NVFP4_GEMM_BACKEND", "VLLM_DISABLED_KERNELS")]
    summary = (f"This GPU has native FP4 (compute capability {cap / 10:.1f}) yet vLLM chose "
               "weight-only Marlin: " + ("forced by " + ", ".join(forced) if forced else
                                         "no native kernel was usable (FlashInfer missing, or a "
                                         "build without SM100 kernels)") + ".")
    return Diagnosis(
        "marlin_on_native_fp4", "Marlin fallback on a GPU with native FP4",
        incident.signature.id, summary, (), tuple(incident.evidence[-2:]),
        {"gpu_capability": cap, "forced_by": forced}, 0.9 if forced else 0.7,
        (Remedy("change_backend", "Remove the forcing flag or variable, or install "
                "FlashInfer with SM100 kernels.", True, "native W4A4 is faster and never "
                "repacks through Marlin"),))


def rule_high_acceptance(incident: Incident, ctx: Context) -> Diagnosis | None:
    if incident.signature.id != "spec_decode.acceptance":
        return None
    rates = [parse_number(f.captures.get("rate_percent", "")) for f in
             (incident.first, incident.last)]
    fractions = [parse_number(f.captures.get("rate_fraction", "")) for f in
                 (incident.first, incident.last)]
    high = [r for r in rates if r is not None and r >= HIGH_ACCEPTANCE_PERCENT]
    high += [f * 100 for f in fractions if f is not None and f * 100 >= HIGH_ACCEPTANCE_PERCENT]
    if not high:
        return None
    return Diagnosis(
        "implausible_acceptance", "Implausibly high draft acceptance",
        incident.signature.id,
        f"The draft is accepted {max(high):.1f}% of the time: a broken target that emits "
        "trivially predictable tokens (e.g. repeated padding) looks like this.",
        ("Check the target's output quality directly (a short eval or a known prompt).",),
        tuple(incident.evidence[-2:]), {"acceptance_percent": max(high)}, 0.6)


RULES: tuple[Callable[[Incident, Context], Diagnosis | None], ...] = (
    rule_marlin_tile, rule_mtp_ignore, rule_native_fp4_fallback, rule_high_acceptance)


def config_findings(snapshot: Snapshot) -> list[Diagnosis]:
    """Configuration problems worth reporting whatever the log says."""
    model = snapshot.model
    if model is None or not model.ignore_replaced:
        return []
    return [Diagnosis(
        "ignore_list_replaced", "--hf-overrides replaced the checkpoint's ignore list", None,
        f"The override dropped {len(model.ignore_replaced)} entries the checkpoint had: "
        + ", ".join(model.ignore_replaced) + ".",
        ("Lists in --hf-overrides replace, they do not merge: layers the checkpoint kept "
         "unquantized are now built quantized.",), (),
        {"dropped": list(model.ignore_replaced), "effective_ignore": list(model.effective_ignore)},
        0.9, (Remedy("fix_ignore_list", "Repeat the checkpoint's entries in the override, "
                     "plus the new ones.", True, "keeps both"),))]


def diagnose(incidents: Sequence[Incident],
             snapshot_of: Callable[[Incident], Snapshot]) -> list[Diagnosis]:
    """One diagnosis per incident a rule explains (in incident order, so the root cause
    comes first), each judged against the snapshot in force when it occurred; then
    configuration findings of every snapshot involved. Unexplained incidents keep their
    signature's explanation and get a plain diagnosis only when fatal."""
    out: list[Diagnosis] = []
    seen: dict[str, Snapshot] = {}
    for index, incident in enumerate(incidents):
        snapshot = snapshot_of(incident)
        seen.setdefault(snapshot.content_hash(), snapshot)
        ctx = Context(snapshot, incidents)
        for rule in RULES:
            found = rule(incident, ctx)
            if found is not None:
                out.append(replace(found, incident=index))
                break
        else:
            if incident.signature.fatal and incident.signature.category not in (
                    "engine_core_failed", "worker_failed"):
                out.append(Diagnosis(
                    incident.signature.id, incident.signature.title, incident.signature.id,
                    incident.signature.explain(incident.captures),
                    evidence=tuple(incident.evidence[-2:]), confidence=0.5, incident=index))
    for snapshot in seen.values():
        out.extend(config_findings(snapshot))
    return out
