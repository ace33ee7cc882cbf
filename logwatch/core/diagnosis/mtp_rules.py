"""The MTP draft diagnosis: the BF16 MTP modules the ignore list misses (or the quantized ones
it names) under the method's rules of the release that ran, and the ignore-list remedy, offered
only once its entries are checked under those rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from logwatch.core.diagnosis.model import Context, Diagnosis, Remedy
from logwatch.core.diagnosis.mtp_coverage import (
    snapshot_release,
    suggest_mtp_entries,
    uncovered_mtp_modules,
)
from logwatch.core.launches.incidents import Incident
from logwatch.core.quant.ignore_rules import Release, parse_release
from logwatch.core.quant.mtp_entries import IgnoreSuggestion
from logwatch.core.quant.mtp_layout import MtpLayout

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
