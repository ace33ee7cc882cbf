"""Find and read the configuration file; turn targets into sources."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from logwatch.core.problems import Problem
from logwatch.core.settings.config import Config, TargetConfig, parse_config
from logwatch.paths import default_socket_path as default_socket_path  # re-exported
from logwatch.sources.base import Source

DEFAULT_CONFIG = Path("/etc/logwatch/logwatch.toml")


def default_config() -> Path:
    """$LOGWATCH_CONFIG, else /etc/logwatch/logwatch.toml: every command that is given no
    --config reads the same file as the daemon."""
    return Path(os.environ.get("LOGWATCH_CONFIG") or DEFAULT_CONFIG)


def load_config(path: Path | None, overrides: dict[str, Any] | None = None) -> Config:
    """The given file (which must exist), else $LOGWATCH_CONFIG's (which must exist too),
    else the default one if present, else defaults."""
    chosen = path or default_config()
    named = path is not None or bool(os.environ.get("LOGWATCH_CONFIG"))  # the operator's
    if not chosen.exists():
        config = parse_config(str(chosen), "", overrides)
        if named:
            config.problems.append(Problem(str(chosen), None, "config file not found"))
        else:
            config.origins["file"] = f"none ({chosen} does not exist): defaults"
        return config
    try:
        text = chosen.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        config = parse_config(str(chosen), "", overrides)
        config.problems.append(Problem(str(chosen), None, f"cannot read: {exc}"))
        return config
    config = parse_config(str(chosen), text, overrides)
    config.origins["file"] = str(chosen)
    for directory in config.values.get("signatures.dirs") or []:  # the daemon refuses these
        if not Path(directory).is_dir():
            config.problems.append(Problem(
                str(chosen), _line_of(text, "dirs"), f"signatures.dirs: {directory}: not a "
                "directory (create it, even empty, or take it out)"))
    return config


def host_notes(config: Config) -> list[str]:
    """What this host lacks for the configuration (check-config says it; the file may be
    meant for another host): the socket's groups."""
    import grp

    notes = []
    for key in ("socket.group", "socket.operators_group"):
        name = config.values.get(key)
        try:
            if name:
                grp.getgrnam(name)
        except KeyError:
            notes.append(f"{key} {name!r}: no such group on this host (a daemon started here "
                         "would serve no control socket)")
    return notes


def _line_of(text: str, key: str) -> int | None:
    """The first line that sets `key` (for a problem's place)."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith(f"{key} ") or line.strip().startswith(f"{key}="):
            return number
    return None


def source_for(target: TargetConfig) -> Source:
    from logwatch.core.settings.config import is_glob
    from logwatch.sources.files import FileSource
    from logwatch.sources.globbed import GlobSource
    from logwatch.sources.journald import JournalSource
    from logwatch.sources.process import ProcessSource
    from logwatch.sources.stdin import StdinSource

    src = target.source
    kind = src.get("kind")
    start_at = str(src.get("start_at", "start"))
    if kind == "file":
        path = str(src["path"])
        if is_glob(path):
            return GlobSource(path, name_for=lambda p: f"{target.name}:file:{p}",
                              start_at=start_at)
        return FileSource(path, name=f"{target.name}:file:{path}", start_at=start_at)
    if kind == "journald":
        selector: list[str] = []
        for key, flag in (("unit", "-u"), ("user_unit", "--user-unit"), ("file", "--file"),
                          ("directory", "-D"), ("namespace", "--namespace")):
            if key in src:
                selector += [flag, str(src[key])]
        return JournalSource(selector, name=f"{target.name}:journal:{' '.join(selector)}",
                             start_at=start_at)
    if kind == "process":
        return ProcessSource([str(a) for a in src["argv"]], name=f"{target.name}:run")
    return StdinSource(name=f"{target.name}:stdin")


def paths_in_use(config: Config) -> dict[str, str]:
    """The database, the socket and the relaunch state directory the daemon uses with this
    configuration, the defaults resolved (show-config prints these, not '')."""
    from logwatch.paths import configured_db_path

    db = configured_db_path(config.get("database.path"))
    return {"database.path": str(db),
            "socket.path": str(default_socket_path(config.get("socket.path"))),
            "relaunch.state_dir": str(config.get("relaunch.state_dir") or db.parent)}


def render(config: Config) -> str:
    """`show-config`: every value with where it came from (a path left to its default as
    the path it resolves to here), then the targets."""
    out = [f"# config file: {config.origins.get('file', '?')}"]
    width = max(len(k) for k in config.values)
    used = paths_in_use(config)
    for key, value in config.values.items():
        origin = config.origins[key]
        if key in used and not value:
            value, origin = used[key], f"{origin}: resolved here"
        out.append(f"{key:<{width}} = {value!r:<40} # {origin}")
    for target in config.targets:
        out.append(f"\n[[targets]] {target.name}")
        out.append(f"  source   {target.source}")
        if target.source.get("kind") in ("file", "journald"):
            start_at = target.source.get("start_at")
            out.append(f"  start_at {start_at or 'start'}"
                       f"{'' if start_at else '  # default: a first run reads what is there'}")
        if target.launch:
            out.append(f"  launch   {target.launch}")
        if target.variants:
            out.append(f"  variants {target.variants}")
        out.append(f"  relaunch {target.relaunch}")
        if target.model_dir:
            out.append(f"  model    {target.model_dir}")
    return "\n".join(out) + "\n"
