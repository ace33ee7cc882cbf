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
from logwatch.core.signatures.signature import (
    CONSEQUENCE_CATEGORIES,
    FALLBACK_CATEGORY,
    Signature,
)

UNCAUGHT = "generic.uncaught_exception"
PROCESS_DIED = "generic.process_died"
ERROR_LINE = "generic.error_line"
# On one record, the first of these that holds is kept (an exception says more than its line).
PRECEDENCE = (UNCAUGHT, PROCESS_DIED, ERROR_LINE)
ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL"})
QUIET_LEVELS = frozenset({"DEBUG", "INFO", "WARNING"})
VLLM_KINDS = frozenset({"vllm", "prefix", "uvicorn"})  # uvicorn: the API server's access
SAMPLE_LINES = 5000  # lines of an input's head judged for vLLM output
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')


def is_generic(signature: Signature) -> bool:
    """A fallback rule (`generic.*`), as opposed to one that names a specific cause."""
    return signature.category == FALLBACK_CATEGORY


def innermost_frame(record: Record, before_line: int) -> str | None:
    """The traceback's innermost vLLM frame before `before_line`: "vllm/x.py:12 in f"."""
    found = None
    for line in record.lines:
        if line.lineno >= before_line and found is not None:
            break
        match = _FRAME.match(line.message)
        if match is None:
            continue
        path = match.group("path").replace("\\", "/")
        cut = path.rfind("/vllm/")
        if cut >= 0 or path.startswith("vllm/"):
            found = f"{path[cut + 1:] if cut >= 0 else path}:{match.group('line')} in " \
                    f"{match.group('func')}"
    return found


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
    return True


def settle_record(findings: list[Finding], record: Record) -> list[Finding]:
    """One record's findings with the fallback applied: generic findings give way to a
    specific cause above info on the record, or to any specific finding on their own line; at
    most one generic finding stays (exceptions first)."""
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
            if finding.signature.id == UNCAUGHT:
                frame = innermost_frame(record, finding.lineno)
                if frame is not None:
                    finding = replace(finding, captures={**finding.captures, "frame": frame})
            kept.append(finding)
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
