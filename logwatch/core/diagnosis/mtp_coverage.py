"""Whether a snapshot's ignore list covers its MTP draft under the vLLM release that runs it
(the snapshot's, or the one asked about), and the entries that would (core.quant.mtp_entries)."""

from __future__ import annotations

from logwatch.core.quant.ignore_rules import Release, parse_release
from logwatch.core.quant.mtp_entries import IgnoreSuggestion
from logwatch.core.snapshot.model import Snapshot


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


def suggest_mtp_entries(snapshot: Snapshot, key: str,
                        release: str | None = None) -> IgnoreSuggestion | None:
    """Entries that make the ignore list cover the MTP draft, verified under the method's
    rules for the release (every candidate release when it is unknown); None when nothing
    is uncovered."""
    mtp = snapshot.model.mtp if snapshot.model else None
    if mtp is None:
        return None
    return mtp.suggestion(snapshot_release(snapshot, release), key)
