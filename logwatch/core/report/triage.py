"""The triage report as a JSON-ready dict: launches, incidents, diagnoses and the verdict
(core/report/text.py renders it for a terminal)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from logwatch.core.diagnosis.analysis import LaunchAnalysis
from logwatch.core.diagnosis.kernel_path import observed_kernels
from logwatch.core.launches.incidents import Incident, problem_key
from logwatch.core.report.timestamps import written
from logwatch.core.report.verdict import evidence, judge
from logwatch.core.signatures.findings import Finding
from logwatch.core.snapshot.model import Snapshot

PROSE_FIELDS = frozenset({"explanation", "summary", "details", "why"})


def _seen(finding: Finding) -> dict[str, Any]:
    return {"source": finding.source, "line": finding.lineno,
            "time": written(finding.time) if finding.time else None}


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


def report_dict(library_version: str, analyses: Sequence[LaunchAnalysis],
                stats: Mapping[str, Any], snapshot_hash: Callable[[Snapshot], str]
                ) -> dict[str, Any]:
    """The report: launches newest first, each with its incidents (root cause first) and
    diagnoses. `incidents`, `diagnoses` and `root_cause` index the whole report; the root
    cause is the newest launch's that has one."""
    incidents: list[dict[str, Any]] = []
    diagnoses: list[dict[str, Any]] = []
    launches: list[dict[str, Any]] = []
    root_cause: int | None = None
    for number, analysis in enumerate(analyses):
        launch, base = analysis.launch, len(incidents)
        digest = snapshot_hash(analysis.snapshot)
        for incident in analysis.incidents:
            incidents.append({**incident_dict(incident), "launch": number, "snapshot": digest})
        for diag in analysis.diagnoses:
            entry = diag.to_dict()
            if entry.get("incident") is not None:
                entry["incident"] += base
            diagnoses.append({**entry, "launch": number})
        root = None if analysis.root is None else base + analysis.root
        if root_cause is None:
            root_cause = root
        launches.append({
            "source": launch.source, "number": launch.number, "start_line": launch.start_line,
            "last_line": launch.last_line, "seen_start": launch.seen_start,
            "started": written(launch.started) if launch.started else None,
            "outcome": launch.outcome, "served": launch.served, "exit_code": launch.exit_code,
            "snapshot": digest,
            "kernels": [k.to_dict() for k in observed_kernels(incidents[base:])],
            "root_cause": root, "incidents": list(range(base, len(incidents))),
            "fatal_incidents": sum(1 for i in analysis.incidents if i.signature.fatal)})
    # each launch's earlier launches that failed of the same problem: counted oldest first
    # (the list is newest first), in one pass however many launches a backlog holds
    failed: dict[str, int] = {}
    for entry in reversed(launches):
        root = entry["root_cause"]
        fingerprint = problem_of(incidents[root]) if root is not None else None
        entry["failed_before"] = failed.get(fingerprint, 0) if fingerprint is not None else 0
        if fingerprint is not None:
            failed[fingerprint] = failed.get(fingerprint, 0) + 1
    _index_latent(launches, diagnoses)
    judged = judge(evidence(incidents, root_cause, launches, stats))
    return {
        "library_version": library_version,
        "launches": launches,
        "incidents": incidents,
        "root_cause": root_cause,
        "diagnoses": diagnoses,
        "stats": dict(stats),
        "verdict": judged.name,
        "verdict_reason": judged.reason,
    }


def problem_of(incident: Mapping[str, Any]) -> str:
    """The problem an incident of the report is (the same over launches)."""
    return problem_key(incident["signature"], incident["key"])


def _index_latent(launches: list[dict[str, Any]], diagnoses: Sequence[Mapping[str, Any]]
                  ) -> None:
    """Each launch's `latent_problems`: indices into the report's diagnoses."""
    latent: dict[Any, list[int]] = {}
    for i, d in enumerate(diagnoses):
        if d.get("latent"):
            latent.setdefault(d.get("launch"), []).append(i)
    for number, entry in enumerate(launches):
        entry["latent_problems"] = latent.get(number, [])
