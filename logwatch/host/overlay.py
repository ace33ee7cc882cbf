"""An overlay model directory: what a plan serves when it changes the quantization config
without touching the operator's files. Every entry of the model directory is a symlink in
it, except the one quantization config rewritten with the merged ignore list.

Made under logwatch's state directory, named by the plan's id, built in a temporary
directory and renamed into place (a crash leaves no half-made overlay); removing it removes
only what logwatch made. The state directory's path must be one nobody else controls
(host/trusted_dirs.py): vLLM serves whatever the overlay's name points to, so a link someone
else placed there would choose the model root relaunches.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from logwatch.core.remedy.plan import Overlay, Plan, merge_ignore_list
from logwatch.host.trusted_dirs import UnsafePath, check_directory


class OverlayError(Exception):
    """The overlay cannot be made; the message says what and where."""


def overlay_path(state_dir: str | Path, plan: Plan) -> Path:
    return Path(state_dir) / "overlays" / plan.digest


def _trusted_overlays(state_dir: str | Path) -> Path:
    """The overlays' directory, made (0700) where missing and refused where someone else could
    control it or anything above it."""
    overlays = Path(state_dir) / "overlays"
    try:
        if not os.path.lexists(overlays):
            overlays.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            check_directory(overlays.parent, label="relaunch state directory")
            overlays.mkdir(exist_ok=True, mode=0o700)
        check_directory(overlays, label="relaunch state directory")
    except UnsafePath as exc:
        raise OverlayError(str(exc)) from exc
    except OSError as exc:
        raise OverlayError(f"{overlays}: cannot use it: {exc}") from exc
    return overlays


def make_overlay(state_dir: str | Path, plan: Plan) -> Path:
    """The plan's overlay directory, made once (an existing one is the same plan's)."""
    overlay = plan.overlay
    if overlay is None:
        raise OverlayError("the plan has no overlay")
    _trusted_overlays(state_dir)
    target = overlay_path(state_dir, plan)
    if target.is_dir():
        return target
    source = Path(overlay.model_dir)
    try:
        data = json.loads((source / overlay.file).read_text())
    except (OSError, ValueError) as exc:
        raise OverlayError(f"{source / overlay.file}: cannot read it: {exc}") from exc
    if not isinstance(data, dict):
        raise OverlayError(f"{source / overlay.file}: not a JSON object")
    try:
        merged = merge_ignore_list(data, overlay)
    except ValueError as exc:
        raise OverlayError(f"{source / overlay.file}: {exc}") from exc
    building = Path(tempfile.mkdtemp(prefix=".making-", dir=target.parent))
    try:
        _lay_out(source, building, overlay, merged)
        os.replace(building, target)
    except OSError as exc:
        shutil.rmtree(building, ignore_errors=True)
        if target.is_dir():  # another process made the same overlay meanwhile
            return target
        raise OverlayError(f"{target}: cannot make the overlay: {exc}") from exc
    return target


def _lay_out(source: Path, building: Path, overlay: Overlay, merged: dict[str, object]
             ) -> None:
    for entry in sorted(source.iterdir()):
        if entry.name != overlay.file:
            (building / entry.name).symlink_to(entry.resolve())
    (building / overlay.file).write_text(json.dumps(merged, indent=2) + "\n")
    building.chmod(0o755)  # vLLM, running as another user, reads it


def remove_overlay(state_dir: str | Path, plan: Plan) -> bool:
    """Remove the plan's overlay (its symlinks and rewritten file only); whether one was."""
    _trusted_overlays(state_dir)
    target = overlay_path(state_dir, plan)
    if not target.is_dir():
        return False
    for entry in target.iterdir():
        if not (entry.is_symlink() or entry.name == (plan.overlay.file if plan.overlay else "")):
            raise OverlayError(f"{target}: {entry.name} is not logwatch's: left as it is")
    shutil.rmtree(target)
    return True
