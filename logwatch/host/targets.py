"""The configuration each configured target runs with, kept current across vLLM restarts.

A finding links to the snapshot in force when it was read. A target's snapshot is taken when
the daemon starts; vLLM is then often restarted with other flags (by an operator, or by a
relaunch), and the start-up snapshot would go on describing a process that no longer runs.
For a target launched by a systemd unit, `changed()` reads the unit's InvocationID (systemd
makes a new one on every start) and, when it differs from the last one seen, takes the
snapshot again. A target given as an argv cannot be watched this way: its snapshot stays the
start-up one (`logwatch run` snapshots exactly what it starts).

A unit the daemon follows is read the same way however it was named: `--journal-unit` and
`--journal-user-unit` (`unit_targets`), and a journald target that names one unit and no
launch of its own, are snapshotted from that unit as a target's `launch.unit` is.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from logwatch.core.settings.config import TargetConfig
from logwatch.core.snapshot.model import GpuFacts, Snapshot
from logwatch.host.capture import capture_gpu, run_systemctl, take_snapshot

CHECK_SECONDS = 5.0  # how often units are asked for their InvocationID


@dataclass(frozen=True, slots=True)
class TargetSnapshot:
    target: str
    digest: str
    body: dict[str, Any]
    invocation: str | None  # the unit's InvocationID it was taken under (None: no unit)
    snapshot: Snapshot | None = None  # the snapshot itself (digest and body are its own)


def followed_unit(source: dict[str, Any]) -> tuple[str, bool] | None:
    """The one unit a journald source reads, and whether it is a user unit (None: another
    kind of source, a journal file or directory, or a pattern naming several units)."""
    if source.get("kind") != "journald":
        return None
    for key, user in (("unit", False), ("user_unit", True)):
        name = source.get(key)
        if isinstance(name, str) and name and not any(c in name for c in "*?["):
            return name, user
    return None


def with_unit_launch(target: TargetConfig) -> TargetConfig:
    """A target whose journald source follows one unit and that says nothing of its launch:
    its launch is that unit's (ExecStart, Environment, exit status), as if configured."""
    unit = followed_unit(target.source)
    if unit is None or target.launch.get("unit") or target.launch.get("argv"):
        return target
    return replace(target, launch={**target.launch, "unit": unit[0], "user": unit[1]})


def unit_targets(journals: Sequence[tuple[str, Sequence[str]]]) -> list[TargetConfig]:
    """The units named on the command line (`--journal-unit`, `--journal-user-unit`) as
    targets named by their source: (source name, journalctl selector) in, one target for
    each selector that is exactly one unit."""
    out = []
    for name, selector in journals:
        if len(selector) == 2 and selector[0] in ("-u", "--user-unit"):
            key = "unit" if selector[0] == "-u" else "user_unit"
            source = {"kind": "journald", key: selector[1]}
            if followed_unit(source) is not None:
                out.append(with_unit_launch(TargetConfig(name, source)))
    return out


def unit_invocation(unit: str, user: bool) -> str | None:
    """The InvocationID of the unit's current (or last) start; None when it never ran or
    systemd cannot be asked."""
    try:
        value = run_systemctl(["show", unit, "-p", "InvocationID", "--value"], user).strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return value or None


class TargetSnapshots:
    """Takes the targets' snapshots; `changed()` retakes those whose unit started again."""

    def __init__(self, targets: Sequence[TargetConfig],
                 gpu: Callable[[], GpuFacts] = capture_gpu,
                 invocation: Callable[[str, bool], str | None] = unit_invocation,
                 interval: float = CHECK_SECONDS) -> None:
        """`interval`: how often the daemon calls `changed()`."""
        self.interval = interval
        self.targets = [t for t in map(with_unit_launch, targets)
                        if t.launch.get("unit") or t.launch.get("argv") or t.model_dir]
        self._gpu_reader = gpu
        self._gpu: GpuFacts | None = None
        self._invocation = invocation
        self._seen: dict[str, str | None] = {}  # target -> InvocationID of its snapshot

    @property
    def watched(self) -> bool:
        """Whether any target has a unit to watch."""
        return any(t.launch.get("unit") for t in self.targets)

    def take_all(self) -> list[TargetSnapshot]:
        return [self._take(t) for t in self.targets]

    def changed(self) -> list[TargetSnapshot]:
        """Snapshots retaken for the targets whose unit has started since the last look."""
        out = []
        for target in self.targets:
            unit = target.launch.get("unit")
            if not unit:
                continue
            now = self._invocation(unit, bool(target.launch.get("user")))
            if now is not None and now != self._seen.get(target.name):
                out.append(self._take(target, now))
        return out

    def _take(self, target: TargetConfig, invocation: str | None = None) -> TargetSnapshot:
        launch = target.launch
        unit = launch.get("unit")
        user = bool(launch.get("user"))
        if unit and invocation is None:
            invocation = self._invocation(unit, user)
        self._gpu = self._gpu or self._gpu_reader()
        argv = [str(a) for a in launch["argv"]] if launch.get("argv") else None
        snapshot: Snapshot = take_snapshot(argv=argv, unit=unit, user_unit=user,
                                           model_dir=target.model_dir, gpu=self._gpu,
                                           served_first=True)
        self._seen[target.name] = invocation
        return TargetSnapshot(target.name, snapshot.content_hash(), snapshot.to_dict(),
                              invocation, snapshot)
