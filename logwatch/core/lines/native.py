"""The C speedups (core/signatures/_speedups.c: the literal scan's hits, line walks and joiner
searches for core.lines and core.signatures), where the install built them with a C
compiler at hand (hatch_build.py); None where not, and the pure-Python paths give the same
results (tests/test_speedups.py)."""

from __future__ import annotations

import importlib
from typing import Any

speedups: Any
try:
    speedups = importlib.import_module("logwatch.core.signatures._speedups")
except ImportError:  # pragma: no cover - depends on the build
    speedups = None
