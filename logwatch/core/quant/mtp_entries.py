"""The ignore entries that would keep an MTP draft's BF16 modules unquantized, checked under
the method's rules of the release(s) before they are offered (core.quant.layer_outcome):
`re:^mtp\\.` for compressed-tensors and Quark, `mtp.*` for ModelOpt (which reads no `re:`
entry in any release), a `-:` `dynamic` key for GPTQ, a substring for AWQ."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from logwatch.core.quant.ignore_rules import MODELOPT, UNQUANTIZED, Release, release_ranges
from logwatch.core.quant.layer_outcome import IgnoreRules, outcome


@dataclass(frozen=True, slots=True)
class IgnoreSuggestion:
    key: str  # the config key the entries go to: ignore, exclude, exclude_modules, dynamic...
    entries: tuple[str, ...]  # to add, merged with the existing ones
    covers: bool  # checked: with them, every BF16 MTP module is built unquantized
    releases: tuple[str, ...]  # the releases (ranges) where they do
    failing: tuple[str, ...]  # the releases (ranges) where no suggestion of this form does


def with_entries(rules: IgnoreRules, key: str, entries: tuple[str, ...]) -> IgnoreRules:
    if key == "dynamic":  # a `-:` key first, so no positive key shadows it
        return replace(rules, dynamic={**{e: {} for e in entries}, **dict(rules.dynamic)})
    return replace(rules, entries=rules.entries + entries)


def candidates(method: str | None, prefixes: Sequence[str],
               exact: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Entry sets to try, in the form the method reads, most general first."""
    escaped = tuple("^" + p.replace(".", r"\.") for p in prefixes)
    if method in MODELOPT:
        return [tuple(p + "*" for p in prefixes), tuple(prefixes)]
    if method == "gptq":
        return [tuple("-:" + e for e in escaped)]
    if method == "awq":
        return [tuple(prefixes)]
    return [tuple("re:" + e for e in escaped), exact]


def suggest(rules: IgnoreRules, key: str, prefixes: Sequence[str], bf16: Sequence[str],
            exact: tuple[str, ...], releases: Sequence[Release],
            among: Sequence[Release]) -> IgnoreSuggestion:
    """The first entry set that makes every `bf16` module unquantized on every one of
    `releases`; else the one that does on most, saying where it does not."""
    key = "dynamic" if rules.method == "gptq" else key
    best: IgnoreSuggestion | None = None
    best_count = -1
    for entries in candidates(rules.method, prefixes, exact):
        trial = with_entries(rules, key, entries)
        good = [r for r in releases
                if all(outcome(trial, r, name) == UNQUANTIZED for name in bf16)]
        bad = [r for r in releases if r not in good]
        found = IgnoreSuggestion(key, entries, not bad, tuple(release_ranges(good, among)),
                                 tuple(release_ranges(bad, among)))
        if not bad:
            return found
        if len(good) > best_count:
            best, best_count = found, len(good)
    assert best is not None
    return best
