"""Records the history refuses for their content, found and set aside so reading goes on.

A commit that fails on what one record holds (a value no column takes, a constraint a site
added) would otherwise fail again at every try and hold its source at that line forever.
Such an error is told apart from a store that cannot be written at all (a full disk, an I/O
error, a read-only file: those hold the source until they pass); the records that fail on
their own are found by halving the batch in transactions that are rolled back, and each is
stored as a `quarantined` row instead: where it was, its line (secrets masked) and why.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import duckdb

from logwatch.core.safe_text.redact import redact

T = TypeVar("T")
TEXT_KEPT = 2_000  # characters of a refused record's line kept
ERROR_KEPT = 500

# what DuckDB raises for a value or row it will not take: the content's fault
_CONTENT_ERRORS = (duckdb.ConversionException, duckdb.ConstraintException,
                   duckdb.InvalidInputException, duckdb.OutOfRangeException,
                   duckdb.TypeMismatchException)
# ... unless the message says the store itself is the problem
_STORE_WORDS = ("read-only", "read only", "no space", "disk", "i/o", "invalidated",
                "could not allocate", "out of memory")


def is_content_error(exc: BaseException) -> bool:
    """Whether a failed write is the fault of what was written, not of the store."""
    text = str(exc).lower()
    return isinstance(exc, _CONTENT_ERRORS) and not any(w in text for w in _STORE_WORDS)


@dataclass(frozen=True, slots=True)
class Refused:
    """A record the history refused: the source and stream it came from, its line there,
    what it is (a finding, a launch), its signature, its text and DuckDB's error."""

    source: str
    source_id: str
    line: int
    kind: str
    signature: str | None
    text: str
    error: str

    def row(self, now: datetime) -> dict[str, Any]:
        key = "\x1f".join((self.source_id, str(self.line), self.kind, self.signature or ""))
        return {"id": hashlib.sha256(key.encode()).hexdigest()[:24], "source": self.source,
                "source_id": self.source_id, "line": self.line, "kind": self.kind,
                "signature": self.signature, "text": _storable(redact(self.text), TEXT_KEPT),
                "error": _storable(redact(self.error), ERROR_KEPT), "recorded": now}


def _storable(text: str, limit: int) -> str:
    """Text any VARCHAR takes: valid UTF-8 (no lone surrogates), cut at `limit`."""
    return text[:limit].encode("utf-8", "replace").decode("utf-8")


def culprits(items: Sequence[T], probe: Callable[[Sequence[T]], None]
             ) -> list[tuple[T, str]]:
    """The items that fail on their own, each with its error. `probe` writes some items in a
    transaction it rolls back, raising what DuckDB raised; a failure that is not the content's
    is raised as it is (the store failed while looking)."""
    try:
        probe(items)
        return []
    except duckdb.Error as exc:
        if not is_content_error(exc):
            raise
        if len(items) == 1:
            return [(items[0], f"{type(exc).__name__}: {exc}")]
    middle = len(items) // 2
    return culprits(items[:middle], probe) + culprits(items[middle:], probe)


def rolled_back(con: duckdb.DuckDBPyConnection, write: Callable[[], object]) -> None:
    """`write` in a transaction that is always rolled back (a probe)."""
    con.execute("BEGIN TRANSACTION")
    try:
        write()
    finally:
        con.execute("ROLLBACK")
