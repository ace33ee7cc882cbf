"""Latent problems: what a launch's snapshot shows will go wrong that its log has not reached
yet (BF16 MTP modules the ignore list misses, layers Marlin cannot tile at this
tensor-parallel size, an FP4 checkpoint on a GPU without native FP4), and the root cause's
diagnosis told of the failures still ahead, so that one fix is not followed by the next crash.

A latent problem is a `Diagnosis` with `latent=True` and no incident; it is dropped once the
log shows it (a finding of its kind, or a diagnosis of the same cause).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from logwatch.core.diagnosis.marlin_rules import w4a4_remedy
from logwatch.core.diagnosis.model import Context, Diagnosis, Remedy
from logwatch.core.diagnosis.mtp_coverage import (
    snapshot_release,
    suggest_mtp_entries,
    uncovered_mtp_modules,
)
from logwatch.core.diagnosis.mtp_rules import mtp_module_details
from logwatch.core.launches.incidents import Incident
from logwatch.core.quant.marlin_split import REPACK_SCHEMES, aligned_sizes, untileable
from logwatch.core.quant.scheme import NATIVE_FP4_CAPABILITY
from logwatch.core.snapshot.model import Snapshot

LATENT_MTP = "latent_mtp_ignore_list_gap"
LATENT_MARLIN = "latent_marlin_tile"
LATENT_FP4 = "latent_fp4_without_native_kernels"
# What in a launch's log shows each problem reached: incident categories, signature id
# prefixes, causes of diagnoses.
REACHED_BY: dict[str, tuple[frozenset[str], tuple[str, ...], frozenset[str]]] = {
    LATENT_MTP: (frozenset({"tensor_size_mismatch", "weight_shape_mismatch", "mtp_draft_load",
                            "mtp_low_acceptance"}), ("mtp.",),
                 frozenset({"mtp_ignore_list_gap", "mtp_draft_mismatch_unproven"})),
    LATENT_MARLIN: (frozenset({"marlin_tile", "marlin_shape", "marlin_padding"}), ("marlin.",),
                    frozenset({"marlin_weight_only_tile"})),
    LATENT_FP4: (frozenset({"nvfp4_marlin_fallback", "marlin_tile", "marlin_shape",
                            "marlin_padding"}), ("marlin.",),
                 frozenset({"marlin_weight_only_tile", "marlin_on_native_fp4",
                            "fp4_on_marlin"})),
}
FAILURES_AHEAD = (LATENT_MTP, LATENT_MARLIN)  # the ones a root cause's remedy must include
ACTIVATION_FP4 = ("W4A4_NVFP4", "MXFP4")


def mtp_gap(snapshot: Snapshot) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(BF16 MTP modules vLLM builds quantized, quantized ones it builds unquantized, ignore
    entries checked to cover them), under the snapshot's release's rules."""
    mtp = snapshot.model.mtp if snapshot.model else None
    if mtp is None:
        return (), (), ()
    key = snapshot.model.quant.ignore_key if snapshot.model else None
    suggestion = suggest_mtp_entries(snapshot, key or "ignore")
    entries = suggestion.entries if suggestion is not None and suggestion.covers else ()
    return (uncovered_mtp_modules(snapshot),
            mtp.ignored_quantized_at(snapshot_release(snapshot)), entries)


def latent_problems(snapshot: Snapshot, incidents: Sequence[Incident] = (),
                    diagnoses: Sequence[Diagnosis] = ()) -> list[Diagnosis]:
    """The snapshot's problems the log (its incidents and their diagnoses) has not shown."""
    found = [p for p in (_mtp(snapshot), _marlin(snapshot), _fp4(snapshot)) if p is not None]
    return [p for p in found if not _reached(p.cause, incidents, diagnoses)]


def _reached(cause: str, incidents: Sequence[Incident], diagnoses: Sequence[Diagnosis]) -> bool:
    categories, prefixes, causes = REACHED_BY[cause]
    return any(i.signature.category in categories or i.signature.id.startswith(prefixes)
               for i in incidents) or any(d.cause in causes for d in diagnoses)


def _mtp(snapshot: Snapshot) -> Diagnosis | None:
    missing, extra, entries = mtp_gap(snapshot)
    if not (missing or extra) or (snapshot.launch and not snapshot.uses_mtp):
        return None  # a launch without MTP never builds the draft
    model = snapshot.model
    assert model is not None
    in_use = snapshot.uses_mtp
    key = model.quant.ignore_key or "ignore"
    when = "" if in_use else " If this checkpoint is served with MTP speculative decoding,"
    details = mtp_module_details(missing, extra, key)
    details.append("vLLM builds the MTP draft with the target's quantization unless the "
                   "ignore list names a module: the draft's layers and its stored weights "
                   "disagree (a load error, or a draft that is never accepted).")
    remedies = []
    if missing and entries:
        remedies.append(Remedy(
            "fix_mtp_ignore_list", "Add " + ", ".join(entries) + f" to the {key} list, "
            "merged with the existing entries (never replacing them).", True,
            "covers every BF16 MTP module"))
    if extra:
        remedies.append(Remedy("fix_mtp_ignore_list", f"Remove the {key} entries that name "
                               "quantized MTP modules.", True, "they are stored quantized"))
    return Diagnosis(
        LATENT_MTP, "MTP draft modules the ignore list does not cover", None,
        (when + f" {len(missing)} BF16 MTP module group(s) are not in the {key} list"
         + (f" and {len(extra)} quantized ones are" if extra else "")
         + ": the draft will be built in the wrong precision.").strip(),
        tuple(details), (),
        {"mtp_in_use": in_use if snapshot.launch else None, "uncovered_bf16": list(missing),
         "ignored_quantized": list(extra),
         "suggested_ignore": list(model.effective_ignore) + list(entries)},
        0.9 if in_use else 0.6, tuple(remedies), latent=True)


def _marlin(snapshot: Snapshot) -> Diagnosis | None:
    model = snapshot.model
    if model is None or not model.quant.quantized:
        return None
    quant, cap, tp = model.quant, snapshot.gpu.capability, snapshot.tensor_parallel_size
    path = quant.marlin_path(cap)
    if path is False or quant.scheme == "unknown" or (quant.method == "quark" and quant.fp4):
        return None  # Quark's OCP MX layers are emulated without native MX, not Marlin
    bad = untileable(model.dims, tp, quant.scheme, quant.group_size, snapshot.vllm_version)
    if not bad:
        return None
    repack = quant.scheme in REPACK_SCHEMES
    outcome = ("the weight repack fails at start-up" if repack else
               "vLLM falls back to a slower kernel, or fails with \"Failed to find a kernel\"")
    when = "" if path else " If this GPU has no native kernel for the scheme (below 10.0 for " \
                           "FP4, 8.9 for FP8),"
    details = [f"{b.layer.name}: {b.why} at tensor-parallel size {tp}." for b in bad]
    details.append("Do not edit the model definition to force alignment: the quantized "
                   "weights are packed for the original layout.")
    sizes = aligned_sizes(model.dims, quant.scheme, quant.group_size, snapshot.vllm_version)
    usable = [n for n in sizes if not snapshot.gpu.count or n <= snapshot.gpu.count]
    remedies = [w4a4_remedy(Context(snapshot, ()), quant.scheme)] if quant.fp4 else []
    remedies.append(Remedy(
        "align_tensor_parallel",
        f"Use --tensor-parallel-size {' or '.join(map(str, usable or sizes))}."
        if sizes else "Choose a tensor-parallel size that aligns these layers.",
        bool(usable) if sizes and snapshot.gpu.count else None if sizes else False,
        "every layer checked tiles at that size" if sizes else "no size in 1-16 aligns them"))
    return Diagnosis(
        LATENT_MARLIN, "Marlin cannot tile this layer split", None,
        (when + f" {quant.scheme} runs through weight-only Marlin and {len(bad)} layer "
         f"kind(s) do not split into Marlin tiles at tensor-parallel size {tp}: "
         + outcome + ".").strip(),
        tuple(details), (),
        {"tensor_parallel_size": tp, "scheme": quant.scheme, "gpu_capability": cap,
         "marlin_path": path, "layers": [b.layer.name for b in bad],
         "aligned_tensor_parallel": sizes},
        (0.9 if repack else 0.5) if path else 0.5, tuple(remedies), latent=True)


def _fp4(snapshot: Snapshot) -> Diagnosis | None:
    model, cap = snapshot.model, snapshot.gpu.capability
    if model is None or model.quant.scheme not in ACTIVATION_FP4 or cap is None \
            or cap >= NATIVE_FP4_CAPABILITY or model.quant.method == "quark":
        return None  # Quark's OCP MX layers: emulated on every NVIDIA GPU (supports_mx)
    scheme = model.quant.scheme
    return Diagnosis(
        LATENT_FP4, "FP4 checkpoint on a GPU without native FP4", None,
        f"This GPU is compute capability {cap / 10:.1f}; the {scheme} fast path "
        "(CUTLASS/FlashInfer) needs 10.0 or newer. vLLM serves the weights through "
        "weight-only Marlin instead: activations are not quantized, compute-heavy loads are "
        "slower, and Marlin's tile limits apply.", (), (),
        {"scheme": scheme, "gpu_capability": cap,
         "native_capability": NATIVE_FP4_CAPABILITY}, 0.8,
        (Remedy("switch_to_w4a4", f"Serve the {scheme} checkpoint on a GPU of compute "
                "capability 10.0 or newer (B200/B300, RTX 50/PRO 6000).", None,
                "another machine"),), latent=True)


def with_failures_ahead(diagnoses: list[Diagnosis], latent: Sequence[Diagnosis],
                        root: int | None) -> list[Diagnosis]:
    """The root cause's diagnosis, told of the failures the snapshot shows are next: named in
    its summary and details, their remedies added to its own."""
    ahead = [p for p in latent if p.cause in FAILURES_AHEAD]
    if root is None or not ahead:
        return diagnoses
    out = []
    for diag in diagnoses:
        if diag.incident != root or diag.latent:
            out.append(diag)
            continue
        details = [f"Next failure after this one: {p.summary} {p.details[0]}" for p in ahead]
        remedies = [replace(r, summary="Also: " + r.summary,
                            why=r.why + "; needed whichever fix above is chosen")
                    for p in ahead for r in p.remedies]
        out.append(replace(
            diag, summary=diag.summary + " Also ahead: " + "; ".join(map(_ahead, ahead))
            + " (fix together).",
            details=diag.details + tuple(details), remedies=diag.remedies + tuple(remedies),
            config={**diag.config, "latent": [p.cause for p in ahead]}))
    return out


def _ahead(problem: Diagnosis) -> str:
    """A failure still ahead, in a few words."""
    if problem.cause == LATENT_MTP and problem.config["uncovered_bf16"]:
        return (f"{len(problem.config['uncovered_bf16'])} BF16 MTP module group(s) missing "
                "from the ignore list")
    if problem.cause == LATENT_MTP:
        return (f"{len(problem.config['ignored_quantized'])} quantized MTP module group(s) "
                "on the ignore list")
    return f"{len(problem.config['layers'])} layer kind(s) Marlin cannot tile"
