"""Find and read signature directories from disk; the core does the parsing and checking."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from logwatch.core.problems import Problem
from logwatch.core.signatures.library import (
    Library,
    LibraryError,
    Progress,
    load_library,
    no_progress,
)

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # logwatch/
# The largest shipped file is a few KiB; reading a file is not bounded by any deadline.
MAX_FILE_BYTES = 1 << 20
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
    return load_library(header, layers, check=check, progress=progress)


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
