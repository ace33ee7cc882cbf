"""vLLM release trees on disk: where they are, and which files carry messages."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

CPP_SUFFIXES = frozenset({".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp"})
SKIPPED_PARTS = frozenset({"tests", "benchmarks", "test"})


def default_root() -> Path:
    """$LOGWATCH_VLLM_SOURCES, the same place the source tests read."""
    return Path(os.environ.get("LOGWATCH_VLLM_SOURCES")
                or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                / "logwatch-tests" / "vllm-sdist")


def release_key(release: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", release))


def releases(root: Path) -> list[str]:
    """The unpacked release trees under root (directories named like `0.25.1`), oldest first."""
    if not root.is_dir():
        return []
    found = [p.name for p in root.iterdir()
             if p.is_dir() and re.fullmatch(r"\d+\.\d+\.\d+", p.name) and (p / "vllm").is_dir()]
    return sorted(found, key=release_key)


def message_files(tree: Path) -> Iterator[tuple[str, Path]]:
    """(path relative to the tree, file) of every Python file under vllm/ and C++/CUDA file
    under csrc/, tests and benchmarks left out."""
    for top, suffixes in (("vllm", frozenset({".py"})), ("csrc", CPP_SUFFIXES)):
        base = tree / top
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            relative = path.relative_to(tree)
            if (path.suffix in suffixes and path.is_file()
                    and not SKIPPED_PARTS.intersection(relative.parts)):
                yield relative.as_posix(), path
