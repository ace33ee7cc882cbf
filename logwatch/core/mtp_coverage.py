"""Whether a snapshot's ignore list covers its MTP draft under the vLLM release that runs it,
and the entries that would, checked under that method's rules for that release before they
are offered (core.layer_outcome): `re:^mtp\\.` for compressed-tensors and Quark, `mtp.*` for
ModelOpt (which reads no `re:` entry), a `-:` `dynamic` key for GPTQ, a substring for AWQ."""

from __future__ import annotations

from dataclasses import dataclass, replace

from logwatch.core.ignore_rules import MODELOPT, Release, parse_release, release_ranges
from logwatch.core.layer_outcome import IgnoreRules
from logwatch.core.mtp import MtpLayout
from logwatch.core.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class IgnoreSuggestion:
    key: str  # the config key the entries go to: ignore, exclude, exclude_modules, dynamic...
    entries: tuple[str, ...]  # to add, merged with the existing ones
    covers: bool  # checked: with them, every MTP module is built as stored
    releases: tuple[str, ...]  # the releases (ranges) where they do
    failing: tuple[str, ...]  # the releases (ranges) where no suggestion of this form does


def snapshot_release(snapshot: Snapshot, release: str | None = None) -> Release | None:
    """The release whose rules apply: `release`, else the snapshot's vLLM version; None when
    unknown, or older than every release that registers the model's architecture (a build
    that runs it is not that release's code, so its rules say nothing)."""
    version = release if release is not None else snapshot.vllm_version
    mtp = snapshot.model.mtp if snapshot.model else None
    return mtp.release_for(version) if mtp is not None else parse_release(version)


def uncovered_mtp_modules(snapshot: Snapshot, release: str | None = None) -> tuple[str, ...]:
    """BF16-stored MTP modules (experts collapsed, sorted) that vLLM builds quantized, or
    fails to load, under the method's rules of `release` (default: the snapshot's vLLM
    version); with no release known, those it does so on at least one release that runs the
    model. () without a model or an MTP layout."""
    mtp = snapshot.model.mtp if snapshot.model else None
    if mtp is None:
        return ()
    return mtp.uncovered_at(snapshot_release(snapshot, release))


def _with(rules: IgnoreRules, key: str, entries: tuple[str, ...]) -> IgnoreRules:
    if key == "dynamic":  # a `-:` key first, so no positive key shadows it
        return replace(rules, dynamic={**{e: {} for e in entries}, **dict(rules.dynamic)})
    return replace(rules, entries=rules.entries + entries)


def _candidates(mtp: MtpLayout, missing: tuple[str, ...]) -> list[tuple[str, ...]]:
    method = mtp.rules.method
    if mtp.layout == "mtp_prefix":
        prefixes = ["mtp."]
    else:
        assert mtp.first_layer is not None
        prefixes = [f"model.layers.{n}." for n in
                    range(mtp.first_layer, mtp.first_layer + max(mtp.layers, 1))]
    escaped = tuple("^" + p.replace(".", r"\.") for p in prefixes)
    if method in MODELOPT:
        return [tuple(p + "*" for p in prefixes), tuple(prefixes)]
    if method == "gptq":
        return [tuple("-:" + e for e in escaped)]
    if method == "awq":
        return [tuple(prefixes)]
    exact = tuple(n for m in mtp.modules if m.stored == "bf16" for n in [m.name]
                  if any(n == x or ("*" in x and n.split(".experts.")[0] == x.split(
                      ".experts.")[0]) for x in missing))
    return [tuple("re:" + e for e in escaped), exact]


def suggest_mtp_entries(snapshot: Snapshot, key: str,
                        release: str | None = None) -> IgnoreSuggestion | None:
    """Entries that make the ignore list cover the MTP draft, verified under the method's
    rules for the release (every candidate release when it is unknown); None when nothing
    is uncovered."""
    mtp = snapshot.model.mtp if snapshot.model else None
    at = snapshot_release(snapshot, release)
    if mtp is None or not mtp.uncovered_at(at):
        return None
    releases = (at,) if at is not None else mtp.releases
    key = "dynamic" if mtp.rules.method == "gptq" else key
    best: IgnoreSuggestion | None = None
    best_count = -1
    for entries in _candidates(mtp, mtp.uncovered_at(at)):
        trial = replace(mtp, rules=_with(mtp.rules, key, entries))
        good = [r for r in releases if not any(m.mismatched_at(r, trial.rules)
                                               for m in mtp.modules if m.stored == "bf16")]
        bad = [r for r in releases if r not in good]
        found = IgnoreSuggestion(key, entries, not bad,
                                 tuple(release_ranges(good, mtp.releases)),
                                 tuple(release_ranges(bad, mtp.releases)))
        if not bad:
            return found
        if len(good) > best_count:
            best, best_count = found, len(good)
    return best
