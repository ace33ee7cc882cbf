"""The fallback on one record: failures no specific signature explains still make a finding.

The generic signatures (`signatures/generic/`, category `unrecognised`, ids `generic.*`) match
what any failure looks like: an exception ending a traceback, a process that died or hit an
exception, an ERROR line. On one record a specific signature wins and the generic findings are
dropped; at most one generic finding stays, exceptions first. What the fallback does to a whole
launch (demoted, promoted, an exit-status incident) is core.launches.unrecognised's.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime

from logwatch.core.lines.assemble import cut_at_head, starts_traceback
from logwatch.core.lines.records import Record
from logwatch.core.lines.vllm_format import parse_line
from logwatch.core.signatures.findings import Finding
from logwatch.core.signatures.frame_areas import FRAME, area_of, vllm_path
from logwatch.core.signatures.placed import ERROR_LINE, UNCAUGHT, place
from logwatch.core.signatures.signature import (
    CONSEQUENCE_CATEGORIES,
    FALLBACK_CATEGORY,
    Signature,
)
from logwatch.core.signatures.vocabulary import Vocabulary

PROCESS_DIED = "generic.process_died"
TRACEBACK_CUT = "generic.traceback_cut"
# On one record, the first of these that holds is kept (an exception says more than its line).
PRECEDENCE = (UNCAUGHT, PROCESS_DIED, ERROR_LINE, TRACEBACK_CUT)
# Findings whose rule needs the whole record, its true first and last lines: where a scanning
# window or a resume point may have cut the record (core.signatures.block_scan), they are not
# made.
NEEDS_WHOLE_RECORD = frozenset({TRACEBACK_CUT})
ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL"})
QUIET_LEVELS = frozenset({"DEBUG", "INFO", "WARNING"})
VLLM_KINDS = frozenset({"vllm", "prefix", "uvicorn"})  # uvicorn: the API server's access
SAMPLE_LINES = 5000  # lines of an input's head judged for vLLM output
# What could be a traceback's exception line: a class name (CamelCase, after dotted module
# names), alone or before a colon; not a code line, a markdown fence or a wrapped name's tail.
_EXCEPTION_LIKE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::(?:\s.*)?)?\s*$")


def is_generic(signature: Signature) -> bool:
    """A fallback rule (`generic.*`), as opposed to one that names a specific cause."""
    return signature.category == FALLBACK_CATEGORY


def innermost_frame(record: Record, before_line: int) -> str | None:
    """The traceback's innermost vLLM frame before `before_line`: "vllm/x.py:12 in f"."""
    found = None
    for line in record.lines:
        if line.lineno >= before_line and found is not None:
            break
        match = FRAME.match(line.message)
        if match is None:
            continue
        path = vllm_path(match.group("path"))
        if path is not None:
            found = f"{path}:{match.group('line')} in {match.group('func')}"
    return found


def ends_without_exception(record: Record) -> bool:
    """Whether a record holds a traceback's frames and nothing after its last frame but the
    frame's code lines: its exception line was never read (cut, or not pasted)."""
    last_frame = None
    for index, line in enumerate(record.lines):
        if FRAME.match(line.message):
            last_frame = index
    if last_frame is None:
        return False
    return not any(_EXCEPTION_LIKE.match(line.message) for line in record.lines[last_frame + 1:])


def with_area(finding: Finding, record: Record) -> Finding:
    """A fallback finding with the innermost vLLM frame of its record before it and the area
    of vLLM its frames name (core.signatures.frame_areas), where the record has them."""
    captures = dict(finding.captures)
    frame = innermost_frame(record, finding.lineno if finding.signature.id == UNCAUGHT
                            else record.last_lineno + 1)
    if frame is not None:
        captures["frame"] = frame
    area = area_of(ln.message for ln in record.lines
                   if finding.signature.id != UNCAUGHT or ln.lineno <= finding.lineno)
    if area is not None:
        captures["area"] = area.id
        captures["area_title"] = area.title
    return replace(finding, captures=captures) if captures != finding.captures else finding


def _holds(finding: Finding, record: Record) -> bool:
    """The generic rule's own condition beyond its pattern."""
    level = record.first.level
    if finding.signature.id == UNCAUGHT:
        return level not in QUIET_LEVELS and (cut_at_head(record) or any(
            starts_traceback(ln.message) for ln in record.lines if ln.lineno < finding.lineno))
    if finding.signature.id == ERROR_LINE:
        # Not an indented line: it continues a record (a traceback's frame, a message's next
        # line), and one that heads a record is the part after a cut, such as a daemon's
        # resume point. Not a traceback's first line: the exception ending it is the error
        # (UNCAUGHT's), and a traceback cut short or printed elsewhere has none here.
        message = finding.matched.message
        return (finding.matched.level in ERROR_LEVELS and message[:1] not in (" ", "\t")
                and not starts_traceback(message))
    if finding.signature.id == TRACEBACK_CUT:
        # the record's first frame, in a record logged at ERROR (or printed raw, with vLLM's
        # frames) that ends without its exception
        first_frame = next((ln for ln in record.lines if FRAME.match(ln.message)), None)
        return (first_frame is not None and finding.lineno == first_frame.lineno
                and level not in QUIET_LEVELS
                and (level in ERROR_LEVELS or innermost_frame(record, 1 << 62) is not None)
                and ends_without_exception(record))
    return True


def settle_record(findings: list[Finding], record: Record,
                  vocabulary: Vocabulary | None = None) -> list[Finding]:
    """One record's findings with the fallback applied: generic findings give way to a
    specific cause above info on the record, or to any specific finding on their own line; at
    most one generic finding stays (exceptions first), placed where it can be
    (core.signatures.placed: named from vLLM's `vocabulary`, or put in its area)."""
    generic = [f for f in findings if is_generic(f.signature)]
    if not generic:
        return findings
    kept = [f for f in findings if not is_generic(f.signature)]
    if any(f.signature.severity_rank >= 1 and f.signature.category not in CONSEQUENCE_CATEGORIES
           for f in kept):
        return kept
    # a consequence ("EngineCore failed to start") explains only its own line: the exception
    # at the end of the traceback it heads is still the cause to report
    explained = {f.lineno for f in kept if f.signature.severity_rank >= 1}
    order = {sig_id: i for i, sig_id in enumerate(PRECEDENCE)}
    for finding in sorted(generic, key=lambda f: order.get(f.signature.id, len(order))):
        if finding.lineno not in explained and _holds(finding, record):
            if finding.signature.id in (UNCAUGHT, TRACEBACK_CUT):
                finding = with_area(finding, record)
            kept.append(place(finding, record, vocabulary))
            break
    return kept


def vllm_output_seen(sample: str, reference: datetime, source: str = "sample") -> bool:
    """Whether a text holds a line vLLM (or one of its processes) wrote: a logger header
    (level and time), a `(Process pid=N)` prefix or an access line of its API server.
    /etc/passwd, an empty file and journalctl's "-- No entries --" hold none."""
    for number, raw in enumerate(sample.splitlines()[:SAMPLE_LINES], 1):
        if raw.strip() and parse_line(source, number, raw, reference).kind in VLLM_KINDS:
            return True
    return False
