"""The flags and VLLM_* variables of each vLLM release (core.snapshot.vllm_cli), read from the data
file shipped in the package."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from logwatch.core.snapshot import vllm_cli
from logwatch.core.snapshot.vllm_cli import DATA_NAME, CliVocabulary, VocabularyError, vocabulary

DATA_FILE = Path(vllm_cli.__file__).resolve().parent / "data" / DATA_NAME


class VocabularyUnreadable(Exception):
    """The data file is missing or damaged; the message names it."""


def load_vocabulary(path: Path = DATA_FILE) -> CliVocabulary:
    try:
        return vocabulary(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, VocabularyError) as exc:
        raise VocabularyUnreadable(f"{path}: {exc}") from exc


@lru_cache(maxsize=1)
def shipped_vocabulary() -> CliVocabulary | None:
    """The shipped data, read once; None when it cannot be read (then nothing is judged by
    it, and preflight says so when asked directly)."""
    try:
        return load_vocabulary()
    except VocabularyUnreadable:
        return None
