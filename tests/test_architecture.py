"""The core stays pure: importing it loads no shell library and touches no I/O module."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

SHELL_LIBRARIES = ("duckdb", "textual", "watchdog", "structlog", "logwatch.scan.offline",
                   "logwatch.cli.main", "logwatch.library.files")


def test_core_imports_no_shell_library() -> None:
    code = (
        "import sys, pkgutil, importlib, logwatch.core as core\n"
        "for m in pkgutil.iter_modules(core.__path__):\n"
        "    importlib.import_module('logwatch.core.' + m.name)\n"
        f"bad = [m for m in {SHELL_LIBRARIES!r} if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, check=True)
    assert result.stdout.strip() == ""
