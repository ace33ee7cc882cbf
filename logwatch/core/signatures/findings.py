"""Findings (a signature matched on a record) and the evidence lines that prove them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from logwatch.core.lines.fast_init import fast_init
from logwatch.core.lines.normalize import strip_colour, terminal_text
from logwatch.core.lines.records import ParsedLine, Record
from logwatch.core.lines.vllm_format import process_role
from logwatch.core.safe_text.redact import redact
from logwatch.core.signatures.signature import Signature

MAX_EVIDENCE_CHARS = 400
MAX_EVIDENCE_LINES_OF_ONE = 4  # a finding shows its record's first line, a frame, the line
# after it and the matched line
CUT_MARKER = " …[cut]"


@dataclass(frozen=True, slots=True)
class Evidence:
    source: str
    lineno: int
    text: str


@fast_init
@dataclass(frozen=True, slots=True)
class Finding:
    signature: Signature
    captures: dict[str, str]
    source: str
    lineno: int  # the line where the pattern matched
    record_lineno: int
    record_last_lineno: int
    kind: str  # the matched line's grammar: vllm, prefix, raw, ...
    process: str | None
    pid: int | None
    rank: str | None
    time: datetime | None
    record: Record
    matched: ParsedLine

    @property
    def role(self) -> str | None:
        return process_role(self.process)

    @property
    def evidence(self) -> tuple[Evidence, ...]:
        """Computed when asked: most findings only count, a few are shown."""
        return select_evidence(self.record, self.matched)

    @classmethod
    def restored(cls, signature: Signature, captures: dict[str, str], source: str, line: int,
                 text: str, time: datetime | None, process: str | None, pid: int | None,
                 rank: str | None) -> Finding:
        """A finding as the history stored it (its line's text, secrets masked already):
        enough to count, order and show it again, e.g. for a launch a restarted daemon goes
        on with."""
        parsed = ParsedLine(source, line, text, text, "stored", process, pid, rank, time=time)
        return cls(signature, captures, source, line, line, line, "stored", process, pid,
                   rank, time, Record([parsed]), parsed)


def evidence_text(line: ParsedLine) -> str:
    """A line as an operator should see it: no colour, no secrets, not absurdly long."""
    text = redact(strip_colour(terminal_text(line.raw)))
    if len(text) > MAX_EVIDENCE_CHARS:
        text = text[:MAX_EVIDENCE_CHARS] + CUT_MARKER
    return text


def select_evidence(record: Record, matched: ParsedLine) -> tuple[Evidence, ...]:
    """The record's first line, the last frame before the match, and the matched line."""
    return tuple(Evidence(ln.source, ln.lineno, evidence_text(ln))
                 for ln in _evidence_lines(record, matched))


def kept(finding: Finding) -> Finding:
    """The finding as an incident keeps it (its first and last, for as long as the launch
    lasts): its record cut to the lines its evidence shows, which give the same evidence
    again. A traceback's record is tens of lines; a crash loop's launches held them all."""
    if len(finding.record.lines) <= MAX_EVIDENCE_LINES_OF_ONE:
        return finding
    lines = _evidence_lines(finding.record, finding.matched)
    return replace(finding, record=Record(lines, finding.record.known_message))


def _evidence_lines(record: Record, matched: ParsedLine) -> list[ParsedLine]:
    chosen: list[ParsedLine] = []
    if record.first is not matched:
        chosen.append(record.first)
    index = next((i for i, ln in enumerate(record.lines) if ln is matched), 0)
    for ln in reversed(record.lines[1:index]):
        if ln.message.lstrip().startswith('File "'):
            chosen.append(ln)
            following = record.lines[record.lines.index(ln) + 1]
            if following is not matched and following.message[:1] == " ":
                chosen.append(following)
            break
    chosen.append(matched)
    return chosen
