"""The triage report: incidents as a JSON-ready dict, and as text for a terminal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logwatch.core.findings import Finding
from logwatch.core.incidents import Incident
from logwatch.core.visible import visible_data

SEVERITY_COLOURS = {"critical": "1;35", "error": "1;31", "warning": "33", "info": "2"}
# Report fields that are prose the renderer wraps into lines itself: their newlines stay.
PROSE_FIELDS = frozenset({"explanation", "summary", "details", "why"})


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
        "key": list(incident.key),
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
    """A report an operator reads top to bottom: the root cause, other problems, then the
    context (versions, backends, lifecycle) one line each. Every string from the report (log
    text, captures, file names) is rendered visibly: the terminal shows control characters,
    and obeys only the colours added here."""
    report = visible_data(report, PROSE_FIELDS)
    stats = report["stats"]
    incidents = report["incidents"]
    root = report["root_cause"]
    fatal = sum(1 for i in incidents if i["fatal"])
    out = [_paint(f"logwatch scan: {stats.get('lines', 0):,} lines in {stats.get('files', 0)} "
                  f"input(s), signature library {report['library_version']}", "1", colour)]
    if root is not None:
        out.append(f"{fatal} fatal incident(s); root cause: {incidents[root]['title']}")
    elif any(i["severity"] in ("error", "critical") for i in incidents):
        out.append("No fatal incident, but errors below need attention.")
    else:
        out.append("No fatal incident and no error: vLLM looks healthy in this log.")

    problems = [(n, i) for n, i in enumerate(incidents) if i["severity"] != "info" and n != root]
    context = [i for n, i in enumerate(incidents) if i["severity"] == "info" and n != root]
    if root is not None:
        out += ["", _paint("ROOT CAUSE", "1;4", colour)]
        out += _incident_block(incidents[root], colour, width, max_evidence=8)
    diagnoses = report.get("diagnoses") or []
    if diagnoses:
        out += ["", _paint("DIAGNOSIS", "1;4", colour)]
        for diag in diagnoses:
            out += _diagnosis_block(diag, colour, width)
            out.append("")
        out.pop()
    if problems:
        out += ["", _paint("OTHER PROBLEMS" if root is not None else "PROBLEMS", "1;4", colour)]
        for _, inc in problems:
            out += _incident_block(inc, colour, width, max_evidence=3)
            out.append("")
        out.pop()
    snapshots = report.get("snapshots") or {}
    if snapshots and (diagnoses or root is not None):
        out += ["", _paint("CONFIGURATION", "1;4", colour)]
        for digest, snap in snapshots.items():
            out.extend(_snapshot_lines(digest, snap, width))
    if context:
        out += ["", _paint("CONTEXT", "1;4", colour)]
        for inc in context:
            captures = " ".join(f"{k}={v}" for k, v in inc["captures"].items())
            seen = f"{inc['count']}x" if inc["count"] > 1 else f"line {inc['first_seen']['line']}"
            out.append(_clip(f"  {inc['title']}: {captures or '-'} ({seen})", width + 20))
    timeouts = stats.get("match_timeouts") or {}
    if timeouts:
        out += ["", "warning: the pattern time bound was hit (signature: count): "
                + ", ".join(f"{k}: {v}" for k, v in timeouts.items())]
    return "\n".join(out) + "\n"


def _snapshot_lines(digest: str, snap: Mapping[str, Any], width: int) -> list[str]:
    launch, model, gpu = snap.get("launch") or {}, snap.get("model") or {}, snap.get("gpu") or {}
    quant = model.get("quant") or {}
    mtp = model.get("mtp") or {}
    parts = [f"model {model.get('path') or launch.get('model') or '?'}"]
    if quant:
        parts.append(f"{quant.get('scheme')}"
                     + (" via Marlin" if quant.get("marlin_on_this_gpu") else ""))
    if launch.get("tensor_parallel_size"):
        parts.append(f"TP {launch['tensor_parallel_size']}")
    spec = launch.get("speculative_config")
    if spec:
        parts.append("MTP " + ("covered" if mtp.get("covered") else "NOT covered" if mtp
                               else "on (draft layout unknown)"))
    cap = gpu.get("capability")
    parts.append(f"GPU {gpu.get('name') or ''} cc {cap / 10:.1f}".replace("  ", " ")
                 if cap else "GPU unknown")
    if snap.get("vllm_version"):
        parts.append(f"vLLM {snap['vllm_version']}")
    out = [_clip(f"  {digest}: " + ", ".join(parts), width + 20)]
    out.extend(_clip(f"    problem: {p}", width + 20) for p in snap.get("problems") or [])
    return out


_MARKS = {True: ("yes", "32"), False: ("no ", "31"), None: (" ? ", "33")}


def _diagnosis_block(diag: Mapping[str, Any], colour: bool, width: int) -> list[str]:
    out = [_paint(diag["title"], "1", colour)
           + f"  (confidence {diag['confidence']:.0%}"
           + (f", from {diag['signature']})" if diag["signature"] else ")")]
    out.extend("  " + ln for ln in _wrap(diag["summary"], width - 2))
    for detail in diag["details"]:
        wrapped = _wrap(detail, width - 6)
        out.append("    - " + wrapped[0])
        out.extend("      " + ln for ln in wrapped[1:])
    if diag["remedies"]:
        out.append("  what fixes it:")
        for remedy in diag["remedies"]:
            mark, code = _MARKS[remedy["applicable"]]
            lines = _wrap(f"{remedy['summary']} ({remedy['why']})", width - 12)
            out.append(f"    [{_paint(mark, code, colour)}] " + lines[0])
            out.extend("          " + ln for ln in lines[1:])
    return out


def _incident_block(inc: Mapping[str, Any], colour: bool, width: int,
                    max_evidence: int) -> list[str]:
    badge = _paint(f"[{inc['severity'].upper()}]", SEVERITY_COLOURS[inc["severity"]], colour)
    out = [f"{badge}{' FATAL' if inc['fatal'] else ''} {inc['title']}",
           f"  signature {inc['signature']} v{inc['signature_version']} "
           f"({inc['category']}, {inc['status']}), remedy: {inc['remedy']}"]
    copies = f" (+{inc['copies']} copies)" if inc["copies"] else ""
    out.append(f"  seen {inc['count']}x{copies}, first {_when(inc['first_seen'])}"
               + (f", last {_when(inc['last_seen'])}" if inc["count"] > 1 else ""))
    where = []
    if inc["processes"]:
        where.append("processes " + ", ".join(inc["processes"]))
    if inc["ranks"]:
        where.append("ranks " + ", ".join(inc["ranks"]))
    if where:
        out.append("  " + "; ".join(where))
    if inc["captures"]:
        captures = "  ".join(f"{k}={v}" for k, v in inc["captures"].items())
        out.append(f"  captured: {_clip(captures, width - 12)}")
    evidence = inc["evidence"]
    shown = evidence if len(evidence) <= max_evidence else evidence[-max_evidence:]
    out.append("  evidence:" + (f" (last {len(shown)} of {len(evidence)} lines)"
                                if len(shown) < len(evidence) else ""))
    for ev in shown:
        out.append(_paint(f"    {ev['source']}:{ev['line']}: ", "2", colour)
                   + _clip(ev["text"], width + 40))
    out.append("  why:")
    out.extend("    " + ln for ln in _wrap(inc["explanation"], width - 4))
    return out


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    lines: list[str] = []
    for paragraph in text.split("\n"):
        lines.extend(textwrap.wrap(paragraph, width) or [""])
    return lines
