"""What a diagnosis is: the cause of an incident in the snapshot in force, with its evidence,
the config fields that prove it, a confidence and the remedies that apply; and what a rule
sees (core.diagnosis.diagnose tries the rules).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from logwatch.core.launches.incidents import Incident
from logwatch.core.signatures.findings import Evidence
from logwatch.core.snapshot.model import Snapshot


@dataclass(frozen=True, slots=True)
class Remedy:
    kind: str  # the remedy vocabulary of signatures (switch_to_w4a4, fix_mtp_ignore_list, ...)
    summary: str
    applicable: bool | None  # None: cannot tell from the snapshot
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "summary": self.summary, "applicable": self.applicable,
                "why": self.why}


@dataclass(frozen=True, slots=True)
class Diagnosis:
    cause: str
    title: str
    signature: str | None  # the incident's signature id (None: a configuration finding)
    summary: str
    details: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)  # the fields that prove it
    confidence: float = 0.5
    remedies: tuple[Remedy, ...] = ()
    incident: int | None = None  # index of the explained incident in the report
    latent: bool = False  # shown by the snapshot, not (yet) by the log: core/diagnosis/latent.py

    def to_dict(self) -> dict[str, Any]:
        return {"cause": self.cause, "title": self.title, "signature": self.signature,
                "incident": self.incident, "latent": self.latent,
                "summary": self.summary, "details": list(self.details),
                "evidence": [{"source": e.source, "line": e.lineno, "text": e.text}
                             for e in self.evidence],
                "config": self.config, "confidence": self.confidence,
                "remedies": [r.to_dict() for r in self.remedies]}


@dataclass(frozen=True, slots=True)
class Context:
    snapshot: Snapshot
    incidents: Sequence[Incident]

    def has(self, signature_id: str) -> Incident | None:
        return next((i for i in self.incidents if i.signature.id == signature_id), None)

    @property
    def capability(self) -> int | None:
        return self.snapshot.gpu.capability


def diagnosis_from_dict(data: dict[str, Any]) -> Diagnosis:
    """A diagnosis as `Diagnosis.to_dict` wrote it (the history keeps that), without its
    evidence lines: what plans read of it."""
    return Diagnosis(
        str(data["cause"]), str(data.get("title", "")), data.get("signature"),
        str(data.get("summary", "")), tuple(data.get("details") or ()), (),
        dict(data.get("config") or {}), float(data.get("confidence", 0.5)),
        tuple(Remedy(str(r["kind"]), str(r["summary"]), r.get("applicable"),
                     str(r.get("why", ""))) for r in data.get("remedies") or ()),
        data.get("incident"), bool(data.get("latent", False)))
