"""Read a byte stream as newline-aligned blocks, cutting absurdly long lines with a marker."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator
from typing import BinaryIO

# One block is read, scanned for literals, counted for newlines and judged in a few passes:
# at 1 MiB it stays in a core's cache between them (8 MiB blocks took 10-25% longer on the
# shared yardstick, measured with benchmarks/scan_bench.py).
BLOCK_BYTES = 1 << 20
MAX_LINE_BYTES = 1 << 20
CUT_MARKER = b" \xe2\x80\xa6[line cut by logwatch: over 1 MiB]"


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_blocks() -> None:
    """Have glibc serve blocks from the heap and keep freed ones for the next block. By
    default each block of several MiB is mapped afresh and unmapped when freed, and every
    block then costs a page fault per 4 KiB (~3 per KiB read: read, join, scan buffer)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # glibc's maximum
        libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20)
    except (OSError, AttributeError):  # not glibc (musl has no mallopt): only slower
        pass


def release_freed_blocks() -> bool:
    """Give the memory kept by keep_freed_blocks back to the system (glibc's malloc_trim),
    once a scan is over and before something large loads (DuckDB, for `scan --db`): ~40 MiB
    after a failure-dense log, which the process would otherwise hold to its end. True if
    glibc gave some back."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL(None).malloc_trim(0))
    except (OSError, AttributeError):  # not glibc
        return False


def read_blocks(stream: BinaryIO, block_bytes: int = BLOCK_BYTES,
                max_line: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """Yield blocks that end at a newline (the last may not); no line exceeds `max_line`."""
    remainder = b""
    skipping = False  # inside an over-long line whose head was already emitted
    while True:
        chunk = stream.read(block_bytes)
        if not chunk:
            break
        if skipping:
            newline = chunk.find(b"\n")
            if newline < 0:
                continue
            chunk, skipping = chunk[newline + 1:], False
        cut = chunk.rfind(b"\n")
        if cut < 0:
            remainder += chunk
            if len(remainder) > max_line:
                yield remainder[:max_line] + CUT_MARKER + b"\n"
                remainder, skipping = b"", True
            continue
        # one copy per block: the previous tail joined to this chunk up to its last newline
        block = b"".join((remainder, memoryview(chunk)[: cut + 1]))
        remainder = chunk[cut + 1:]
        if len(remainder) > max_line:
            block += remainder[:max_line] + CUT_MARKER + b"\n"
            remainder, skipping = b"", True
        yield _cut_long_lines(block, max_line)
    if remainder:
        yield _cut_long_lines(remainder, max_line)


def _cut_long_lines(block: bytes, max_line: int) -> bytes:
    """Cut lines over `max_line` bytes; jumps a window at a time, so cheap when there are none."""
    pieces: list[bytes] = []
    pos = keep_from = 0
    size = len(block)
    while size - pos > max_line:
        newline = block.rfind(b"\n", pos, pos + max_line + 1)
        if newline >= 0:
            pos = newline + 1
            continue
        end = block.find(b"\n", pos)  # pos starts a line longer than max_line
        pieces.append(block[keep_from:pos + max_line] + CUT_MARKER)
        if end < 0:
            keep_from = pos = size
            break
        keep_from = pos = end
    if not pieces:
        return block
    pieces.append(block[keep_from:])
    return b"".join(pieces)
