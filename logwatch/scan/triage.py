"""Snapshots and diagnosis for a scan: one snapshot per vLLM launch found in the log (from
its own lines), refined by what the operator passes (--cmdline, --model-dir, --pid, --unit)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from logwatch.core.diagnosis.analysis import LaunchAnalysis, analyse, latest_first
from logwatch.core.launches.lifecycle import Launch, LaunchBook
from logwatch.core.snapshot.host_facts import launch_from_log
from logwatch.core.snapshot.model import GpuFacts, Snapshot
from logwatch.host.capture import capture_gpu, take_snapshot


@dataclass(frozen=True, slots=True)
class SnapshotOptions:
    cmdline: str | None = None
    model_dir: str | None = None
    pid: int | None = None
    unit: str | None = None
    user_unit: bool = False
    gpu_capability: int | None = None
    gpu_name: str | None = None

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
        return GpuFacts(name=options.gpu_name, capability=options.gpu_capability,
                        source="--gpu-capability")
    if options.gpu_name is not None:  # a name alone: its capability is not guessed
        return GpuFacts(name=options.gpu_name, source="--gpu-name (capability not given)")
    if options.live:
        return capture_gpu()
    return GpuFacts(source="unknown (offline scan; pass --gpu-capability to state it)")


class SnapshotResolver:
    """The snapshot of each launch, built once: what the operator passed, refined by the
    launch's own start lines."""

    def __init__(self, launches: LaunchBook, options: SnapshotOptions) -> None:
        self.launches = launches
        self.options = options
        self.gpu = gpu_for(options)
        self._cache: dict[int, Snapshot] = {}

    def for_launch(self, launch: Launch | None) -> Snapshot:
        key = id(launch)
        if key not in self._cache:
            options = self.options
            log_facts = launch_from_log(launch.captures) if launch else {}
            self._cache[key] = take_snapshot(
                argv=options.cmdline, pid=options.pid, unit=options.unit,
                user_unit=options.user_unit, model_dir=options.model_dir, log_facts=log_facts,
                gpu=self.gpu)
        return self._cache[key]

    def forget(self, launch: Launch) -> None:
        """The launch's snapshot is not asked for again (a launch analysed as it ended)."""
        self._cache.pop(id(launch), None)

    def at(self, source: str, line: int) -> Snapshot:
        return self.for_launch(self.launches.launch_at(source, line))


@dataclass(slots=True)
class Triage:
    analyses: list[LaunchAnalysis]  # newest launch first
    snapshots: dict[str, dict[str, Any]]  # by hash, every snapshot a launch or finding used
    resolver: SnapshotResolver
    _digests: dict[int, str] = field(default_factory=dict)  # id(snapshot) -> its hash

    def digest(self, snap: Snapshot) -> str:
        """A snapshot's hash (hashed once per launch), recorded in `snapshots`."""
        digest = self._digests.get(id(snap))
        if digest is None:
            digest = self._digests[id(snap)] = snap.content_hash()
            self.snapshots.setdefault(digest, snap.to_dict())
        return digest

    def snapshot_at(self, source: str, line: int) -> str:
        """The hash of the snapshot in force at a line. Called for every recorded finding."""
        return self.digest(self.resolver.at(source, line))


def triage(launches: LaunchBook, options: SnapshotOptions, order: Sequence[str] = ()
           ) -> Triage:
    """Every launch analysed against its snapshot, newest first (`order`: the sources as
    they were read, later ones newer)."""
    resolver = SnapshotResolver(launches, options)
    analyses = [analyse(launch, resolver.for_launch(launch)) for launch in launches.launches()]
    rank = {source: n for n, source in enumerate(order)}
    return Triage(latest_first(analyses, rank), {}, resolver)
