"""The `[relaunch]` settings of the daemon's relaunches: where their state lies, which
drop-in a unit is relaunched with, how long a relaunch has to start and to soak, the
policy's thresholds, and whether approved actions are only a dry run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from logwatch.core.remedy.policy import Thresholds


@dataclass(frozen=True, slots=True)
class Settings:
    """`[relaunch]` of the configuration."""

    state_dir: Path
    dropin: str = "persistent"
    start_seconds: float = 900.0
    soak_seconds: float = 60.0
    thresholds: Thresholds = field(default_factory=Thresholds)
    dry_run: bool = False  # approved actions are dropped (rejected) before any change


def settings_from_config(values: Mapping[str, Any], default_state: Path,
                         dry_run: bool = False) -> Settings:
    """`[relaunch]` values (config.Config.values) as Settings; `dry_run` (the command line's
    --dry-run) makes it a dry run whatever the file says."""
    state = values.get("relaunch.state_dir") or ""
    return Settings(Path(state) if state else default_state,
                    str(values.get("relaunch.dropin") or "persistent"),
                    float(values.get("relaunch.start_seconds") or 900.0),
                    float(values.get("relaunch.soak_seconds") or 60.0),
                    Thresholds(
                        approval_timeout=timedelta(
                            seconds=float(values.get("relaunch.approval_seconds") or 3600.0)),
                        breaker_failures=int(values.get("relaunch.breaker_failures") or 3),
                        min_confidence=float(values.get("relaunch.min_confidence") or 0.8),
                        backoff_base=timedelta(
                            seconds=float(values.get("relaunch.backoff_seconds") or 60.0))),
                    dry_run or bool(values.get("relaunch.dry_run")))
