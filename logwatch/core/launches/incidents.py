"""Group findings into incidents and pick the root cause.

An incident is one problem however many times, ranks or copies it shows up: findings share
an incident when they share the signature and its key captures. The raw stderr copy that
Python's multiprocessing prints after vLLM's own logged traceback is a copy, not a second
occurrence. When the API server reports `Engine core initialization failed`, the cause is the
last serious finding from EngineCore or a Worker before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from logwatch.core.signatures.findings import Evidence, Finding, kept
from logwatch.core.signatures.signature import (
    CONSEQUENCE_CATEGORIES,
    FALLBACK_CATEGORY,
    Signature,
)

COPY_WINDOW_LINES = 400
MAX_EVIDENCE_LINES = 12


@dataclass(slots=True)
class Incident:
    signature: Signature
    key: tuple[str, ...]
    first: Finding
    last: Finding
    count: int = 1
    copies: int = 0
    processes: set[str] = field(default_factory=set)
    ranks: set[str] = field(default_factory=set)
    evidence: list[Evidence] = field(default_factory=list)
    caused_by: tuple[str, tuple[str, ...]] | None = None  # for engine_core_failed

    @property
    def fingerprint(self) -> tuple[str, tuple[str, ...]]:
        return (self.signature.id, self.key)

    @property
    def problem(self) -> str:
        return problem_key(self.signature.id, self.key)

    @property
    def captures(self) -> dict[str, str]:
        return self.first.captures

    def sort_key(self) -> tuple[int, int, str, int]:
        return (-self.signature.severity_rank, 0 if self.signature.fatal else 1,
                self.first.source, self.first.lineno)


def incident_key(finding: Finding) -> tuple[str, ...]:
    names = finding.signature.key_captures
    if names is None:
        names = tuple(sorted(finding.captures))
    return tuple(f"{n}={finding.captures.get(n, '')}" for n in names)


def problem_key(signature_id: str, key: Sequence[str]) -> str:
    """What an incident is across launches: the same signature with the same key captures
    ("marlin.repack_tile_n|size_n=40|tile_n_size=64"), recurring as one problem."""
    return "|".join((signature_id, *key))


def _is_cause_candidate(finding: Finding) -> bool:
    sig = finding.signature
    return (sig.category not in CONSEQUENCE_CATEGORIES
            and sig.category not in ("lifecycle", FALLBACK_CATEGORY)
            and sig.severity_rank >= 2 and finding.role in (None, "engine_core", "worker"))


class IncidentBook:
    """Accumulates findings (in line order per source) into incidents, in bounded memory."""

    def __init__(self) -> None:
        self.incidents: dict[tuple[str, tuple[str, ...]], Incident] = {}
        self._last_cause: dict[str, tuple[str, tuple[str, ...]]] = {}

    def add(self, finding: Finding, key: tuple[str, ...] | None = None) -> Incident:
        """`key`: the finding's incident_key, where the caller has it already."""
        fingerprint = (finding.signature.id, incident_key(finding) if key is None else key)
        incident = self.incidents.get(fingerprint)
        if incident is None:
            stored = kept(finding)
            incident = Incident(finding.signature, fingerprint[1], stored, stored)
            incident.evidence.extend(finding.evidence)
            self.incidents[fingerprint] = incident
        elif self._is_copy(incident.last, finding):
            incident.copies += 1
        else:
            incident.count += 1
            incident.last = kept(finding)
            if len(incident.evidence) < MAX_EVIDENCE_LINES:
                incident.evidence.extend(finding.evidence[-1:])
        if finding.process:
            incident.processes.add(finding.process)
        if finding.rank:
            incident.ranks.add(finding.rank)
        if _is_cause_candidate(finding):
            self._last_cause[finding.source] = fingerprint
        elif finding.signature.category == "engine_core_failed" and finding.role in (
                "api_server", None) and incident.caused_by is None:
            incident.caused_by = self._last_cause.get(finding.source)
        return incident

    @staticmethod
    def _is_copy(previous: Finding, finding: Finding) -> bool:
        """The same report printed again by another channel (logger vs raw stderr)."""
        return (finding.source == previous.source and finding.kind != previous.kind
                and finding.captures == previous.captures
                and finding.lineno - previous.lineno <= COPY_WINDOW_LINES
                and (finding.pid is None or previous.pid is None or finding.pid == previous.pid))

    def copy(self) -> IncidentBook:
        """A copy whose incidents later findings do not change."""
        book = IncidentBook()
        book.incidents = {key: replace(i, processes=set(i.processes), ranks=set(i.ranks),
                                       evidence=list(i.evidence))
                          for key, i in self.incidents.items()}
        book._last_cause = dict(self._last_cause)
        return book

    def add_all(self, findings: Iterable[Finding]) -> None:
        for finding in findings:
            self.add(finding)

    def ordered(self) -> tuple[list[Incident], int | None]:
        """Incidents with the root cause first, then by severity; and the root cause index."""
        incidents = sorted(self.incidents.values(), key=Incident.sort_key)
        root = choose_root_cause(incidents, self.incidents)
        if root is not None:
            incidents.remove(root)
            incidents.insert(0, root)
            return incidents, 0
        return incidents, None


def choose_root_cause(incidents: list[Incident],
                      by_fingerprint: dict[tuple[str, tuple[str, ...]], Incident]
                      ) -> Incident | None:
    """The incident that explains the failure, or None when nothing fatal happened."""
    for incident in incidents:
        if incident.caused_by is not None and incident.caused_by in by_fingerprint:
            return by_fingerprint[incident.caused_by]
    fatal = [i for i in incidents if i.signature.fatal]
    if not fatal:
        return None
    causes = [i for i in fatal if i.signature.category not in CONSEQUENCE_CATEGORIES]
    specific = [i for i in causes if i.signature.category != FALLBACK_CATEGORY]
    pool = specific or causes or fatal
    return min(pool, key=lambda i: (-i.signature.severity_rank, i.first.source,
                                    i.first.lineno))
