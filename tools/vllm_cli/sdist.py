"""Read named files out of a vLLM sdist without unpacking it (the tool and the oracle tests)."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Collection
from pathlib import Path


def read_sdist(sdist: Path, paths: Collection[str]) -> dict[str, str]:
    """The given files, by path relative to the sdist's top directory, of those it has."""
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
