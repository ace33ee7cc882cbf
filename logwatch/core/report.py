"""The triage report: incidents as a JSON-ready dict, and as text for a terminal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logwatch.core.findings import Finding
from logwatch.core.incidents import Incident

SEVERITY_COLOURS = {"critical": "1;35", "error": "1;31", "warning": "33", "info": "2"}


def _seen(finding: Finding) -> dict[str, Any]:
    return {"source": finding.source, "line": finding.lineno,
            "time": finding.time.isoformat(sep=" ") if finding.time else None}


def incident_dict(incident: Incident) -> dict[str, Any]:
    sig = incident.signature
    return {
        "signature": sig.id,
        "signature_version": sig.version,
        "title": sig.title,
        "category": sig.category,
        "severity": sig.severity,
        "fatal": sig.fatal,
        "status": sig.status,
        "remedy": sig.remedy,
        "count": incident.count,
        "copies": incident.copies,
        "first_seen": _seen(incident.first),
        "last_seen": _seen(incident.last),
        "processes": sorted(incident.processes),
        "ranks": sorted(incident.ranks),
        "captures": dict(incident.captures),
        "evidence": [{"source": e.source, "line": e.lineno, "text": e.text}
                     for e in incident.evidence],
        "explanation": sig.explain(incident.captures),
    }


def report_dict(library_version: str, incidents: list[Incident], root_cause: int | None,
                stats: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "library_version": library_version,
        "incidents": [incident_dict(i) for i in incidents],
        "root_cause": root_cause,
        "stats": dict(stats),
    }


def _paint(text: str, code: str, colour: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if colour else text


def _when(seen: Mapping[str, Any]) -> str:
    time = f"{seen['time']} " if seen.get("time") else ""
    return f"{time}({seen['source']}:{seen['line']})"


def render_text(report: Mapping[str, Any], colour: bool = False, width: int = 100) -> str:
    """A report an operator reads top to bottom: the root cause first, then the rest."""
    stats = report["stats"]
    out: list[str] = []
    incidents = report["incidents"]
    fatal = [i for i in incidents if i["fatal"]]
    head = (f"logwatch scan: {stats.get('lines', 0):,} lines in {stats.get('files', 0)} "
            f"input(s), library {report['library_version']}, {len(incidents)} incident(s)"
            f"{', ' + str(len(fatal)) + ' fatal' if fatal else ''}")
    out.append(_paint(head, "1", colour))
    if not incidents:
        out.append("No known failure signature found.")
    for index, inc in enumerate(incidents):
        out.append("")
        if index == report["root_cause"]:
            out.append(_paint("ROOT CAUSE", "1;4", colour))
        elif index == 1 and report["root_cause"] == 0:
            out.append(_paint("OTHER INCIDENTS", "1;4", colour))
        badge = _paint(f"[{inc['severity'].upper()}]", SEVERITY_COLOURS[inc["severity"]], colour)
        fatal_mark = " FATAL" if inc["fatal"] else ""
        out.append(f"{badge}{fatal_mark} {inc['title']}")
        out.append(f"  signature {inc['signature']} v{inc['signature_version']} "
                   f"({inc['category']}, {inc['status']})")
        copies = f" (+{inc['copies']} copies)" if inc["copies"] else ""
        out.append(f"  seen {inc['count']}x{copies}, first {_when(inc['first_seen'])}"
                   + (f", last {_when(inc['last_seen'])}" if inc["count"] > 1 else ""))
        if inc["processes"] or inc["ranks"]:
            parts = []
            if inc["processes"]:
                parts.append("processes " + ", ".join(inc["processes"]))
            if inc["ranks"]:
                parts.append("ranks " + ", ".join(inc["ranks"]))
            out.append("  " + "; ".join(parts))
        if inc["captures"]:
            captures = "  ".join(f"{k}={v}" for k, v in inc["captures"].items())
            out.append(f"  captured: {_clip(captures, width - 12)}")
        out.append("  evidence:")
        for ev in inc["evidence"]:
            out.append(_paint(f"    {ev['source']}:{ev['line']}: ", "2", colour)
                       + _clip(ev["text"], width + 40))
        out.append("  why:")
        out.extend("    " + ln for ln in _wrap(inc["explanation"], width - 4))
    timeouts = stats.get("match_timeouts") or {}
    if timeouts:
        out.append("")
        out.append("warning: pattern time bound hit (signature: count): "
                   + ", ".join(f"{k}: {v}" for k, v in timeouts.items()))
    return "\n".join(out) + "\n"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    lines: list[str] = []
    for paragraph in text.split("\n"):
        lines.extend(textwrap.wrap(paragraph, width) or [""])
    return lines
