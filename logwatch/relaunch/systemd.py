"""Relaunch a systemd unit with a plan: logwatch's own drop-in (`90-logwatch-relaunch.conf`),
`daemon-reload`, restart; undone by deleting that file alone (never `systemctl revert`,
which would also drop the operator's drop-ins). The system manager or `systemctl --user`.

The argv a plan edits is the unit's own, read from the unit files without logwatch's
drop-in, so a second plan starts from the operator's command line, not from the first
plan's.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from logwatch.core.remedy.dropin import (
    DROPIN_NAME,
    HOLD_NAME,
    MARKER,
    hold_dropin,
    relaunch_dropin,
    without_own_dropin,
)
from logwatch.core.remedy.plan import Launch, Plan, apply_plan
from logwatch.core.snapshot.argv import ArgvError, parse_launch
from logwatch.core.snapshot.host_facts import exec_start_from_unit
from logwatch.host.capture import read_unit, run_systemctl


class RelaunchError(RuntimeError):
    """The relaunch could not be carried out; the message says which step and why."""


def runtime_dropin_root(user: bool) -> Path:
    """Where drop-ins that end with the boot go: /run/systemd/system, or the user's
    $XDG_RUNTIME_DIR/systemd/user."""
    if not user:
        return Path("/run/systemd/system")
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    return Path(runtime) / "systemd" / "user"


def default_dropin_root(user: bool) -> Path:
    """Where unit drop-ins that outlive a reboot go: /etc/systemd/system for the system
    manager, ~/.config/systemd/user for a user's."""
    if not user:
        return Path("/etc/systemd/system")
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "systemd" / "user"


@dataclass(frozen=True, slots=True)
class SystemdUnit:
    unit: str
    user: bool = False
    dropin_root: Path | None = None  # default_dropin_root(user) when None
    runtime_root: Path | None = None  # runtime_dropin_root(user) when None

    @property
    def dropin(self) -> Path:
        root = self.dropin_root or default_dropin_root(self.user)
        return root / f"{self.unit}.d" / DROPIN_NAME

    @property
    def hold(self) -> Path:
        root = self.runtime_root or runtime_dropin_root(self.user)
        return root / f"{self.unit}.d" / HOLD_NAME

    def restart_policy(self) -> str:
        """The unit's Restart= setting as the manager has it now."""
        try:
            out = run_systemctl(["show", self.unit, "-p", "Restart", "--value"], self.user)
        except OSError as exc:
            raise RelaunchError(f"cannot read Restart= of {self.unit}: {exc}") from exc
        return out.strip()

    def active_state(self) -> str:
        """ActiveState= as the manager has it now (active, activating, failed, ...)."""
        try:
            return run_systemctl(["show", self.unit, "-p", "ActiveState", "--value"],
                                 self.user).strip()
        except OSError as exc:
            raise RelaunchError(f"cannot read ActiveState= of {self.unit}: {exc}") from exc

    def hold_restarts(self, action: str) -> bool:
        """Keep the manager from restarting the unit on its own while an action runs
        (Restart=no in a drop-in that ends with the boot); whether a hold was needed."""
        if self.restart_policy() in ("no", ""):
            return False
        self._write(self.hold, hold_dropin(action))
        self._run(["daemon-reload"])
        return True

    def release_restarts(self) -> bool:
        """Give the unit its own Restart= back; whether a hold was there."""
        if not self._remove_own(self.hold):
            return False
        self._run(["daemon-reload"])
        return True

    def current(self, in_force: bool = False) -> Launch:
        """The launch as the operator's unit files describe it (logwatch's drop-in left
        out), with the unit's environment; `in_force`: with logwatch's drop-in from an
        earlier relaunch too (what the unit runs, and what a new plan was made from)."""
        try:
            text = run_systemctl(["cat", self.unit], self.user)
            facts = read_unit(self.unit, self.user)
        except OSError as exc:
            raise RelaunchError(f"cannot read unit {self.unit}: {exc}") from exc
        argv = exec_start_from_unit(without_own_dropin(text, keep_relaunch=in_force))
        if not argv:
            raise RelaunchError(f"unit {self.unit} has no ExecStart logwatch can read")
        try:
            return Launch(parse_launch(argv), dict(facts["env"]))
        except ArgvError as exc:
            raise RelaunchError(f"unit {self.unit}: {exc}") from exc

    def own_dropin(self) -> str | None:
        """logwatch's relaunch drop-in as it is now (an earlier relaunch's), None when there
        is none; RelaunchError when the file in its place is not logwatch's."""
        try:
            text = self.dropin.read_text(errors="replace")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RelaunchError(f"{self.dropin}: {exc}") from exc
        if not text.startswith(MARKER):
            raise RelaunchError(f"{self.dropin} was not written by logwatch: left as it is")
        return text

    def apply(self, plan: Plan, overlay_dir: str | None = None) -> Launch:
        """Write the drop-in for the plan over the launch in force (an earlier relaunch's
        included: the plan was made from it), reload and restart the unit; the launch
        started."""
        self.own_dropin()  # refuses an operator's file in logwatch's place
        base = self.current(in_force=True)
        after = apply_plan(plan, base, overlay_dir)
        sets = {c.name: c.value for c in plan.changes if c.kind == "env" and c.value is not None}
        unset = [c.name for c in plan.changes if c.kind == "unset_env"]
        text = relaunch_dropin(after.spec.argv(), sets, unset, plan.digest, plan.causes)
        self._write(self.dropin, text)
        self._run(["daemon-reload"], ["restart", self.unit])
        return after

    def restore(self, text: str) -> None:
        """Put an earlier relaunch's drop-in back (the last launch that verified), reload
        and restart."""
        if not text.startswith(MARKER):
            raise RelaunchError("only a drop-in logwatch wrote is put back")
        self._write(self.dropin, text)
        self._run(["daemon-reload"], ["restart", self.unit])

    def undo(self) -> bool:
        """Remove logwatch's drop-in (only a file logwatch wrote), reload and restart;
        whether there was one."""
        if not self._remove_own(self.dropin):
            return False
        self._run(["daemon-reload"], ["restart", self.unit])
        return True

    @staticmethod
    def _remove_own(path: Path) -> bool:
        try:
            head = path.read_text(errors="replace")[:len(MARKER)]
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise RelaunchError(f"{path}: {exc}") from exc
        if head != MARKER:
            raise RelaunchError(f"{path} was not written by logwatch: left as it is")
        path.unlink()
        return True

    @staticmethod
    def _write(path: Path, text: str) -> None:
        """Written whole or not at all, readable by its owner only (the manager reads it as
        root or as the user; the command line it carries may hold a key)."""
        tmp: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".logwatch-", dir=path.parent)  # 0600
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except OSError as exc:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            raise RelaunchError(f"{path}: cannot write the drop-in: {exc}") from exc

    def _run(self, *commands: list[str]) -> None:
        for args in commands:
            try:
                run_systemctl(args, self.user)
            except OSError as exc:
                raise RelaunchError(str(exc)) from exc
