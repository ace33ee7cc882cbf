"""Remember which signature libraries passed the bounded check, by a hash of their content.

Checking in a child process costs a fork and compiling every pattern twice; a library whose
exact texts passed before, checked by this same code, loads in the calling process instead.
The hash covers every file's name and text, the versions of logwatch, `regex` and Python,
and the size and modification time of the checking code, so any change is checked afresh.
The cache is a file of hashes in the user's cache directory; where it cannot be read or
written every load is checked (slower, never less safe).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from pathlib import Path

import regex

from logwatch import __version__
from logwatch.library.files import PACKAGE_DIR, Texts

KEPT = 64  # hashes remembered: a few libraries, each in a few versions
FILENAME = "vetted-libraries"


def default_cache_dir() -> Path:
    """$CACHE_DIRECTORY under systemd (CacheDirectory=logwatch), else XDG cache home."""
    if os.environ.get("CACHE_DIRECTORY"):
        return Path(os.environ["CACHE_DIRECTORY"].split(":")[0])
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "logwatch"


def library_digest(texts: Texts) -> str:
    """A hash of the library's texts and of the code that checks them."""
    digest = hashlib.sha256()

    def add(part: str) -> None:
        data = part.encode("utf-8", errors="surrogatepass")
        digest.update(len(data).to_bytes(8, "little") + data)

    for part in (__version__, regex.__version__, sys.version):
        add(part)
    for code in sorted([*PACKAGE_DIR.glob("core/*.py"), PACKAGE_DIR / "library" / "files.py"]):
        stat = code.stat()
        add(f"{code.name} {stat.st_size} {stat.st_mtime_ns}")
    header, layers = texts
    for label, text in [header, *(item for layer in layers for item in layer)]:
        add(label)
        add(text)
    add(str(len(layers)))
    return digest.hexdigest()


class VettedCache:
    def __init__(self, directory: Path | None = None) -> None:
        self.path = (directory or default_cache_dir()) / FILENAME

    def _read(self) -> list[str]:
        try:
            return self.path.read_text().split()
        except (OSError, UnicodeDecodeError):  # none yet, or unreadable: check every time
            return []

    def holds(self, digest: str) -> bool:
        return digest in self._read()

    def add(self, digest: str) -> None:
        """Remember a hash (the newest KEPT); a cache that cannot be written is skipped."""
        kept = [*[d for d in self._read() if d != digest][-(KEPT - 1):], digest]
        temporary = self.path.with_name(f"{FILENAME}.{os.getpid()}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text("\n".join(kept) + "\n")
            temporary.replace(self.path)
        except OSError:  # read-only home under systemd without CacheDirectory=: no cache
            with contextlib.suppress(OSError):  # not even a temporary file could be made
                temporary.unlink(missing_ok=True)
