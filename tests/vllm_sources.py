"""Where tests find vLLM's sources, and how they read them: unpacked trees named `<version>`
or sdists `vllm-<version>.tar.gz` under $LOGWATCH_VLLM_SOURCES, else
$XDG_CACHE_HOME/logwatch-tests/vllm-sdist. Tests that need them skip with a reason without."""

from __future__ import annotations

import os
import re
import tarfile
from pathlib import Path

from tools.vllm_cli.sdist import read_sdist

# Read when a test module is collected: the session fixtures in conftest.py later point
# XDG_CACHE_HOME at a temporary directory.
SOURCES = Path(
    os.environ.get("LOGWATCH_VLLM_SOURCES")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "logwatch-tests" / "vllm-sdist"
)


UNPACKED = (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
            / "logwatch-tests" / "vllm-src")
_RELEASE = re.compile(r"(?:vllm-)?(\d+\.\d+\.\d+)(?:\.tar\.gz)?")


def _key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in release.split("."))


def release_trees(wanted: set[str] | None = None) -> tuple[Path, list[str]]:
    """A directory of unpacked release trees named `<version>` and the releases in it: SOURCES
    itself when it holds trees, else its sdists unpacked once (vllm/ and csrc/ only) under
    UNPACKED. `wanted` limits the releases unpacked."""
    if not SOURCES.is_dir():
        return SOURCES, []
    trees = [p.name for p in SOURCES.iterdir()
             if p.is_dir() and re.fullmatch(r"\d+\.\d+\.\d+", p.name)]
    if trees:
        return SOURCES, sorted((t for t in trees if wanted is None or t in wanted), key=_key)
    found = []
    for sdist in SOURCES.glob("vllm-*.tar.gz"):
        match = _RELEASE.fullmatch(sdist.name)
        if match is None or (wanted is not None and match.group(1) not in wanted):
            continue
        release = match.group(1)
        target = UNPACKED / release
        if not (target / "vllm").is_dir():
            _unpack(sdist, target)
        found.append(release)
    return UNPACKED, sorted(found, key=_key)


def _unpack(sdist: Path, target: Path) -> None:
    partial = target.with_name(target.name + ".partial")
    with tarfile.open(sdist) as archive:
        for member in archive:
            relative = member.name.split("/", 1)[-1]
            if member.isfile() and relative.startswith(("vllm/", "csrc/")) \
                    and ".." not in Path(relative).parts:
                data = archive.extractfile(member)
                assert data is not None
                path = partial / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data.read())
    partial.rename(target)


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
    return read_sdist(sdist, paths)
