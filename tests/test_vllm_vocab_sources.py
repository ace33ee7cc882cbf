"""The curated vLLM messages (tools/vllm_vocab/curated.toml) against vLLM's own sources: each
wording is printed by every release the entry claims, and by no other release of the curated
matrix at hand.

Needs release trees or sdists under $LOGWATCH_VLLM_SOURCES (see tests/vllm_sources.py); skips
with the reason otherwise. The extraction is cached per release beside the sdists' default place
($XDG_CACHE_HOME/logwatch-tests/vllm-vocab, read before the test session points
$XDG_CACHE_HOME elsewhere): the first run reads every release (minutes), later ones seconds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.vllm_sources import SOURCES, release_trees
from tools.vllm_vocab.curated import load, matrix
from tools.vllm_vocab.verify import verify

CACHE = (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
         / "logwatch-tests" / "vllm-vocab")


@pytest.mark.slow
def test_every_curated_wording_is_in_the_releases_it_claims() -> None:
    entries = load()
    wanted = set(matrix())
    assert wanted, "curated.toml names its release matrix"
    root, available = release_trees(wanted)
    if not available:
        pytest.skip(f"no vLLM sources for the curated releases under {SOURCES} (set "
                    "LOGWATCH_VLLM_SOURCES to trees named <version> or vllm-<version>.tar.gz)")
    assert verify(entries, root, available, cache=CACHE, jobs=os.cpu_count() or 1) == []
