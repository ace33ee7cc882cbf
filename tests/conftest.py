"""Shared fixtures: the shipped library (loaded once), and paths into the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from logwatch.core.library import Library
from logwatch.signature_files import load_signature_dirs

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples" / "logs"


@pytest.fixture(scope="session")
def library() -> Library:
    return load_signature_dirs()
