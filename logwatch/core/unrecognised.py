"""The fallback: failures no specific signature explains are still incidents, never "healthy".

The generic signatures (`signatures/generic/`, category `unrecognised`, ids `generic.*`) match
what any failure looks like: an exception ending a traceback, a process that died or hit an
exception, an ERROR line. Here is what makes them a fallback, for the scan and the daemon alike:
on one record, a specific signature wins and the generic findings are dropped; a launch whose
failure a specific signature explains, or that came up and kept serving, shows its generic
incidents demoted (never a second root cause); a launch with no fatal incident that never came
up promotes its unrecognised error; a `run` child that exited non-zero with nothing recognised
gets an exit-status incident.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from logwatch.core.assemble import cut_at_head, starts_traceback
from logwatch.core.findings import Finding
from logwatch.core.incidents import CONSEQUENCE_CATEGORIES, FALLBACK_CATEGORY, Incident
from logwatch.core.launches import FAILED, SERVING, STOPPED, Launch
from logwatch.core.records import Record
from logwatch.core.signature import Signature
from logwatch.core.vllm_format import parse_line

UNCAUGHT = "generic.uncaught_exception"
PROCESS_DIED = "generic.process_died"
ERROR_LINE = "generic.error_line"
EXIT_STATUS = "generic.exit_status"
# On one record, the first of these that holds is kept (an exception says more than its line).
PRECEDENCE = (UNCAUGHT, PROCESS_DIED, ERROR_LINE)
ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL"})
QUIET_LEVELS = frozenset({"DEBUG", "INFO", "WARNING"})
VLLM_KINDS = frozenset({"vllm", "prefix", "uvicorn"})  # uvicorn: the API server's access
SAMPLE_LINES = 5000  # lines of an input's head judged for vLLM output
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')

# Not a pattern, so not a file: a child's non-zero exit that nothing in its output explains.
EXIT_SIGNATURE = Signature(
    id=EXIT_STATUS, version=1, status="stable", severity="error", fatal=True,
    category=FALLBACK_CATEGORY,
    title="Unrecognised fatal error: the process exited with a failure status",
    patterns=(), remedy="investigate", examples=(), counter_examples=(),
    key_captures=("exit_code",), vllm_versions="any",
    explanation="The command exited with status {exit_code} and no signature recognised "
                "anything in its output that explains it. Read the last lines it printed; "
                "a recurring cause can become a signature (`logwatch signatures draft`).")


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


def cause_rank(incident: Incident) -> int:
    """Among fatal incidents that are causes: specific ones before the fallback."""
    return 1 if is_generic(incident.signature) else 0


def settle_launch(launch: Launch, incidents: list[Incident], root: int | None
                  ) -> tuple[list[Incident], int | None]:
    """A launch's incidents with the fallback applied (see the module docstring)."""
    rooted = incidents[root] if root is not None else None
    if rooted is not None and not is_generic(rooted.signature):
        return [i if i is rooted else _demoted(i) for i in incidents], root
    if rooted is not None and launch.outcome in (SERVING, STOPPED):
        # the server came up and kept going: an unrecognised error is one to look at, not
        # the end of the launch
        return [_demoted(i) for i in incidents], None
    if rooted is not None:
        return incidents, root
    if any(i.signature.fatal for i in incidents):
        return incidents, root
    errors = [i for i in incidents if i.signature.id == ERROR_LINE]
    if errors and launch.outcome not in (SERVING, STOPPED):
        promoted = replace(errors[0], signature=replace(errors[0].signature, fatal=True))
        rest = [i for i in incidents if i is not errors[0]]
        return [promoted, *rest], 0
    if launch.outcome == FAILED and launch.exit_code not in (None, 0):
        return [exit_incident(launch), *incidents], 0
    return incidents, root


def _demoted(incident: Incident) -> Incident:
    """A fallback incident shown but not fatal; any other incident as it is."""
    if not (is_generic(incident.signature) and incident.signature.fatal):
        return incident
    return replace(incident, signature=replace(incident.signature, fatal=False))


def exit_incident(launch: Launch) -> Incident:
    """The incident of a child's failure status that nothing in its output explained."""
    code = str(launch.exit_code)
    text = f"the process exited with status {code}; no signature recognised its output"
    finding = Finding.restored(EXIT_SIGNATURE, {"exit_code": code}, launch.source,
                               max(launch.last_line, launch.start_line), text, None, None,
                               None, None)
    return Incident(EXIT_SIGNATURE, (f"exit_code={code}",), finding, finding,
                    evidence=list(finding.evidence))


def synthetic(incidents: Sequence[Incident]) -> list[Incident]:
    """Incidents no finding backs (a store writes their rows itself)."""
    return [i for i in incidents if i.signature.id == EXIT_STATUS]


def vllm_output_seen(sample: str, reference: datetime, source: str = "sample") -> bool:
    """Whether a text holds a line vLLM (or one of its processes) wrote: a logger header
    (level and time), a `(Process pid=N)` prefix or an access line of its API server.
    /etc/passwd, an empty file and journalctl's "-- No entries --" hold none."""
    for number, raw in enumerate(sample.splitlines()[:SAMPLE_LINES], 1):
        if raw.strip() and parse_line(source, number, raw, reference).kind in VLLM_KINDS:
            return True
    return False
