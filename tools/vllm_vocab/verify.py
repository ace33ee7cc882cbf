"""The curated set against vLLM's sources: each wording is in every release it claims, and in
no other release at hand."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tools.vllm_vocab.curated import Curated
from tools.vllm_vocab.vocabulary import release_messages, vocabulary, wording_key


def verify(entries: Sequence[Curated], root: Path, available: Sequence[str],
           cache: Path | None = None, jobs: int = 1) -> list[str]:
    """Problems, one line each: a claimed release that lacks the wording, or a release at hand
    that has it but is not claimed."""
    wanted = {wording_key(e.kind, e.label, e.template) for e in entries}
    found: dict[tuple[str, str, str], set[str]] = {key: set() for key in wanted}
    # read (and cache) every release first, several at once when asked
    vocabulary(root, available, jobs=jobs, cache=cache)
    for release in available:
        for message in release_messages(root / release, cache):
            key = wording_key(message.kind, message.label, message.template)
            if key in found:
                found[key].add(release)
    problems = []
    for entry in entries:
        has = found[wording_key(entry.kind, entry.label, entry.template)]
        claimed = set(entry.releases) & set(available)
        for release in sorted(claimed - has):
            problems.append(f"{entry.id}: not in {release}")
        for release in sorted(has - set(entry.releases)):
            problems.append(f"{entry.id}: also in {release}, not claimed")
    return problems
