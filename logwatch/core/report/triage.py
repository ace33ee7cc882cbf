"""The triage report as a JSON-ready dict: launches, incidents, diagnoses and the verdict
(core/report/text.py renders it for a terminal)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from logwatch.core.diagnosis.analysis import LaunchAnalysis
from logwatch.core.diagnosis.kernel_path import observed_kernels
from logwatch.core.launches.incidents import Incident, problem_key
from logwatch.core.report.timestamps import written
from logwatch.core.report.verdict import ERROR_SEVERITIES, evidence_from, judge
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


class ReportItems:
    """One of a report's long lists (incidents, diagnoses) made item by item each time it is
    iterated: a crash loop's thousands of launches give tens of MB of dicts, which `scan
    --json` writes one by one (cli/scan_command.write_json) and never needs at once."""

    def __init__(self, make: Callable[[], Iterator[dict[str, Any]]], size: int) -> None:
        self._make, self._size = make, size

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._make()

    def __len__(self) -> int:
        return self._size


def report_dict(library_version: str, analyses: Sequence[LaunchAnalysis],
                stats: Mapping[str, Any], snapshot_hash: Callable[[Snapshot], str],
                lazy: bool = False) -> dict[str, Any]:
    """The report: launches newest first, each with its incidents (root cause first) and
    diagnoses. `incidents`, `diagnoses` and `root_cause` index the whole report; the root
    cause is the newest launch's that has one. `lazy`: `incidents` and `diagnoses` are
    ReportItems, made as they are read, not lists."""
    launches: list[dict[str, Any]] = []
    digests: list[str] = []
    root_cause: int | None = None
    root_entry: dict[str, Any] | None = None
    errors = False
    latent: dict[int, list[int]] = {}  # launch -> its latent problems' diagnosis indices
    incident_count = diagnosis_count = 0
    for number, analysis in enumerate(analyses):
        launch, base = analysis.launch, incident_count
        digest = snapshot_hash(analysis.snapshot)
        digests.append(digest)
        incident_count += len(analysis.incidents)
        for diag in analysis.diagnoses:
            if diag.latent:
                latent.setdefault(number, []).append(diagnosis_count)
            diagnosis_count += 1
        errors = errors or any(i.signature.severity in ERROR_SEVERITIES
                               for i in analysis.incidents)
        root = None if analysis.root is None else base + analysis.root
        if root_cause is None and analysis.root is not None:
            root_cause = root
            root_entry = {**incident_dict(analysis.incidents[analysis.root]),
                          "launch": number, "snapshot": digest}
        launches.append({
            "source": launch.source, "number": launch.number, "start_line": launch.start_line,
            "last_line": launch.last_line, "seen_start": launch.seen_start,
            "started": written(launch.started) if launch.started else None,
            "outcome": launch.outcome, "served": launch.served, "exit_code": launch.exit_code,
            "snapshot": digest,
            "kernels": [k.to_dict() for k in observed_kernels(
                [{"signature": i.signature.id, "captures": i.captures}
                 for i in analysis.incidents])],
            "root_cause": root, "incidents": list(range(base, incident_count)),
            "fatal_incidents": sum(1 for i in analysis.incidents if i.signature.fatal),
            "failed_before": 0,  # counted below, oldest first
            "latent_problems": latent.get(number, [])})
    # each launch's earlier launches that failed of the same problem: counted oldest first
    # (the list is newest first), in one pass however many launches a backlog holds
    failed: dict[str, int] = {}
    for entry, analysis in zip(reversed(launches), reversed(analyses), strict=True):
        incident = analysis.root_incident
        fingerprint = incident.problem if incident is not None else None
        entry["failed_before"] = failed.get(fingerprint, 0) if fingerprint is not None else 0
        if fingerprint is not None:
            failed[fingerprint] = failed.get(fingerprint, 0) + 1
    judged = judge(evidence_from(root_entry, errors, launches[0] if launches else None, stats))

    def incident_items() -> Iterator[dict[str, Any]]:
        for number, analysis in enumerate(analyses):
            for incident in analysis.incidents:
                yield {**incident_dict(incident), "launch": number, "snapshot": digests[number]}

    def diagnosis_items() -> Iterator[dict[str, Any]]:
        base = 0
        for number, analysis in enumerate(analyses):
            for diag in analysis.diagnoses:
                entry = diag.to_dict()
                if entry.get("incident") is not None:
                    entry["incident"] += base
                yield {**entry, "launch": number}
            base += len(analysis.incidents)

    incidents: Any = ReportItems(incident_items, incident_count)
    diagnoses: Any = ReportItems(diagnosis_items, diagnosis_count)
    if not lazy:
        incidents, diagnoses = list(incidents), list(diagnoses)
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
