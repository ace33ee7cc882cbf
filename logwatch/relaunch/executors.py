"""The executor a configured target is relaunched through: its systemd unit
(`[targets.launch] unit`, the system manager or `user = true`), or the site's own commands
(`[targets.relaunch] command` and `undo_command`). The configuration check refuses a policy
that may act without one of them, so None here means the policy is off."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from logwatch.core.remedy.plan import Launch, Plan
from logwatch.core.settings.config import TargetConfig
from logwatch.relaunch.command import SiteCommand
from logwatch.relaunch.systemd import SystemdUnit, runtime_dropin_root
from logwatch.relaunch.unit_executor import UnitExecutor


@dataclass
class CommandExecutor:
    """The site's commands as the runner's executor: `start` runs `command` for the plan,
    `roll_back` runs `undo_command` (both with the plan's fields, never the log's)."""

    site: SiteCommand
    # the launch the plan edits: the failed one's as recorded, so a secret in it (an
    # `--api-key`) is masked; the site's command supplies the real one itself
    base: Launch
    _applied: tuple[Plan, str | None] | None = field(default=None, init=False)

    def start(self, plan: Plan, overlay_dir: str | None) -> Launch:
        self._applied = (plan, overlay_dir)
        return self.site.apply(plan, self.base, overlay_dir)

    def roll_back(self) -> None:
        if self._applied is not None:
            plan, overlay = self._applied
            self.site.undo(plan, self.base, overlay)

    def alive(self) -> bool | None:
        return None  # not known: the site's command started it somewhere

    def done(self) -> None:
        """Nothing is held while a site's command relaunches."""


def unit_of(target: TargetConfig, dropin: str = "persistent") -> SystemdUnit | None:
    """The target's systemd unit; `dropin` "runtime" puts logwatch's drop-in under /run
    (a reboot undoes the relaunch)."""
    name = target.launch.get("unit")
    if not name:
        return None
    user = bool(target.launch.get("user"))
    root: Path | None = runtime_dropin_root(user) if dropin == "runtime" else None
    return SystemdUnit(str(name), user=user, dropin_root=root)


def executor_for(target: TargetConfig, action_id: str, base: Launch | None,
                 dropin: str = "persistent") -> UnitExecutor | CommandExecutor | None:
    """How to relaunch `target` for action `action_id`; `base` is the failed launch (the
    site's command edits it; a unit is read from its own files)."""
    command, undo = target.relaunch.get("command"), target.relaunch.get("undo_command")
    if command and undo and base is not None:
        return CommandExecutor(SiteCommand(tuple(map(str, command)), tuple(map(str, undo))),
                               base)
    unit = unit_of(target, dropin)
    return UnitExecutor(unit, action_id) if unit is not None else None
