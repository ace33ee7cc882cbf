"""Match records against a signature library: literal prefilter first, full regex after.

Matching one record has one time budget, shared by every pattern tried on it, so a
pathological pattern costs one budget (counted and reported), never a stalled daemon however
many patterns run over. A signature that runs over again and again is disabled.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import regex

from logwatch.core.lines.records import ParsedLine, Record
from logwatch.core.safe_text.redact import Span, redact_slice, spans_for_parts
from logwatch.core.safe_text.redact import warm as warm_redaction
from logwatch.core.signatures.fallback import ERROR_LEVELS, is_generic, settle_record
from logwatch.core.signatures.findings import Finding
from logwatch.core.signatures.prefilter import LiteralScanner, make_scanner
from logwatch.core.signatures.signature import CONSEQUENCE_CATEGORIES, Signature
from logwatch.core.signatures.vocabulary import Vocabulary

# One record's budget for all its patterns, in CPU time of the matching thread: `regex` counts
# its timeout in process CPU time (clock()), so a wall-clock budget would be spent by one
# pattern whenever the machine is busy, and one timeout lasts longer on the wall clock then
# (about 2x with half a core; benchmarks/match_budget.py).
MATCH_TIMEOUT_S = 0.05
# Once the budget is spent, patterns not yet tried on the record share this much more: a
# healthy pattern takes microseconds, so one that ran over cannot hide the others' findings.
RESERVE_SHARE = 0.2
# A signature whose patterns run over this many times is not tried any more.
DISABLE_AFTER_TIMEOUTS = 3
# A search stopped by its timeout ran over only if this thread spent this share of what it
# was given; else other threads spent the process time, and it is tried again (at most
# MAX_RETRIES times, with at most MAX_STRETCH times its own time as process time): one record
# then costs at most a few budgets of this thread's time, never a lost finding.
OWN_SHARE = 0.8
MAX_RETRIES = 4
MAX_STRETCH = 16.0
FLAGS = regex.MULTILINE
# vLLM's request logger prints user prompts verbatim; what a user typed is not vLLM's state,
# however much it looks like an error message. At DEBUG (0.25-0.33) it also prints a request's
# prompt and its JSON body on lines of their own.
_REQUEST_CONTENT_PREFIXES = ("Received request ", "Generated response ")
_REQUEST_DETAILS = regex.compile(r"Request \S{1,200} (?:details: prompt: |JSON body: )")
# What a record gave is remembered by its text: a failing server repeats itself (every rank
# prints the same traceback, every restart the same error), and a repeat then costs a lookup
# instead of every pattern. Records up to this size; this many kept, then forgotten at once.
MEMO_MAX_CHARS = 8192
MEMO_ENTRIES = 512
# One remembered outcome: (signature, captures, index of the matched line in the record).
_Memo = tuple[tuple[Signature, dict[str, str], int], ...]


@dataclass(slots=True, eq=False)
class CompiledPattern:
    """One pattern of the library, compiled when its literals first occur: a scan compiles
    the few that its input asks for, not all of them (compiling one takes about a millisecond,
    some much more). Candidates are compiled as their list is made, outside any record's
    match budget, which compiling would otherwise spend."""

    signature: Signature
    index: int
    source: str
    line_anchored: bool  # starts with `^`: later matches can only start on a later line
    generic: bool  # a fallback rule: tried last, and not at all once a cause is found
    _compiled: regex.Pattern[str] | None = None

    def compile(self) -> None:
        if self._compiled is None:
            self._compiled = compile_pattern(self.source)

    @property
    def regex(self) -> regex.Pattern[str]:
        if self._compiled is None:
            self.compile()
            assert self._compiled is not None
        return self._compiled


def compile_pattern(text: str) -> regex.Pattern[str]:
    return regex.compile(text, FLAGS)


class Matcher:
    """A compiled library. Not thread-safe for its counters; one per ingestion loop.

    `timeout`: one record's budget for every pattern tried on it. A signature whose patterns
    run over `disable_after` times is disabled (None: never, for checking examples);
    `on_disable(signature, reason)` is called once when that happens."""

    def __init__(self, signatures: Sequence[Signature], engine: str = "auto",
                 timeout: float = MATCH_TIMEOUT_S,
                 on_disable: Callable[[Signature, str], None] | None = None,
                 disable_after: int | None = DISABLE_AFTER_TIMEOUTS,
                 vocabulary: Vocabulary | None = None) -> None:
        self.signatures = list(signatures)
        self.vocabulary = vocabulary  # vLLM's wordings, for what no signature explains
        self.timeout = timeout
        self.on_disable = on_disable
        self.disable_after = disable_after
        literals: list[str] = []
        literal_index: dict[str, int] = {}
        self._by_literal: list[list[CompiledPattern]] = []
        for signature in self.signatures:
            for index, pattern in enumerate(signature.patterns):
                compiled = CompiledPattern(signature, index, pattern.regex,
                                           pattern.regex.startswith("^"),
                                           is_generic(signature))
                for literal in pattern.literals:
                    if literal not in literal_index:
                        literal_index[literal] = len(literals)
                        literals.append(literal)
                        self._by_literal.append([])
                    bucket = self._by_literal[literal_index[literal]]
                    if compiled not in bucket:
                        bucket.append(compiled)
        self.literals = literals
        self._literal_index = literal_index
        # literal id -> its patterns, for literals only signatures reported once per run of
        # alike lines hold (core.signatures.repeats)
        self.run_literals: dict[int, tuple[CompiledPattern, ...]] = {
            i: tuple(bucket) for i, bucket in enumerate(self._by_literal)
            if all(p.signature.repeats == "first_of_run" for p in bucket)}
        self._order = {sig.id: i for i, sig in enumerate(self.signatures)}
        self.scanner: LiteralScanner = make_scanner(literals, engine)
        self.timeouts: Counter[str] = Counter()  # signature id -> patterns that ran over
        self.pattern_timeouts: Counter[tuple[str, int]] = Counter()  # (id, pattern index)
        self.skipped: Counter[str] = Counter()  # not tried: the record's budget was spent
        self.disabled: dict[str, str] = {}  # signature id -> why
        # candidates by the set of literals found, while no signature has run over
        self._candidates: dict[frozenset[int], list[CompiledPattern]] = {}
        # (message, its literal ids or else its level word, its lines' levels) -> outcome
        self._memo: dict[tuple[object, ...], _Memo] = {}

    def warm(self) -> None:
        """Compile now what the first findings would compile on their way: every pattern
        (the shipped library's 267: about 55 ms) and the secret trigger their captures are
        masked with (about 25 ms). A daemon does this before it says it is ready: its
        first finding waited 30 ms for them between its write and its commit."""
        for bucket in self._by_literal:
            for pattern in bucket:
                pattern.compile()
        warm_redaction()

    def candidates(self, text: str, literal_ids: Iterable[int] | None = None
                   ) -> list[CompiledPattern]:
        """Patterns whose literals occur in `text` (or the given literal ids), library order,
        except that signatures which ran over before come last; disabled ones are left out."""
        return self._candidates_for(frozenset(
            self.scanner.present(text) if literal_ids is None else literal_ids))

    def _candidates_for(self, ids: frozenset[int]) -> list[CompiledPattern]:
        if self.timeouts or self.disabled:  # rare: order by what ran over, uncached
            return self._ordered_candidates(ids)
        found = self._candidates.get(ids)
        if found is None:
            if len(self._candidates) >= 4096:  # each is a set of literals seen on one line
                self._candidates.clear()
            found = self._candidates[ids] = self._ordered_candidates(ids)
        return found

    def _ordered_candidates(self, ids: frozenset[int]) -> list[CompiledPattern]:
        seen: dict[tuple[str, int], CompiledPattern] = {}
        for literal_id in ids:
            for pattern in self._by_literal[literal_id]:
                seen.setdefault((pattern.signature.id, pattern.index), pattern)
        if self.disabled:
            seen = {k: p for k, p in seen.items() if k[0] not in self.disabled}
        for pattern in seen.values():  # here, not inside a record's match budget
            pattern.compile()
        if len(seen) == 1:
            return list(seen.values())
        order, suspects = self._order, self.timeouts
        return sorted(seen.values(), key=lambda p: (p.signature.id in suspects, p.generic,
                                                    order[p.signature.id], p.index))

    def match_record(self, record: Record, literal_ids: Iterable[int] | None = None
                     ) -> list[Finding]:
        """One finding per signature that matches the record (its first matching pattern).

        `literal_ids`: the literals a prefilter already found in the record's text."""
        message = record.message
        if message.startswith(_REQUEST_CONTENT_PREFIXES) or (
                message.startswith("Request ") and _REQUEST_DETAILS.match(message)):
            return []
        lines = record.lines
        key: tuple[object, ...] | None = None
        if len(message) <= MEMO_MAX_CHARS and not (self.timeouts or self.disabled):
            # the literals a record holds follow from its text and its level word (see
            # _with_level) when the prefilter has not named them: no scan for them then
            key = (message, frozenset(literal_ids) if literal_ids is not None
                   else level_literal(record),
                   lines[0].level if len(lines) == 1 else tuple(ln.level for ln in lines))
            known = self._memo.get(key)
            if known is not None:
                return [self._finding(sig, dict(captures), record, lines[index])
                        for sig, captures, index in known]
        if literal_ids is None and lines[0].level in ERROR_LEVELS:
            literal_ids = self._with_level(record, message)
        ids = frozenset(self.scanner.present(message) if literal_ids is None else literal_ids)
        findings, whole = self._search(record, message, self._candidates_for(ids))
        if findings:
            findings = settle_record(findings, record, self.vocabulary)
        if key is not None and whole:
            if len(self._memo) >= MEMO_ENTRIES:
                self._memo.clear()
            self._memo[key] = tuple((f.signature, dict(f.captures), record.index_of(f.matched))
                                    for f in findings)
        return findings

    def _search(self, record: Record, message: str, candidates: list[CompiledPattern]
                ) -> tuple[list[Finding], bool]:
        """The findings of every candidate pattern, and whether every one was tried to the
        end (no budget ran out: only then is the outcome worth remembering)."""
        findings: list[Finding] = []
        done: set[str] = set()
        whole = True
        explained = False  # a specific cause found: the fallback rules would give way to it
        secrets: list[Span] | None = None  # the message's, found when a capture needs them
        looked = False
        budget_ends = time.thread_time() + self.timeout
        budget = [budget_ends, budget_ends + self.timeout * RESERVE_SHARE]  # and its reserve
        for pattern in candidates:
            signature = pattern.signature
            if signature.id in done or signature.id in self.disabled:
                continue
            if pattern.generic and explained:
                continue  # settle_record would drop it
            try:
                match = _search_within(pattern.regex, message, 0, budget)
                while match is not None:
                    captures = {k: v for k, v in match.groupdict().items() if v is not None}
                    if captures and not looked:
                        secrets, looked = spans_for_parts(message), True
                    if secrets is not None:
                        captures = {k: redact_slice(message, match.start(k), match.end(k),
                                                    secrets) for k in captures}
                    if not signature.conditions or signature.conditions_hold(captures):
                        findings.append(self._finding(signature, captures, record,
                                                      record.line_at(match.start())))
                        done.add(signature.id)
                        explained = explained or _explains(signature)
                        break
                    # conditions failed: the next match further on may still qualify
                    start = max(match.end(), match.start() + 1)
                    if pattern.line_anchored:
                        start = message.find("\n", match.start()) + 1
                        if start == 0:
                            break
                    match = _search_within(pattern.regex, message, start, budget)
            except _BudgetSpent:
                self.skipped[signature.id] += 1
                whole = False
            except TimeoutError:
                self.ran_over(pattern)
                whole = False
        return findings, whole

    def _with_level(self, record: Record, message: str) -> Iterable[int] | None:
        """The literals in `message` plus the first line's level word, where that is one:
        the block scanner's prefilter reads the raw line, header and all."""
        word = level_literal(record)
        level_id = self._literal_index.get(word) if word is not None else None
        if level_id is None:
            return None
        return {*self.scanner.present(message), level_id}

    def ran_over(self, pattern: CompiledPattern) -> None:
        signature = pattern.signature
        self.timeouts[signature.id] += 1
        self.pattern_timeouts[(signature.id, pattern.index)] += 1
        if self.disable_after is not None and signature.id not in self.disabled \
                and self.timeouts[signature.id] >= self.disable_after:
            reason = (f"its patterns ran over the {self.timeout * 1000:g} ms match budget "
                      f"{self.timeouts[signature.id]} times (pattern {pattern.index + 1} "
                      f"last); it is not tried any more until the library is reloaded")
            self.disabled[signature.id] = reason
            if self.on_disable is not None:
                self.on_disable(signature, reason)

    def match_records(self, records: Iterable[Record]) -> list[Finding]:
        return [f for record in records for f in self.match_record(record)]

    @staticmethod
    def _finding(signature: Signature, captures: dict[str, str], record: Record,
                 line: ParsedLine) -> Finding:
        return Finding(
            signature=signature, captures=captures, source=line.source, lineno=line.lineno,
            record_lineno=record.lineno, record_last_lineno=record.last_lineno, kind=line.kind,
            process=record.process, pid=record.pid, rank=record.rank,
            time=line.time or record.time, record=record, matched=line,
        )


def _explains(signature: Signature) -> bool:
    """A finding that settle_record lets stand for its whole record, generic ones dropped."""
    return (not is_generic(signature) and signature.severity_rank >= 1
            and signature.category not in CONSEQUENCE_CATEGORIES)


def level_literal(record: Record) -> str | None:
    """The level word of a record's first line logged at ERROR or above, where the line spells
    it (a vLLM, uvicorn or JSON header; glog's `E1201` does not): the prefilter counts it as
    text of the record, though `record.message` leaves the header out."""
    first = record.lines[0]
    level = first.level
    if level in ERROR_LEVELS and level in first.raw:
        return level
    return None


class _BudgetSpent(Exception):
    """The record's budget and its reserve are spent: the pattern is not tried."""


def _search_within(compiled: regex.Pattern[str], message: str, start: int,
                   budget: list[float]) -> regex.Match[str] | None:
    """`compiled.search` within what is left of the record's budget of this thread's CPU
    time (`budget`: when the budget and its reserve end). `regex` counts its timeout in the
    process's CPU time, which other threads spend too (the daemon's database writer, the
    reader): a search stopped before this thread had spent most of what it was given did
    not run over. It runs again, given back the time it spent and as much more process time
    as the other threads took, so a busy process never makes a healthy pattern run over."""
    stretch = 1.0
    for _ in range(MAX_RETRIES):
        allowed, began = _left(budget[0], budget[1])
        try:
            return compiled.search(message, start, timeout=allowed * stretch)
        except TimeoutError:
            spent = time.thread_time() - began
            if spent >= allowed * OWN_SHARE:
                raise
            budget[0] += spent
            budget[1] += spent
            stretch = min(max(2 * stretch, allowed * stretch / max(spent, 1e-4)), MAX_STRETCH)
    raise TimeoutError("the search kept running out of process time other threads took")


def _left(budget_ends: float, reserve_ends: float) -> tuple[float, float]:
    """(Seconds a search may take now, this thread's CPU clock now): what is left of the
    record's budget, else of the reserve the patterns not yet tried share."""
    now = time.thread_time()
    left = budget_ends - now
    if left <= 0:
        left = reserve_ends - now
        if left <= 0:
            raise _BudgetSpent
    return left, now
