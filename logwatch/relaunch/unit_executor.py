"""The runner's executor for a systemd unit (relaunch/systemd.py): `start` writes logwatch's
drop-in with the plan's launch and restarts the unit, its own Restart= held while the action
runs; `roll_back` puts back the drop-in of the earlier relaunch that was in force (the last
launch that verified), or deletes it when there was none (the operator's launch comes back),
and gives Restart= back."""

from __future__ import annotations

from dataclasses import dataclass, field

from logwatch.core.remedy.plan import Launch, Plan
from logwatch.relaunch.systemd import SystemdUnit


@dataclass
class UnitExecutor:
    unit: SystemdUnit
    action: str  # the action's id, named in the hold drop-in
    previous: str | None = field(default=None, init=False)  # the drop-in start replaced

    def start(self, plan: Plan, overlay_dir: str | None) -> Launch:
        self.previous = self.unit.own_dropin()
        self.unit.hold_restarts(self.action)
        return self.unit.apply(plan, overlay_dir)

    def roll_back(self) -> None:
        try:
            if self.previous is not None:
                self.unit.restore(self.previous)
            else:
                self.unit.undo()
        finally:
            self.unit.release_restarts()

    def alive(self) -> bool | None:
        """Whether the unit still runs (restarts are held, so a crash leaves it down)."""
        return self.unit.active_state() in ("active", "activating", "reloading")

    def done(self) -> None:
        """The action ended well: the unit's own Restart= is back."""
        self.unit.release_restarts()
