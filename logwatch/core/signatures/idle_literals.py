"""Literals that do not discriminate: where a signature's literal lands in ordinary vLLM
traffic on lines none of its patterns match.

The literal pass (core.signatures.prefilter) sends every line holding a literal down the
per-hit path: the line parsed, its record proven or assembled, the patterns tried, tens of
microseconds each. A literal that ordinary traffic holds on line after line (`error` in a
logged prompt, `Aborted` in every aborted request) costs that on each, for nothing; on the
shared yardstick's serving log such hits were once 99.8% of all. Request-lifecycle lines are
passed over before that path (core.lines.benign), so what is counted here is what is left:
hits on other lines of healthy traffic where no pattern of the literal's signatures
matches. The lint (core.signatures.lint) reports a literal whose idle hits pass
IDLE_PER_MB per megabyte of the traffic it is given (the healthy samples, the shared
generator's serving log): its pattern has a rarer piece to be found by.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.matcher import Matcher
from logwatch.core.signatures.repeats import RunJudge, hit_lines, passed_lines
from logwatch.core.signatures.signature import Signature

# Idle hits per MB of healthy traffic a literal may cost: each takes about 50 us of Python
# (README, Speed) where grep reads a MB in about 1.4 ms, so 2 per MB is 7% of that. A
# literal of every 10-second stats line (`Running: `) is 14 per MB of the yardstick's
# serving log; the shipped library has none idle there (tests/test_idle_literals.py). Fewer
# than MIN_IDLE hits say nothing (a small corpus).
IDLE_PER_MB = 2.0
MIN_IDLE = 5
REFERENCE = datetime(2026, 1, 1)  # year inference only: healthy traffic has no verdict


@dataclass(frozen=True, slots=True)
class IdleLiteral:
    literal: str
    signatures: tuple[str, ...]  # whose patterns list it
    idle: int  # hits on lines where none of their patterns matched
    per_mb: float
    example: str  # one such line, cut

    def describe(self) -> str:
        return (f"literal {self.literal!r} ({', '.join(self.signatures)}) lands on "
                f"{self.per_mb:.0f} lines per MB of healthy vLLM traffic that none of its "
                f"patterns match ({self.idle:,} in all; e.g. {self.example!r}): each costs "
                f"the whole per-hit path; find the pattern by a rarer piece of it")


def idle_literals(signatures: Sequence[Signature], traffic: bytes,
                  limit: float = IDLE_PER_MB, least: int = MIN_IDLE) -> list[IdleLiteral]:
    """The literals whose idle hits in `traffic` pass `limit` per MB (and number at least
    `least`), the worst first."""
    if not traffic:
        return []
    matcher = Matcher(signatures, disable_after=None)
    # whose patterns each literal finds (the matcher's own map of literal to patterns)
    owners = [{p.signature.id for p in matcher.candidates("", [i])}
              for i in range(len(matcher.literals))]
    scanner = BlockScanner(matcher, "traffic", REFERENCE, whole_input=True)
    findings = scanner.feed(traffic) + scanner.finish()
    found: dict[int, set[str]] = defaultdict(set)  # line -> signatures whose record holds it
    for finding in findings:
        for line in range(finding.record_lineno, finding.record_last_lineno + 1):
            found[line].add(finding.signature.id)
    lines = hit_lines(traffic, 1, matcher.scanner)
    # a repeating status line's run is passed over before the per-hit path: it costs nothing
    passed = passed_lines(traffic, lines, RunJudge(matcher))
    idle: Counter[int] = Counter()
    example: dict[int, str] = {}
    for line, (start, literal_ids) in lines.items():
        if line in passed:
            continue
        for literal_id in literal_ids:
            if not owners[literal_id] & found.get(line, set()):
                idle[literal_id] += 1
                if literal_id not in example:
                    end = traffic.find(b"\n", start)
                    text = traffic[start:end if end >= 0 else len(traffic)]
                    example[literal_id] = text[:120].decode("utf-8", "replace")
    megabytes = len(traffic) / 1e6
    out = [IdleLiteral(matcher.literals[i], tuple(sorted(owners[i])), count,
                       count / megabytes, example[i])
           for i, count in idle.items() if count >= least and count / megabytes > limit]
    return sorted(out, key=lambda x: -x.idle)
