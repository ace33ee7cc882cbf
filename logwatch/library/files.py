"""Find and read signature directories from disk; the core does the parsing and checking."""

from __future__ import annotations

import gzip
import json
import stat
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from logwatch.core.problems import Problem
from logwatch.core.signatures.library import (
    Library,
    LibraryError,
    Progress,
    load_library,
    no_progress,
)
from logwatch.core.signatures.vocabulary import Vocabulary

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # logwatch/
# The largest shipped file is a few KiB; reading a file is not bounded by any deadline.
MAX_FILE_BYTES = 1 << 20
VOCABULARY_FILE = "vocabulary.json.gz"  # written by `python -m tools.vllm_vocab generate`
Texts = tuple[tuple[str, str], list[list[tuple[str, str]]]]  # header, layers of (label, text)


def default_signature_dir() -> Path:
    """The shipped library: `signatures/` of a source checkout, or the copy in the wheel."""
    for candidate in (PACKAGE_DIR.parent / "signatures", PACKAGE_DIR / "_data" / "signatures"):
        if (candidate / "library.toml").is_file():
            return candidate
    raise FileNotFoundError("the shipped signature library is missing (no library.toml found)")


def _read(path: Path, label: str) -> str:
    if not path.is_file():  # a FIFO would block the read for ever
        raise LibraryError([Problem(label, None, "not a regular file")])
    if path.stat().st_size > MAX_FILE_BYTES:
        raise LibraryError([Problem(label, None, f"larger than {MAX_FILE_BYTES >> 20} MiB; "
                                                 "a signature file is a few KiB")])
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LibraryError([Problem(label, None, f"not UTF-8 text: {exc}")]) from exc


def read_layer(directory: Path) -> list[tuple[str, str]]:
    """Every `<area>/*.toml` signature file under a directory, as (label, text), sorted."""
    if not directory.is_dir():
        raise LibraryError([Problem(str(directory), None, "signature directory not found")])
    files = sorted(p for p in directory.rglob("*.toml") if p.name != "library.toml")
    return [(str(p.relative_to(directory.parent)), _read(p, str(p))) for p in files]


def load_signature_dirs(extra: Sequence[Path] = (), base: Path | None = None,
                        check: bool = True, progress: Progress = no_progress) -> Library:
    """The shipped library (or `base`) with site directories layered on top, in this
    process and without a time bound (library.worker.load_bounded has one)."""
    header, layers = read_library(extra, base)
    return with_vocabulary(load_library(header, layers, check=check, progress=progress))


# The shipped vocabulary, read and indexed once per process (0.2 s) however many libraries
# are loaded (a daemon's reloads, a test session's scans): by path, modification time, size
_SHIPPED: dict[tuple[str, int, int], VocabularyFile] = {}


def shipped_vocabulary() -> Vocabulary | None:
    """vLLM's wordings as shipped beside the signatures (read on first use); None where the
    file is absent."""
    try:
        path = default_signature_dir() / VOCABULARY_FILE
        st = path.stat()
    except OSError:  # no signature directory, or no file in it
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _SHIPPED:
        _SHIPPED.clear()  # a file replaced: the old one's index is not wanted any more
        _SHIPPED[key] = VocabularyFile(path)
    return _SHIPPED[key]


class VocabularyFile(Vocabulary):
    """The vocabulary read from its data file on first use (a worker process reads it
    again rather than receive it)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def _sourced(self) -> bool:
        return True

    def _read(self) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
        with gzip.open(self.path, "rt", encoding="utf-8") as stream:
            data = json.load(stream, object_hook=_shared_values())
        return data["entries"], data.get("files", {})


def _shared_values() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A JSON object hook that makes the wordings' repeated values one object each, as they
    are read: twelve thousand entries name a few areas, kinds, labels, processes and release
    lists (0.8.5 ... 0.33.0); held once, a scan's peak RSS is about 8 MiB lower."""
    seen: dict[Any, Any] = {}

    def shared(value: dict[str, Any]) -> dict[str, Any]:
        for key in ("area", "kind", "label", "process", "file", "function"):
            text = value.get(key)
            if isinstance(text, str):
                value[key] = seen.setdefault(text, text)
        releases = value.get("releases")
        if isinstance(releases, list):
            value["releases"] = seen.setdefault(tuple(releases), releases)
        return value

    return shared


def with_vocabulary(library: Library) -> Library:
    """The library with the shipped vocabulary (the same for any signature directories:
    it is vLLM's, not a site's)."""
    return replace(library, vocabulary=shipped_vocabulary())


def read_library(extra: Sequence[Path] = (), base: Path | None = None) -> Texts:
    """The texts of `library.toml` and of each layer's signature files, nothing parsed."""
    base = base or default_signature_dir()
    header_path = base / "library.toml"
    if not header_path.is_file():
        raise LibraryError([Problem(str(header_path), None, "library.toml not found",
                                    "a signature directory needs a library.toml with the "
                                    "library version and changelog")])
    header = (str(header_path.relative_to(base.parent)), _read(header_path, str(header_path)))
    return header, [read_layer(base)] + [read_layer(d) for d in extra]
