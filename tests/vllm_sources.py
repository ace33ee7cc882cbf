"""Where tests find vLLM's sources, and how they read them: unpacked trees named `<version>`
or sdists `vllm-<version>.tar.gz` under $LOGWATCH_VLLM_SOURCES, else
$XDG_CACHE_HOME/logwatch-tests/vllm-sdist. Tests that need them skip with a reason without."""

from __future__ import annotations

import io
import os
import re
import tarfile
from pathlib import Path

# Read when a test module is collected: the session fixtures in conftest.py later point
# XDG_CACHE_HOME at a temporary directory.
SOURCES = Path(
    os.environ.get("LOGWATCH_VLLM_SOURCES")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "logwatch-tests" / "vllm-sdist"
)


def release_trees() -> list[str]:
    """The releases unpacked under SOURCES (directories named like `0.25.1`)."""
    if not SOURCES.is_dir():
        return []
    return sorted((p.name for p in SOURCES.iterdir()
                   if p.is_dir() and re.fullmatch(r"\d+\.\d+\.\d+", p.name)),
                  key=lambda r: tuple(int(x) for x in r.split(".")))


def read_sources(release: str, paths: set[str]) -> dict[str, str] | None:
    """The given files of one release from SOURCES (an unpacked tree or an sdist), or None
    when that release is not there."""
    for name in (release, f"vllm-{release}"):
        tree = SOURCES / name
        if tree.is_dir():
            return {p: (tree / p).read_text(encoding="utf-8", errors="replace")
                    for p in paths if (tree / p).is_file()}
    sdist = SOURCES / f"vllm-{release}.tar.gz"
    if not sdist.is_file():
        return None
    found: dict[str, str] = {}
    with tarfile.open(sdist) as archive:
        for member in archive:
            relative = member.name.split("/", 1)[-1]
            if relative in paths and member.isfile():
                data = archive.extractfile(member)
                assert data is not None
                found[relative] = io.TextIOWrapper(data, encoding="utf-8",
                                                   errors="replace").read()
    return found
