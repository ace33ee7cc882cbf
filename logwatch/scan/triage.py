"""Snapshots and diagnosis for a scan: one snapshot per vLLM launch found in the log (from
its own lines), refined by what the operator passes (--cmdline, --model-dir, --pid, --unit)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from logwatch.core.diagnose import Diagnosis, diagnose
from logwatch.core.host_facts import launch_from_log
from logwatch.core.incidents import Incident
from logwatch.core.launches import LaunchSegment, LaunchTracker
from logwatch.core.snapshot import GpuFacts, Snapshot
from logwatch.host.capture import capture_gpu, take_snapshot


@dataclass(frozen=True, slots=True)
class SnapshotOptions:
    cmdline: str | None = None
    model_dir: str | None = None
    pid: int | None = None
    unit: str | None = None
    user_unit: bool = False
    gpu_capability: int | None = None

    @property
    def live(self) -> bool:
        """Reading a running process or unit: this host's GPUs are the ones vLLM uses."""
        return self.pid is not None or self.unit is not None


def parse_capability(text: str) -> int:
    """`9.0`, `10.0`, `90` or `100` -> 90 / 100."""
    if "." in text:
        major, minor = text.split(".", 1)
        return int(major) * 10 + int(minor or 0)
    value = int(text)
    return value * 10 if value < 20 else value


def gpu_for(options: SnapshotOptions) -> GpuFacts:
    if options.gpu_capability is not None:
        return GpuFacts(capability=options.gpu_capability, source="--gpu-capability")
    if options.live:
        return capture_gpu()
    return GpuFacts(source="unknown (offline scan; pass --gpu-capability to state it)")


class SnapshotResolver:
    """The snapshot in force at any point of the scanned logs, built once per launch."""

    def __init__(self, tracker: LaunchTracker, options: SnapshotOptions) -> None:
        self.tracker = tracker
        self.options = options
        self.gpu = gpu_for(options)
        self._cache: dict[int, Snapshot] = {}

    def _build(self, segment: LaunchSegment | None) -> Snapshot:
        key = id(segment)
        if key not in self._cache:
            options = self.options
            log_facts = launch_from_log(segment.captures) if segment else {}
            self._cache[key] = take_snapshot(
                argv=options.cmdline, pid=options.pid, unit=options.unit,
                user_unit=options.user_unit, model_dir=options.model_dir, log_facts=log_facts,
                gpu=self.gpu)
        return self._cache[key]

    def at(self, source: str, line: int) -> Snapshot:
        return self._build(self.tracker.segment_for(source, line))

    def for_incident(self, incident: Incident) -> Snapshot:
        return self.at(incident.first.source, incident.first.lineno)


@dataclass(frozen=True, slots=True)
class Triage:
    diagnoses: list[Diagnosis]
    snapshots: dict[str, dict[str, Any]]  # by hash, every snapshot incidents refer to
    by_incident: dict[int, str]  # incident index -> snapshot hash
    resolver: SnapshotResolver
    _digests: dict[int, str] = field(default_factory=dict)  # id(snapshot) -> its hash

    def snapshot_at(self, source: str, line: int) -> str:
        """The hash of the snapshot in force at a line (recorded in `snapshots` too). Called
        for every recorded finding: a launch's snapshot is hashed once."""
        snap = self.resolver.at(source, line)  # one object per launch, kept by the resolver
        digest = self._digests.get(id(snap))
        if digest is None:
            digest = self._digests[id(snap)] = snap.content_hash()
            self.snapshots.setdefault(digest, snap.to_dict())
        return digest


def triage(incidents: Sequence[Incident], tracker: LaunchTracker, options: SnapshotOptions
           ) -> Triage:
    resolver = SnapshotResolver(tracker, options)
    snapshots: dict[str, dict[str, Any]] = {}
    by_incident: dict[int, str] = {}
    for index, incident in enumerate(incidents):
        snap = resolver.for_incident(incident)
        digest = snap.content_hash()
        snapshots.setdefault(digest, snap.to_dict())
        by_incident[index] = digest
    return Triage(diagnose(incidents, resolver.for_incident), snapshots, by_incident, resolver)
