"""Where logwatch keeps its history and its control socket when nothing says otherwise:
one resolution for the CLI, the daemon and `--help` (the standard library only, so that
`--help` can name the real defaults and load nothing)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

DB_FILENAME = "logwatch.duckdb"


def default_db_path(env: Mapping[str, str] | None = None) -> Path:
    """$STATE_DIRECTORY under systemd (StateDirectory=logwatch), else XDG data home."""
    env = os.environ if env is None else env
    if env.get("STATE_DIRECTORY"):
        return Path(env["STATE_DIRECTORY"].split(":")[0]) / DB_FILENAME
    data_home = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", "~")).expanduser()
                                                 / ".local" / "share")
    return Path(data_home) / "logwatch" / DB_FILENAME


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
