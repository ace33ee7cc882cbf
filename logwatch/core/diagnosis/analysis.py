"""One analysis for the scan and the daemon: a launch's incidents and its snapshot in, the
root cause and the diagnoses out. Pure; both callers get the same answer for the same log."""

from __future__ import annotations

from dataclasses import dataclass

from logwatch.core.diagnosis.diagnose import diagnose
from logwatch.core.diagnosis.latent import latent_problems, with_failures_ahead
from logwatch.core.diagnosis.model import Diagnosis
from logwatch.core.launches.incidents import Incident
from logwatch.core.launches.lifecycle import Launch
from logwatch.core.launches.unrecognised import settle_launch
from logwatch.core.snapshot.model import Snapshot


@dataclass(frozen=True, slots=True)
class LaunchAnalysis:
    launch: Launch
    incidents: list[Incident]  # the root cause first, then by severity
    root: int | None  # index of the root cause in `incidents`
    diagnoses: list[Diagnosis]  # `incident`: an index into `incidents`; latent ones last
    snapshot: Snapshot

    @property
    def root_incident(self) -> Incident | None:
        return self.incidents[self.root] if self.root is not None else None

    @property
    def latent(self) -> list[Diagnosis]:
        """Problems the snapshot shows that the log has not reached yet."""
        return [d for d in self.diagnoses if d.latent]


def analyse(launch: Launch, snapshot: Snapshot) -> LaunchAnalysis:
    """The launch's incidents ordered with the root cause first, each diagnosed against the
    snapshot in force when the launch started; then the snapshot's latent problems, which
    the root cause's diagnosis also names (the failures that would follow its fix)."""
    incidents, root = settle_launch(launch, *launch.book.ordered())
    diagnoses = diagnose(incidents, lambda _: snapshot)
    latent = latent_problems(snapshot, incidents, diagnoses)
    return LaunchAnalysis(launch, incidents, root,
                          with_failures_ahead(diagnoses, latent, root) + latent, snapshot)


def latest_first(analyses: list[LaunchAnalysis], order: dict[str, int]) -> list[LaunchAnalysis]:
    """The report's order: the newest launch first (sources in `order`, later ones newer)."""
    return sorted(analyses, key=lambda a: (order.get(a.launch.source, 0), a.launch.start_line),
                  reverse=True)
