"""Find signature literals fast: Hyperscan when installed, plain `find` loops otherwise.

Both engines answer the same two questions, so results never depend on which one runs:
which literals occur in a short text, and where literals occur in a large block of bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

_hs: Any
try:  # the native engine is optional: x86_64 Linux wheels only
    import hyperscan as _hs
except ImportError:  # pragma: no cover - depends on the platform
    _hs = None


class LiteralScanner(Protocol):
    engine: str

    def present(self, text: str) -> set[int]:
        """Indices of the literals that occur in `text`."""

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        """(start offset, literal index) of every literal occurrence in `data`, sorted."""


class PythonLiteralScanner:
    """Portable fallback: one `find` loop per literal."""

    engine = "python"

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


def _hs_expression(literal: bytes) -> bytes:
    return b"".join(b"\\x%02x" % byte for byte in literal)


class HyperscanLiteralScanner:
    """All literals in one Hyperscan database, scanned in a single pass."""

    engine = "hyperscan"

    def __init__(self, literals: Sequence[str]) -> None:
        assert _hs is not None
        self._encoded = [lit.encode() for lit in literals]
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

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        lengths = [len(lit) for lit in self._encoded]

        def on_match(lit_id: int, start: int, end: int, flags: int, ctx: Any) -> None:
            found.append((end - lengths[lit_id], lit_id))

        self._all.scan(data, match_event_handler=on_match)
        found.sort()
        return found


def make_scanner(literals: Sequence[str], engine: str = "auto") -> LiteralScanner:
    """The best available scanner, or the one named by `engine` ("hyperscan", "python")."""
    if not literals:
        return PythonLiteralScanner(literals)
    if engine == "hyperscan" or (engine == "auto" and _hs is not None):
        if _hs is None:
            raise RuntimeError("the hyperscan engine is not installed")
        return HyperscanLiteralScanner(literals)
    return PythonLiteralScanner(literals)
