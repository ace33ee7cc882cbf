"""The configuration each source runs under: its snapshot's hash, recorded in the history and
retaken when a target's unit starts again, so each finding links to what produced it."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from logwatch.daemon.live_launches import LiveLaunches
from logwatch.daemon.writes import Writes
from logwatch.host.targets import TargetSnapshot, TargetSnapshots
from logwatch.store.live import LiveWriter


class Told(Protocol):
    """Who hears of a snapshot retaken: the daemon's log, and its socket when it has one."""

    log: Any

    @property
    def control(self) -> Any: ...  # a ControlServer, when a socket is configured


class SnapshotsInForce:
    def __init__(self, digests: dict[str, str], targets: TargetSnapshots | None,
                 writer: LiveWriter, writes: Writes, launches: LiveLaunches,
                 told: Told) -> None:
        """`digests`: source or target name -> hash of the recorded snapshot of its
        configuration. `targets`: the configured targets, whose snapshots are retaken when
        a unit restarts."""
        self.digests = digests
        self.targets = targets
        self.writer = writer
        self.writes = writes
        self.launches = launches
        self.told = told

    def snapshot_for(self, source: str) -> str | None:
        """The configuration in force for a source: by its name, else by its target's name
        (a glob target's files are named `TARGET:file:PATH`)."""
        digest = self.digests.get(source)
        return digest if digest is not None else self.digests.get(source.split(":", 1)[0])

    def record_snapshot(self, snapshot: TargetSnapshot) -> None:
        """Store a target's snapshot; its findings link to it from now on (any thread)."""
        with self.writes.lock:
            self.writer.record_snapshot(snapshot.digest, snapshot.body)
        self.digests[snapshot.target] = snapshot.digest
        if snapshot.snapshot is not None:  # launches from now on are judged against it
            self.launches.snapshots.configure(snapshot.target, snapshot.snapshot)

    def retake_snapshots(self) -> None:
        """Targets whose unit started again get their snapshot now, not at the next look (a
        relaunch calls it right after its restart, from its own thread, so that the
        relaunch's lines are linked to what it runs)."""
        if self.targets is None:
            return
        for snapshot in self.targets.changed():
            self.record_snapshot(snapshot)
            self.told.log.info("snapshot_retaken", target=snapshot.target,
                               snapshot=snapshot.digest, invocation=snapshot.invocation)

    async def watch_targets(self, targets: TargetSnapshots) -> None:
        """Every `targets.interval`: a target whose unit started again gets a new snapshot."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(targets.interval)
            for snapshot in await loop.run_in_executor(None, targets.changed):
                await loop.run_in_executor(self.writes.thread, self.record_snapshot, snapshot)
                self.told.log.info("snapshot_retaken", target=snapshot.target,
                                   snapshot=snapshot.digest, invocation=snapshot.invocation)
                if self.told.control is not None:
                    self.told.control.publish("snapshot", target=snapshot.target,
                                              hash=snapshot.digest,
                                              invocation=snapshot.invocation)
