"""Find signature literals fast: Hyperscan when installed, plain `find` loops otherwise.

Both engines answer the same questions, so results never depend on which one runs: which
literals occur in a short text, where literals occur in a large block of bytes (less those
on request-lifecycle lines), and how many lines a stretch of it holds. The Hyperscan engine
does the per-hit work in C where `_speedups` (_speedups.c beside this) was built by
hatch_build.py; the Python engine is the pure-Python reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from logwatch.core.lines.benign import is_benign
from logwatch.core.lines.buffer_lines import NativeJoiner
from logwatch.core.lines.native import speedups as _speedups

_hs: Any
try:  # the native engine is optional: x86_64 Linux wheels only
    import hyperscan as _hs
except ImportError:  # pragma: no cover - depends on the platform
    _hs = None


class LiteralScanner(Protocol):
    engine: str
    # _speedups.joiner_near where this engine has it: BufferLines.joiner_near's question
    # in C (glibc's memmem, about 3x Python's find on a logger header); None: in Python
    native_joiner: NativeJoiner | None

    def present(self, text: str) -> set[int]:
        """Indices of the literals that occur in `text`."""

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        """(start offset, literal index) of every literal occurrence in `data`, sorted."""

    def hits_outside_requests(self, data: bytes, at_line_start: bool
                              ) -> tuple[list[tuple[int, int]], int]:
        """`hits`, less those on request-lifecycle lines (core.lines.benign), and how many
        those were. `at_line_start`: `data` begins a line (else its first line, whose start
        is not at hand, is never passed over)."""

    def newlines(self, data: bytes, start: int, end: int) -> int:
        """How many b"\\n" lie in data[start:end] (`bytes.count`'s slice rules)."""


def _outside_requests(data: bytes, found: list[tuple[int, int]], at_line_start: bool
                      ) -> tuple[list[tuple[int, int]], int]:
    """Sorted hits less those on request-lifecycle lines, by `re` one hit line at a time."""
    kept: list[tuple[int, int]] = []
    line_end = passed_end = -1
    passed = 0
    for hit in found:
        offset = hit[0]
        if offset < line_end:  # a line already judged
            if offset < passed_end:
                passed += 1
            else:
                kept.append(hit)
            continue
        start = data.rfind(b"\n", 0, offset) + 1
        end = data.find(b"\n", offset)
        line_end = len(data) if end < 0 else end
        if (start or at_line_start) and is_benign(data, start):
            passed_end = line_end
            passed += 1
        else:
            kept.append(hit)
    return kept, passed


class PythonLiteralScanner:
    """Portable fallback: one `find` loop per literal."""

    engine = "python"
    native_joiner: NativeJoiner | None = None

    def __init__(self, literals: Sequence[str]) -> None:
        self._literals = list(literals)
        self._encoded = [lit.encode() for lit in literals]

    def present(self, text: str) -> set[int]:
        return {i for i, lit in enumerate(self._literals) if lit in text}

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for index, lit in enumerate(self._encoded):
            pos = data.find(lit)
            while pos >= 0:
                found.append((pos, index))
                pos = data.find(lit, pos + 1)
        found.sort()
        return found

    def hits_outside_requests(self, data: bytes, at_line_start: bool
                              ) -> tuple[list[tuple[int, int]], int]:
        return _outside_requests(data, self.hits(data), at_line_start)

    def newlines(self, data: bytes, start: int, end: int) -> int:
        return data.count(b"\n", start, end)


def _hs_expression(literal: bytes) -> bytes:
    return b"".join(b"\\x%02x" % byte for byte in literal)


class HyperscanLiteralScanner:
    """All literals in one Hyperscan database, scanned in a single pass; each hit kept in C
    and judged there (logwatch.core.signatures._speedups) where that was built."""

    engine = "hyperscan"

    def __init__(self, literals: Sequence[str], speedups: bool = True) -> None:
        assert _hs is not None
        self._encoded = [lit.encode() for lit in literals]
        self.speedups = speedups and _speedups is not None
        self._lengths = tuple(len(lit) for lit in self._encoded)
        self.native_joiner = _speedups.joiner_near if self.speedups else None
        expressions = [_hs_expression(lit) for lit in self._encoded]
        ids = list(range(len(expressions)))
        self._any = _hs.Database(mode=_hs.HS_MODE_BLOCK)
        self._any.compile(expressions=expressions, ids=ids, elements=len(expressions),
                          flags=[_hs.HS_FLAG_SINGLEMATCH] * len(expressions))
        self._all = _hs.Database(mode=_hs.HS_MODE_BLOCK)
        self._all.compile(expressions=expressions, ids=ids, elements=len(expressions),
                          flags=[0] * len(expressions))

    def present(self, text: str) -> set[int]:
        found: set[int] = set()

        def on_match(lit_id: int, start: int, end: int, flags: int, ctx: Any) -> None:
            found.add(lit_id)

        self._any.scan(text.encode(), match_event_handler=on_match)
        return found

    def _collector(self) -> Any:
        return _speedups.Hits(self._lengths)

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        if self.speedups:
            collector = self._collector()
            self._all.scan(data, match_event_handler=collector)
            found_c: list[tuple[int, int]] = collector.sorted()
            return found_c
        found: list[tuple[int, int]] = []
        lengths = self._lengths
        append = found.append

        def on_match(lit_id: int, start: int, end: int, flags: int, ctx: Any) -> None:
            append((end - lengths[lit_id], lit_id))

        self._all.scan(data, match_event_handler=on_match)
        found.sort()
        return found

    def hits_outside_requests(self, data: bytes, at_line_start: bool
                              ) -> tuple[list[tuple[int, int]], int]:
        # (Hyperscan could report request lines in the same pass, but every match costs a
        # call through its binding: on the yardstick that made the pass 3x slower than `re`
        # on the hit lines alone.)
        if self.speedups:
            collector = self._collector()
            self._all.scan(data, match_event_handler=collector)
            kept: tuple[list[tuple[int, int]], int] = collector.take(data, at_line_start)
            return kept
        return _outside_requests(data, self.hits(data), at_line_start)

    def newlines(self, data: bytes, start: int, end: int) -> int:
        if self.speedups:
            count: int = _speedups.newlines(data, start, end)
            return count
        return data.count(b"\n", start, end)


def make_scanner(literals: Sequence[str], engine: str = "auto") -> LiteralScanner:
    """The best available scanner, or the one named by `engine` ("hyperscan", "python")."""
    if not literals:
        return PythonLiteralScanner(literals)
    if engine == "hyperscan" or (engine == "auto" and _hs is not None):
        if _hs is None:
            raise RuntimeError("the hyperscan engine is not installed")
        return HyperscanLiteralScanner(literals)
    return PythonLiteralScanner(literals)
