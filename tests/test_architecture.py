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
        "for m in pkgutil.walk_packages(core.__path__, 'logwatch.core.'):\n"
        "    importlib.import_module(m.name)\n"
        f"bad = [m for m in {SHELL_LIBRARIES!r} if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, check=True)
    assert result.stdout.strip() == ""


# What core modules may import: the standard library's pure parts and `regex`. Files,
# processes, sockets, threads, clocks and every shell package are out. The one exception is
# the matcher's CPU-time meter (time.thread_time), which bounds a pattern's cost; it reads no
# wall clock and does no I/O; and redaction's thread-local Hyperscan scratch space (a scan
# space per calling thread; it starts no thread).
CORE_FORBIDDEN = frozenset({
    "os", "sys", "io", "pathlib", "shutil", "subprocess", "socket", "asyncio", "threading",
    "multiprocessing", "concurrent", "signal", "select", "selectors", "tempfile", "glob",
    "sqlite3", "urllib", "http", "time", "duckdb", "textual", "watchdog", "structlog",
})
CORE_EXCEPTIONS = {"matcher.py": frozenset({"time"}), "redact.py": frozenset({"threading"})}
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


# The core's domain packages and the ones each may lean on: below, never above or beside
# unless listed. The leaf modules directly in core/ (numbers, problems, write_health) lean on
# no package.
CORE_PACKAGES: dict[str, frozenset[str]] = {
    "safe_text": frozenset(),
    "lines": frozenset({"safe_text"}),
    "signatures": frozenset({"lines", "safe_text"}),
    "launches": frozenset({"signatures", "lines", "safe_text"}),
    "quant": frozenset(),
    "snapshot": frozenset({"quant", "safe_text"}),
    "checkpoint": frozenset({"quant"}),
    "diagnosis": frozenset({"launches", "signatures", "lines", "snapshot", "quant", "safe_text",
                            "checkpoint"}),
    "settings": frozenset(),
    "remedy": frozenset({"diagnosis", "checkpoint", "launches", "signatures", "lines",
                         "snapshot", "quant", "settings", "safe_text"}),
    "report": frozenset({"diagnosis", "launches", "signatures", "lines", "snapshot", "quant",
                         "safe_text"}),
}
CORE_LEAVES = frozenset({"numbers", "problems", "write_health"})
MAX_CORE_MODULES = 12
MAX_MODULE_LINES = 600


def _core_part(module: str) -> str:
    """`logwatch.core.lines.records` -> `lines`; a leaf module -> its own name."""
    return module.split(".")[2]


def test_core_is_a_few_domain_packages() -> None:
    core = ROOT / "logwatch" / "core"
    packages = {p.name for p in core.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.stem for p in core.glob("*.py")} - {"__init__"}
    assert packages == set(CORE_PACKAGES), "a core package not in CORE_PACKAGES, or gone"
    assert modules <= CORE_LEAVES
    assert len(list(core.glob("*.py"))) <= MAX_CORE_MODULES
    for package in packages:
        doc = ast.get_docstring(ast.parse((core / package / "__init__.py").read_text()))
        assert doc and len(doc) > 80, f"core/{package}/__init__.py lacks its paragraph"


def test_core_packages_lean_only_on_those_listed() -> None:
    core = ROOT / "logwatch" / "core"
    offences = []
    for path in sorted(core.rglob("*.py")):
        relative = path.relative_to(core)
        own = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        allowed = CORE_PACKAGES.get(own, frozenset()) | CORE_LEAVES | {own}
        for name in _imports(path):
            if name.startswith("logwatch.core.") and _core_part(name) not in allowed:
                offences.append(f"core/{relative} imports {name}")
    assert offences == []


def test_no_module_is_a_giant() -> None:
    giants = [f"{p.relative_to(ROOT)}: {n} lines"
              for p in sorted((ROOT / "logwatch").rglob("*.py"))
              if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES]
    assert giants == []


def test_every_top_level_entry_is_one_role_drawn_in_the_architecture() -> None:
    entries = {p.name for p in (ROOT / "logwatch").iterdir()
               if p.name != "__pycache__" and not p.name.endswith(".egg-info")}
    assert entries <= ROLES, f"not a role: {sorted(entries - ROLES)}"
    drawing = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for role in ROLES - {"__init__.py", "__main__.py", "py.typed"}:
        assert f"{role.removesuffix('.py')}" in drawing, f"docs/architecture.md lacks {role}"


def _module_graph() -> dict[str, set[str]]:
    """Every logwatch module and the logwatch modules it imports, wherever the import stands
    (in a function, under TYPE_CHECKING: each is a dependency a reader has to follow)."""
    package = ROOT / "logwatch"
    modules: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        found: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else resolve(node.module))
            elif isinstance(node, ast.Import):
                found.update(resolve(alias.name) for alias in node.names)
        graph[module] = {m for m in found if m and m != module
                         and not module.startswith(m + ".")}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    circles.append(sorted(group))
    return circles


def test_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle() -> None:
    assert _circles(_module_graph()) == []
