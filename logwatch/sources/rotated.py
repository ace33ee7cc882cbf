"""A followed file's rotated generations: found by name beside it, ordered oldest first,
opened (decompressed where logrotate compressed them), recognised by their first bytes, and
read from where the checkpoint left off through every newer one.

Names logrotate gives: `vllm.log.1`, `vllm.log.2.gz` (numbered: a higher number is older,
each rotation shifts them up), or with `dateext` `vllm.log-20261130`, `vllm.log-20261130-
1764460800`, `vllm.log.2026-11-30` (dated: a later date is newer). The modification time is
no guide across names: with `delaycompress`, `.2.gz` is written (compressed) after `.1` was
last written to. It only breaks ties. A directory holding both kinds (the configuration
changed) is ordered numbered first: one scheme replaced the other, and logrotate removes the
old names only as they age out, so there is no reliable order between them; this one is at
least stable across restarts.
"""

from __future__ import annotations

import asyncio
import bz2
import gzip
import hashlib
import io
import lzma
import os
import re
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from logwatch.sources.reading import READ_BYTES, LineSplitter, NotRegular, Piece, open_regular

FINGERPRINT_BYTES = 1024


class Readable(Protocol):
    """A file's content: a plain file or a decompressing reader."""

    def read(self, size: int = -1, /) -> bytes: ...
    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def tell(self) -> int: ...
    def close(self) -> None: ...


DECOMPRESS: dict[str, Callable[[IO[bytes]], Readable]] = {
    ".gz": lambda fh: gzip.GzipFile(fileobj=fh, mode="rb"),
    ".bz2": lambda fh: bz2.BZ2File(fh, "rb"),
    ".xz": lambda fh: lzma.LZMAFile(fh, "rb"),  # noqa: SIM115 - closed by OpenRotated
}
UNREADABLE = (".zst", ".lz4", ".Z", ".lzo")  # compressors this Python cannot read
# errors of a truncated or corrupt compressed file (one being written, say)
DECODE_ERRORS: tuple[type[BaseException], ...] = (EOFError, OSError, zlib.error,
                                                  lzma.LZMAError, ValueError)
_NUMBERED = re.compile(r"\.(\d+)")
_DATED = re.compile(r"[-._](\d{4})-?(\d{2})-?(\d{2})((?:[-_.T:]?\d+)*)")


def head_fingerprint(head: bytes) -> str:
    return hashlib.sha256(head).hexdigest()[:20] + f"/{len(head)}"


def read_head(fh: Readable, length: int = FINGERPRINT_BYTES) -> bytes:
    """The first `length` bytes, leaving the position where it was."""
    here = fh.tell()
    fh.seek(0)
    head = b""
    while len(head) < length:  # a decompressing reader may return less than asked
        more = fh.read(length - len(head))
        if not more:
            break
        head += more
    fh.seek(here)
    return head


def fingerprint(fh: Readable) -> str:
    """Hash of the first bytes (up to FINGERPRINT_BYTES) of an open file."""
    return head_fingerprint(read_head(fh))


def same_head(fh: Readable, stored: str) -> bool:
    """Whether a file starts with the bytes a stored fingerprint ("hash/length") hashed."""
    digest, _, length = stored.rpartition("/")
    size = int(length) if length.isdigit() else FINGERPRINT_BYTES
    if isinstance(fh, io.BufferedReader | io.FileIO):
        # a plain file (not a decompressing reader, whose fileno is the compressed file's):
        # read at offset 0 without moving the reader, whose buffered bytes stay (the daemon
        # asks before every read of a followed file: seeking there and back cost ~50 us)
        head = _pread_head(fh.fileno(), size)
    else:
        head = read_head(fh, size)
    return hashlib.sha256(head).hexdigest()[:20] == digest


def _pread_head(fd: int, length: int) -> bytes:
    head = b""
    while len(head) < length:
        more = os.pread(fd, length - len(head), len(head))
        if not more:
            break
        head += more
    return head


@dataclass(frozen=True, slots=True)
class Rotated:
    """One rotated sibling of a followed file."""

    path: Path
    age: tuple[Any, ...]  # sorts oldest first
    compression: str  # "" or the suffix (".gz", ...)

    @property
    def readable(self) -> bool:
        return self.compression == "" or self.compression in DECOMPRESS


def _age(suffix: str, mtime: float) -> tuple[Any, ...] | None:
    """Sort key (oldest first) of what follows the followed file's name, or None when the
    name is not one logrotate gives (vllm.log.bak, vllm.log.swp)."""
    if m := _NUMBERED.fullmatch(suffix):
        return (0, -int(m.group(1)), mtime)
    if m := _DATED.fullmatch(suffix):
        rest = tuple(int(g) for g in re.findall(r"\d+", m.group(4)))
        return (1, int(m.group(1) + m.group(2) + m.group(3)), rest, mtime)
    return None


def rotated_siblings(path: Path) -> list[Rotated]:
    """The rotated generations beside `path`, oldest first. A generation being compressed
    shows up twice (`.1` and `.1.gz`): the uncompressed one is kept."""
    found: dict[tuple[Any, ...], Rotated] = {}
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return []
    prefix = path.name
    for entry in entries:
        name = entry.name
        if not name.startswith(prefix) or name == prefix:
            continue
        suffix, compression = name[len(prefix):], ""
        for ext in (*DECOMPRESS, *UNREADABLE):
            if suffix.endswith(ext):
                suffix, compression = suffix[: -len(ext)], ext
                break
        try:
            mtime = entry.stat().st_mtime
        except OSError:
            continue
        age = _age(suffix, mtime)
        if age is None:
            continue
        key = age[:-1]  # the same name with and without a compression suffix
        if key not in found or (found[key].compression and not compression):
            found[key] = Rotated(entry, age, compression)
    return sorted(found.values(), key=lambda r: r.age)


@dataclass(slots=True)
class OpenRotated:
    """A rotated generation open for reading its (decompressed) content."""

    fh: Readable  # the content, decompressed
    raw: IO[bytes]  # the file on disk
    device_inode: tuple[int, int]

    def close(self) -> None:
        self.fh.close()
        if self.raw is not self.fh:
            self.raw.close()


def open_rotated(rotated: Rotated) -> OpenRotated | None:
    """None when it cannot be read (gone, not a regular file, a compressor not known)."""
    if not rotated.readable:
        return None
    try:
        opened = open_regular(rotated.path)
    except NotRegular:
        return None
    if opened is None:
        return None
    raw, st = opened
    fh = DECOMPRESS[rotated.compression](raw) if rotated.compression else raw
    return OpenRotated(fh, raw, (st.st_dev, st.st_ino))


@dataclass(slots=True)
class Unread:
    """A rotated generation to read: the rest of ours, or a newer one never read."""

    opened: OpenRotated
    path: Path
    generation: str | None  # None: never read, named from its own first bytes
    offset: int


def _open_siblings(path: Path, current: os.stat_result | None
                   ) -> list[tuple[OpenRotated, Path]]:
    """The rotated files of `path` that can be read, oldest first, open; never `current`
    (the file followed now), whatever its name has become meanwhile."""
    found: list[tuple[OpenRotated, Path]] = []
    for rotated in rotated_siblings(path):
        opened = open_rotated(rotated)
        if opened is None:
            continue
        if current is not None and opened.device_inode == (current.st_dev, current.st_ino):
            opened.close()
            continue
        found.append((opened, rotated.path))
    return found


def every_rotated(path: Path, current: os.stat_result | None) -> list[Unread]:
    """Every rotated generation of `path`, oldest first, each from its start: what a first
    run that starts at the oldest (`start_at = "oldest"`) reads before the current file."""
    return [Unread(opened, rotated_path, None, 0)
            for opened, rotated_path in _open_siblings(path, current)]


def unread_after(path: Path, generation: str, offset: int,
                 current: os.stat_result | None) -> list[Unread] | None:
    """`generation` among the rotated files of `path` (by its first bytes; of several, the
    one with its device and inode, else the newest), to be read from `offset`, then every
    newer one from 0, oldest first; None when it is not there. `current` (the file followed
    now) is never one of them, whatever its name has become meanwhile."""
    dev, ino, stored = [*generation.split(":", 2), "", ""][:3]
    named = (int(dev), int(ino)) if dev.isdigit() and ino.isdigit() else None
    found: list[tuple[OpenRotated, Path, bool]] = []  # oldest first
    for opened, rotated_path in _open_siblings(path, current):
        try:
            ours = same_head(opened.fh, stored)
        except DECODE_ERRORS:
            opened.close()
            continue
        found.append((opened, rotated_path, ours))
    same_inode = [i for i, (o, _, ours) in enumerate(found) if ours and o.device_inode == named]
    matching = same_inode or [i for i, (_, _, ours) in enumerate(found) if ours]
    start = matching[-1] if matching else None
    for i, (opened, _, _) in enumerate(found):
        if start is None or i < start:
            opened.close()
    if start is None:
        return None
    return [Unread(opened, rotated_path, generation if i == start else None,
                   offset if i == start else 0)
            for i, (opened, rotated_path, _) in enumerate(found) if i >= start]


async def read_unread(unread: list[Unread], events: list[str], closed: Callable[[], bool]
                      ) -> AsyncIterator[tuple[str, Piece, int, bool]]:
    """(generation, piece, offset, first of its generation) through each rotated generation
    to its end; a last line without a newline is handed on (nothing more is written to it).
    What was read, and what could not be, goes to `events`."""
    try:
        for item in unread:
            if closed():
                return
            fh, generation, offset = item.opened.fh, item.generation, item.offset
            new = generation is None
            try:
                if generation is None:
                    dev, ino = item.opened.device_inode
                    generation = f"{dev}:{ino}:{fingerprint(fh)}"
                if fh is item.opened.raw:
                    fh.seek(offset)
                else:  # decompressing up to the offset: a block at a time, not all at once
                    skipped = 0
                    while skipped < offset and not closed():
                        read = len(fh.read(min(READ_BYTES, offset - skipped)))
                        if not read:
                            break
                        skipped += read
                        await asyncio.sleep(0)
            except DECODE_ERRORS as exc:
                events.append(f"{item.path}: cannot read it: {exc}")
                continue
            splitter = LineSplitter()
            while not closed():
                try:
                    block = fh.read(READ_BYTES)
                except DECODE_ERRORS as exc:  # a compressed file cut short
                    events.append(f"{item.path}: read up to a damaged part: {exc}")
                    block = b""
                if not block:
                    break
                for piece in splitter.feed(block):
                    yield generation, piece, offset, new
                    offset, new = offset + piece.span, False
            if (last := splitter.finish()) is not None and not closed():
                yield generation, last, offset, new
                offset += last.span
            if offset > item.offset:
                events.append(f"read {generation} from rotated file {item.path}, "
                              f"bytes {item.offset} to {offset}")
    finally:
        for item in unread:
            item.opened.close()
