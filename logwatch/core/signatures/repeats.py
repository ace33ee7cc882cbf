"""Runs of a status line that vLLM repeats while it serves, reported on their first line.

A serving vLLM prints its throughput stats every few seconds (`Avg prompt throughput: ...`,
lifecycle.serving): 15,000 lines a gigabyte on the shared yardstick. Each would be a finding
that costs the whole per-hit path (about 30 µs: parsed, assembled, matched, recorded) to say
again what the first one said: the server is up. A signature with `repeats = "first_of_run"`
is reported on the first line of a run; the run's other lines are counted
(ScanStats.repeated_lines) and passed over before their records are assembled.

The prefilter's hit lines (lines holding a literal of the library, less request-lifecycle
lines, core.lines.benign) are judged in order, and a line is *alike* the one before when:

- it is a complete line of vLLM's logger at INFO in the modern form, without colour codes or
  a carriage return (`(Name pid=N) INFO MM-DD HH:MM:SS [file:line] message`, the process prefix
  optional);
- every literal on it belongs to `first_of_run` signatures only, so no other signature can be
  a candidate for it; their patterns (of signatures not disabled) find in its message the
  findings it gives, none of them hanging on a condition that fails;
- the previous hit line was alike in the same way: the same signatures' findings, from the
  same writer (the same process prefix, or none for both).

Any other hit line ends a run, so a restart (its start-up lines hold literals) or an error
between two stats lines has the next one reported again. The block scanner's fast path and
its full per-line path judge the same hit lines with this one judge (a record is left out of
the full path when every hit line of it was passed over), so both report the same findings.
The second half of a split scan starts from the key of the hit line before its lead-in
(BlockScanner.prime_repeats); a scan resumed from a checkpoint starts at the first line of
the run going on there (Runs.resume_point); a live source whose library is reloaded starts
new runs (its next stats line is reported again).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol

from logwatch.core.lines.benign import logger_header
from logwatch.core.lines.records import Record
from logwatch.core.signatures.matcher import CompiledPattern
from logwatch.core.signatures.prefilter import LiteralScanner

_HEADER = re.compile(logger_header(rb"INFO", writer=True))
MATCH_TIMEOUT_S = 0.05  # one line's budget for each pattern tried on it
# (the signatures whose findings the line gives, writer's process prefix or b"")
RepeatKey = tuple[tuple[str, ...], bytes]


class RunMatcher(Protocol):
    """What the judge asks of the library's matcher (core.signatures.matcher.Matcher)."""

    @property
    def run_literals(self) -> Mapping[int, tuple[CompiledPattern, ...]]: ...

    @property
    def disabled(self) -> Mapping[str, str]: ...  # signatures that ran over their budget

    def ran_over(self, pattern: CompiledPattern) -> None: ...


def line_key(buf: bytes, start: int, literal_ids: Iterable[int], matcher: RunMatcher
             ) -> RepeatKey | None:
    """The key under which the hit line starting at `start` repeats (see the module), or None
    when it is not a line that can be passed over."""
    patterns: list[CompiledPattern] = []
    for literal_id in literal_ids:
        found = matcher.run_literals.get(literal_id)
        if found is None:
            return None
        patterns.extend(p for p in found if p not in patterns)
    if not patterns:
        return None
    end = buf.find(b"\n", start)
    header = _HEADER.match(buf, start, end) if end >= 0 else None
    if header is None:
        return None
    raw = buf[header.end():end]
    if b"\r" in raw or b"\x1b" in raw:
        return None
    try:
        message = raw.decode()
    except UnicodeDecodeError:
        return None
    found_by: set[str] = set()  # each signature whose finding the line gives
    for pattern in patterns:
        signature = pattern.signature
        if signature.id in found_by:
            continue
        if signature.id in matcher.disabled:
            return None  # ran over before: its lines take the matcher's path, which skips it
        try:
            match = pattern.regex.search(message, timeout=MATCH_TIMEOUT_S)
        except TimeoutError:
            matcher.ran_over(pattern)  # counted as the matcher counts, disabled likewise
            return None
        if match is None:
            continue
        captures = {k: v for k, v in match.groupdict().items() if v is not None}
        if not signature.conditions_hold(captures):
            return None  # the signature's finding hangs on its numbers: never passed over
        found_by.add(signature.id)
    if not found_by:
        return None
    return tuple(sorted(found_by)), header.group("writer") or b""


class RunJudge:
    """Judges hit lines in order: True for a line alike the hit line before it."""

    def __init__(self, matcher: RunMatcher) -> None:
        self.matcher = matcher
        self.last: RepeatKey | None = None  # the key of the last hit line judged

    @property
    def active(self) -> bool:
        """Whether any signature of the library repeats once per run."""
        return bool(self.matcher.run_literals)

    def repeats(self, buf: bytes, start: int, literal_ids: Iterable[int]) -> bool:
        key = line_key(buf, start, literal_ids, self.matcher)
        alike = key is not None and key == self.last
        self.last = key
        return alike


def hit_lines(buf: bytes, first_line: int, scanner: LiteralScanner
              ) -> dict[int, tuple[int, set[int]]]:
    """The prefilter's hit lines in `buf` (which starts a line numbered `first_line`), less
    request-lifecycle lines: line number -> (where it starts, the literal ids on it), in
    line order."""
    found, _ = scanner.hits_outside_requests(buf, at_line_start=True)
    lines: dict[int, tuple[int, set[int]]] = {}
    lineno, pos = first_line, 0
    for offset, literal_id in found:
        lineno += scanner.newlines(buf, pos, offset)
        pos = offset
        if lineno in lines:
            lines[lineno][1].add(literal_id)
        else:
            lines[lineno] = (buf.rfind(b"\n", 0, offset) + 1, {literal_id})
    return lines


def passed_lines(buf: bytes, lines: dict[int, tuple[int, set[int]]], judge: RunJudge
                 ) -> set[int]:
    """The hit lines (`hit_lines`) the judge passes over, judged in order."""
    return {number for number, (start, ids) in lines.items()
            if judge.repeats(buf, start, ids)}


class Runs:
    """One source's runs, as the block scanner meets its hit lines: which to pass over, and
    where a resume may start (never inside a run)."""

    def __init__(self, matcher: RunMatcher, start_line: int) -> None:
        self.judge = RunJudge(matcher)
        self.active = self.judge.active
        self._judged_line = start_line - 1  # hit lines up to this one are judged
        # [bytes, first line, the line of the hit line that ended it or None] of each run
        # a resume point may still fall in
        self._spans: list[list[int | None]] = []
        # the full path: hit lines passed over, and the others
        self._passed: set[int] = set()
        self._kept: set[int] = set()

    def pass_over(self, buf: bytes, hits: list[tuple[int, int]],
                  literals: dict[int, set[int]], final: bool, buf_offset: int
                  ) -> tuple[list[tuple[int, int]], int]:
        """The fast path: (line number, start) `hits` less the lines alike the hit line before,
        and how many those were. Each hit line is judged once, in order, when its newline is
        at hand (its literals all found) or at the end of the input. `buf_offset`: where
        `buf` starts in what the scanner was fed."""
        kept: list[tuple[int, int]] = []
        passed = 0
        for index, hit in enumerate(hits):
            lineno, start = hit
            if lineno <= self._judged_line:
                kept.append(hit)
                continue
            if not final and buf.find(b"\n", start) < 0:  # the rest of it is still to come
                kept.extend(hits[index:])
                break
            self._judged_line = lineno
            if self.judge.repeats(buf, start, literals[lineno]):
                del literals[lineno]
                passed += 1
                continue
            kept.append(hit)
            spans = self._spans
            if spans and spans[-1][2] is None:
                spans[-1][2] = lineno
            if self.judge.last is not None:
                spans.append([buf_offset + start, lineno, None])
        return kept, passed

    def resume_point(self, point: tuple[int, int]) -> tuple[int, int]:
        """`point` (bytes, line), or the first line of a run going on there: a resume from
        there reports that line again (the same finding) and passes over the rest as the
        scan it resumes did."""
        for offset, first, end in self._spans:
            assert offset is not None and first is not None
            if first < point[1] and (end is None or point[1] < end):
                return offset, first
        return point

    def forget_before(self, line: int) -> None:
        """No resume point comes before `line` again."""
        if self._spans:
            self._spans = [s for s in self._spans if s[2] is None or s[2] > line]

    def judge_block(self, block: bytes, first_line: int, scanner: LiteralScanner) -> int:
        """The full path: judge a block's hit lines as the fast path does (each block is split
        into lines whole: it starts a line and its last piece ends one); how many passed."""
        lines = hit_lines(block, first_line, scanner)
        passed = passed_lines(block, lines, self.judge)
        self._passed |= passed
        self._kept.update(n for n in lines if n not in passed)
        return len(passed)

    def unpassed(self, records: list[Record]) -> list[Record]:
        """The full path: records less those whose hit lines were all passed over (the fast
        path never assembles those)."""
        if not self._passed:
            return records
        passed, kept = self._passed, self._kept
        return [r for r in records
                if not any(ln.lineno in passed for ln in r.lines)
                or any(ln.lineno in kept for ln in r.lines)]

    def prime(self, before: bytes, scanner: LiteralScanner) -> bool:
        """Take the state from the lines before the first one fed (`before` starts at a line
        start and ends where the feed begins): the key of its last hit line. False when it
        holds no hit line (the caller may look further back); True at once when no signature
        of the library repeats once per run (there is no state to take)."""
        if not self.active:
            return True
        lines = hit_lines(before, 1, scanner)
        if not lines:
            return False
        start, ids = lines[max(lines)]
        self.judge.last = line_key(before, start, ids, self.judge.matcher)
        return True
