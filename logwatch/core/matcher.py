"""Match records against a signature library: literal prefilter first, full regex after.

Every pattern runs under a time bound, so a pathological pattern costs one timeout (counted
and reported), never a stalled daemon.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import regex

from logwatch.core.findings import Finding
from logwatch.core.prefilter import LiteralScanner, make_scanner
from logwatch.core.records import Record
from logwatch.core.redact import Span, redact_slice, spans_for_parts
from logwatch.core.signature import Signature

MATCH_TIMEOUT_S = 0.05
FLAGS = regex.MULTILINE
# vLLM's request logger prints user prompts verbatim; what a user typed is not vLLM's state,
# however much it looks like an error message.
_REQUEST_CONTENT_PREFIXES = ("Received request ", "Generated response ")


@dataclass(frozen=True, slots=True)
class CompiledPattern:
    signature: Signature
    index: int
    regex: regex.Pattern[str]
    line_anchored: bool  # starts with `^`: later matches can only start on a later line


def compile_pattern(text: str) -> regex.Pattern[str]:
    return regex.compile(text, FLAGS)


class Matcher:
    """A compiled library. Not thread-safe for its counters; one per ingestion loop."""

    def __init__(self, signatures: Sequence[Signature], engine: str = "auto",
                 timeout: float = MATCH_TIMEOUT_S) -> None:
        self.signatures = list(signatures)
        self.timeout = timeout
        literals: list[str] = []
        literal_index: dict[str, int] = {}
        self._by_literal: list[list[CompiledPattern]] = []
        for signature in self.signatures:
            for index, pattern in enumerate(signature.patterns):
                compiled = CompiledPattern(signature, index, compile_pattern(pattern.regex),
                                           pattern.regex.startswith("^"))
                for literal in pattern.literals:
                    if literal not in literal_index:
                        literal_index[literal] = len(literals)
                        literals.append(literal)
                        self._by_literal.append([])
                    bucket = self._by_literal[literal_index[literal]]
                    if compiled not in bucket:
                        bucket.append(compiled)
        self.literals = literals
        self._order = {sig.id: i for i, sig in enumerate(self.signatures)}
        self.scanner: LiteralScanner = make_scanner(literals, engine)
        self.timeouts: Counter[str] = Counter()

    def candidates(self, text: str, literal_ids: Iterable[int] | None = None
                   ) -> list[CompiledPattern]:
        """Patterns whose literals occur in `text` (or the given literal ids), library order."""
        seen: dict[tuple[str, int], CompiledPattern] = {}
        ids = self.scanner.present(text) if literal_ids is None else literal_ids
        for literal_id in ids:
            for pattern in self._by_literal[literal_id]:
                seen.setdefault((pattern.signature.id, pattern.index), pattern)
        if len(seen) == 1:
            return list(seen.values())
        order = self._order
        return sorted(seen.values(), key=lambda p: (order[p.signature.id], p.index))

    def match_record(self, record: Record, literal_ids: Iterable[int] | None = None
                     ) -> list[Finding]:
        """One finding per signature that matches the record (its first matching pattern).

        `literal_ids`: the literals a prefilter already found in the record's text."""
        message = record.message
        if message.startswith(_REQUEST_CONTENT_PREFIXES):
            return []
        findings: list[Finding] = []
        done: set[str] = set()
        secrets: list[Span] | None = None  # the message's, found when a capture needs them
        looked = False
        for pattern in self.candidates(message, literal_ids):
            signature = pattern.signature
            if signature.id in done:
                continue
            try:
                match = pattern.regex.search(message, timeout=self.timeout)
                while match is not None:
                    names = [k for k, v in match.groupdict().items() if v is not None]
                    if names and not looked:
                        secrets, looked = spans_for_parts(message), True
                    captures = {k: redact_slice(message, match.start(k), match.end(k),
                                                secrets) for k in names}
                    if not signature.conditions or signature.conditions_hold(captures):
                        findings.append(self._finding(signature, captures, record,
                                                      match.start()))
                        done.add(signature.id)
                        break
                    # conditions failed: the next match further on may still qualify
                    start = max(match.end(), match.start() + 1)
                    if pattern.line_anchored:
                        start = message.find("\n", match.start()) + 1
                        if start == 0:
                            break
                    match = pattern.regex.search(message, start, timeout=self.timeout)
            except TimeoutError:
                self.timeouts[signature.id] += 1
        return findings

    def match_records(self, records: Iterable[Record]) -> list[Finding]:
        return [f for record in records for f in self.match_record(record)]

    @staticmethod
    def _finding(signature: Signature, captures: dict[str, str], record: Record,
                 offset: int) -> Finding:
        line = record.line_at(offset)
        return Finding(
            signature=signature, captures=captures, source=line.source, lineno=line.lineno,
            record_lineno=record.lineno, record_last_lineno=record.last_lineno, kind=line.kind,
            process=record.process, pid=record.pid, rank=record.rank,
            time=line.time or record.time, record=record, matched=line,
        )
