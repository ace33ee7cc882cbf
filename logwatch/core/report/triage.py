"""The triage report as a JSON-ready dict: launches, incidents, diagnoses and the verdict
(core/report/text.py renders it for a terminal)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
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


class EncodedJson(str):
    """An item of a report's list already encoded as JSON text (cli/scan_command.write_json
    writes it as it is): one read back from a spool (scan.report_spool)."""

    __slots__ = ()


class ReportItems:
    """One of a report's long lists (incidents, diagnoses) made item by item each time it is
    iterated: a crash loop's thousands of launches give tens of MB of dicts, which `scan
    --json` writes one by one (cli/scan_command.write_json) and never needs at once."""

    def __init__(self, make: Callable[[], Iterator[Any]], size: int) -> None:
        self._make, self._size = make, size

    def __iter__(self) -> Iterator[Any]:  # dicts, or EncodedJson
        return self._make()

    def __len__(self) -> int:
        return self._size


@dataclass(frozen=True, slots=True)
class LaunchSummary:
    """What the report needs of one launch besides its incidents and diagnoses, before its
    place among the others is known: its entry's own fields, and its counts and root cause
    relative to itself. Small, so a crash loop's thousands can be held while their
    incidents wait on disk (scan.report_spool)."""

    head: dict[str, Any]  # the entry's fields that do not depend on its place
    incidents: int
    diagnoses: int
    root: int | None  # index of its root cause among its own incidents
    latent: tuple[int, ...]  # indices of its latent problems among its own diagnoses
    problem: str | None  # its root cause's problem, for `failed_before`
    fatal: int  # fatal incidents
    errors: bool  # an incident of an error severity

    @property
    def source(self) -> str:
        source: str = self.head["source"]
        return source

    @property
    def start_line(self) -> int:
        start_line: int = self.head["start_line"]
        return start_line


def summarise(analysis: LaunchAnalysis, digest: str) -> LaunchSummary:
    launch = analysis.launch
    root = analysis.root_incident
    return LaunchSummary(
        {
            "source": launch.source, "number": launch.number,
            "start_line": launch.start_line, "last_line": launch.last_line,
            "seen_start": launch.seen_start,
            "started": written(launch.started) if launch.started else None,
            "outcome": launch.outcome, "served": launch.served, "exit_code": launch.exit_code,
            "snapshot": digest,
            "kernels": [k.to_dict() for k in observed_kernels(
                [{"signature": i.signature.id, "captures": i.captures}
                 for i in analysis.incidents])]},
        len(analysis.incidents), len(analysis.diagnoses), analysis.root,
        tuple(n for n, diag in enumerate(analysis.diagnoses) if diag.latent),
        root.problem if root is not None else None,
        sum(1 for i in analysis.incidents if i.signature.fatal),
        any(i.signature.severity in ERROR_SEVERITIES for i in analysis.incidents))


def own_incidents(analysis: LaunchAnalysis) -> Iterator[dict[str, Any]]:
    """A launch's incidents as the report gives them, less their place (`placed`)."""
    return (incident_dict(incident) for incident in analysis.incidents)


def own_diagnoses(analysis: LaunchAnalysis) -> Iterator[dict[str, Any]]:
    """A launch's diagnoses, each `incident` an index among the launch's own incidents."""
    return (diag.to_dict() for diag in analysis.diagnoses)


def placed_incident(entry: dict[str, Any], number: int, digest: str) -> dict[str, Any]:
    return {**entry, "launch": number, "snapshot": digest}


def placed_diagnosis(entry: dict[str, Any], number: int, base: int) -> dict[str, Any]:
    if entry.get("incident") is not None:
        entry["incident"] += base
    return {**entry, "launch": number}


def bases(summaries: Sequence[LaunchSummary]) -> list[tuple[int, int]]:
    """Where each launch's incidents and diagnoses start in the report's lists."""
    out, incidents, diagnoses = [], 0, 0
    for summary in summaries:
        out.append((incidents, diagnoses))
        incidents += summary.incidents
        diagnoses += summary.diagnoses
    return out


def assemble(library_version: str, summaries: Sequence[LaunchSummary],
             stats: Mapping[str, Any], root_incident: Callable[[int], dict[str, Any]],
             incidents: Any, diagnoses: Any) -> dict[str, Any]:
    """The report from its launches' summaries, newest first, and the items of its two long
    lists (lists, or ReportItems made as they are read). `incidents` and `diagnoses` index
    the whole report; the root cause is the newest launch's that has one, its incident dict
    `root_incident(launch number)`."""
    launches: list[dict[str, Any]] = []
    root_cause: int | None = None
    root_entry: dict[str, Any] | None = None
    for number, (summary, (base, diagnosis_base)) in enumerate(
            zip(summaries, bases(summaries), strict=True)):
        root = None if summary.root is None else base + summary.root
        if root_cause is None and root is not None:
            root_cause = root
            root_entry = {**root_incident(number), "launch": number,
                          "snapshot": summary.head["snapshot"]}
        launches.append({
            **summary.head, "root_cause": root,
            "incidents": list(range(base, base + summary.incidents)),
            "fatal_incidents": summary.fatal,
            "failed_before": 0,  # counted below, oldest first
            "latent_problems": [diagnosis_base + n for n in summary.latent]})
    # each launch's earlier launches that failed of the same problem: counted oldest first
    # (the list is newest first), in one pass however many launches a backlog holds
    failed: dict[str, int] = {}
    for entry, summary in zip(reversed(launches), reversed(summaries), strict=True):
        problem = summary.problem
        entry["failed_before"] = failed.get(problem, 0) if problem is not None else 0
        if problem is not None:
            failed[problem] = failed.get(problem, 0) + 1
    errors = any(summary.errors for summary in summaries)
    judged = judge(evidence_from(root_entry, errors, launches[0] if launches else None, stats))
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


def report_dict(library_version: str, analyses: Sequence[LaunchAnalysis],
                stats: Mapping[str, Any], snapshot_hash: Callable[[Snapshot], str],
                lazy: bool = False) -> dict[str, Any]:
    """The report: launches newest first, each with its incidents (root cause first) and
    diagnoses (see `assemble`). `lazy`: `incidents` and `diagnoses` are ReportItems, made as
    they are read, not lists."""
    digests = [snapshot_hash(analysis.snapshot) for analysis in analyses]
    summaries = [summarise(a, d) for a, d in zip(analyses, digests, strict=True)]
    placing = bases(summaries)

    def incident_items() -> Iterator[dict[str, Any]]:
        for number, analysis in enumerate(analyses):
            for entry in own_incidents(analysis):
                yield placed_incident(entry, number, digests[number])

    def diagnosis_items() -> Iterator[dict[str, Any]]:
        for number, analysis in enumerate(analyses):
            for entry in own_diagnoses(analysis):
                yield placed_diagnosis(entry, number, placing[number][0])

    def root_incident(number: int) -> dict[str, Any]:
        analysis = analyses[number]
        assert analysis.root is not None
        return incident_dict(analysis.incidents[analysis.root])

    incidents: Any = ReportItems(incident_items, sum(s.incidents for s in summaries))
    diagnoses: Any = ReportItems(diagnosis_items, sum(s.diagnoses for s in summaries))
    if not lazy:
        incidents, diagnoses = list(incidents), list(diagnoses)
    return assemble(library_version, summaries, stats, root_incident, incidents, diagnoses)


def problem_of(incident: Mapping[str, Any]) -> str:
    """The problem an incident of the report is (the same over launches)."""
    return problem_key(incident["signature"], incident["key"])
