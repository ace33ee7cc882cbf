"""Where logwatch keeps its history and its control socket when nothing says otherwise:
one resolution for the CLI, the daemon, the shipped unit and `--help` (the standard library
only, so that `--help` can name the real defaults and load nothing).

The unit says `StateDirectory=logwatch` and `RuntimeDirectory=logwatch`; systemd hands the
daemon the directories it made ($STATE_DIRECTORY, $RUNTIME_DIRECTORY). A command typed by the
operator has neither, so it works out the same places as systemd does:

- the system manager (root): /var/lib/logwatch and /run/logwatch;
- a user manager: $XDG_RUNTIME_DIR/logwatch, and for the state $XDG_STATE_HOME/logwatch
  (~/.local/state) from systemd 254 on, $XDG_CONFIG_HOME/logwatch (~/.config) before it.

A history where logwatch put it before (the XDG data dir, ~/.local/share/logwatch) is still
found while it is the only one there is.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

APP = "logwatch"
DB_FILENAME = "logwatch.duckdb"
SYSTEM_STATE = Path("/var/lib") / APP  # StateDirectory= under the system manager
USER_STATE_HOME_SINCE = 254  # systemd's release that moved user units' state out of ~/.config


@functools.cache
def systemd_release() -> int | None:
    """The installed systemd's release number (`systemctl --version`), None without one."""
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return None
    try:
        out = subprocess.run([systemctl, "--version"], capture_output=True, text=True,
                             timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.match(r"systemd (\d+)", out)
    return int(found.group(1)) if found else None


def user_state_dir(env: Mapping[str, str], release: int | None) -> Path:
    """Where a user manager of systemd `release` puts StateDirectory=logwatch."""
    home = Path(env.get("HOME") or "~").expanduser()
    if release is not None and release < USER_STATE_HOME_SINCE:
        return Path(env.get("XDG_CONFIG_HOME") or home / ".config") / APP
    return Path(env.get("XDG_STATE_HOME") or home / ".local" / "state") / APP


def _earlier_dir(env: Mapping[str, str]) -> Path:
    """Where the history went before logwatch followed the unit's StateDirectory=."""
    home = Path(env.get("HOME") or "~").expanduser()
    return Path(env.get("XDG_DATA_HOME") or home / ".local" / "share") / APP


def db_path_for(env: Mapping[str, str], euid: int, release: int | None) -> Path:
    """$STATE_DIRECTORY under systemd, else where the unit's StateDirectory= is for this
    user (root: the system unit's; `release`: the systemd installed, None without one); an
    earlier history in the XDG data dir while it is the only one."""
    if env.get("STATE_DIRECTORY"):
        return Path(env["STATE_DIRECTORY"].split(":")[0]) / DB_FILENAME
    state = SYSTEM_STATE if euid == 0 else user_state_dir(env, release)
    earlier = _earlier_dir(env) / DB_FILENAME
    if not (state / DB_FILENAME).exists() and earlier.exists():
        return earlier
    return state / DB_FILENAME


def default_db_path(env: Mapping[str, str] | None = None) -> Path:
    """The history's path here and now (`db_path_for` this process)."""
    env = os.environ if env is None else env
    if env.get("STATE_DIRECTORY"):  # the daemon under systemd, the tests: no need to ask
        return db_path_for(env, 0, None)
    euid = os.geteuid()
    return db_path_for(env, euid, None if euid == 0 else systemd_release())


def fallback_runtime_dir() -> Path:
    """Where the socket goes when there is no $XDG_RUNTIME_DIR: a directory of our own in the
    temporary directory ($TMPDIR, else /tmp), which someone else may have made first."""
    return Path(tempfile.gettempdir()) / f"logwatch-{os.geteuid()}"


def default_socket_path(configured: str = "") -> Path:
    """The configured path, else $RUNTIME_DIRECTORY (what systemd made for the unit's
    RuntimeDirectory=), else /run/logwatch for root, else the user's runtime dir (or
    $TMPDIR/logwatch-UID without one)."""
    if configured:
        return Path(configured)
    if os.environ.get("RUNTIME_DIRECTORY"):
        return Path(os.environ["RUNTIME_DIRECTORY"].split(":")[0]) / "logwatch.sock"
    if os.geteuid() == 0:
        return Path("/run/logwatch/logwatch.sock")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime else fallback_runtime_dir()  # checked before use
    return base / "logwatch" / "logwatch.sock"


def configured_db_path(configured: str = "") -> Path:
    """The configuration's database.path, else the default."""
    return Path(configured) if configured else default_db_path()
