"""The core stays pure: importing it loads no shell library and touches no I/O module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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


# What core modules may import: the standard library's pure parts and `regex`. Files,
# processes, sockets, threads, clocks and every shell package are out. The one exception is
# the matcher's CPU-time meter (time.thread_time), which bounds a pattern's cost; it reads no
# wall clock and does no I/O.
CORE_FORBIDDEN = frozenset({
    "os", "sys", "io", "pathlib", "shutil", "subprocess", "socket", "asyncio", "threading",
    "multiprocessing", "concurrent", "signal", "select", "selectors", "tempfile", "glob",
    "sqlite3", "urllib", "http", "time", "duckdb", "textual", "watchdog", "structlog",
})
CORE_EXCEPTIONS = {"matcher.py": frozenset({"time"})}
ROLES = {"core", "sources", "host", "store", "daemon", "library", "scan", "cli", "relaunch",
         "demo", "tui",
         "own_log.py", "paths.py", "__init__.py", "__main__.py", "py.typed"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_every_core_module_imports_only_pure_things() -> None:
    core = ROOT / "logwatch" / "core"
    offences = []
    for path in sorted(core.rglob("*.py")):
        allowed = CORE_EXCEPTIONS.get(path.name, frozenset())
        for name in _imports(path):
            top = name.split(".")[0]
            shell = name.startswith("logwatch.") and not name.startswith("logwatch.core")
            if shell or (top in CORE_FORBIDDEN and top not in allowed):
                offences.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offences == []


def test_every_top_level_entry_is_one_role_drawn_in_the_architecture() -> None:
    entries = {p.name for p in (ROOT / "logwatch").iterdir()
               if p.name != "__pycache__" and not p.name.endswith(".egg-info")}
    assert entries <= ROLES, f"not a role: {sorted(entries - ROLES)}"
    drawing = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for role in ROLES - {"__init__.py", "__main__.py", "py.typed"}:
        assert f"{role.removesuffix('.py')}" in drawing, f"docs/architecture.md lacks {role}"
