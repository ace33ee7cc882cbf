"""The daemon's configuration: parsed and checked strictly, every problem at once.

Values come from built-in defaults, then the config file, then command-line flags; each
resolved value remembers which, for `logwatch show-config`.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from logwatch.core.problems import Problem, did_you_mean
from logwatch.core.settings.command_template import check_template

SOURCE_KINDS = ("file", "journald", "stdin", "process")
# where a first run (no checkpoint) starts reading a source: the current file's (the
# journal's) start, its end, or (a single file) its oldest rotated file
START_AT = ("start", "end", "oldest")
RELAUNCH_POLICIES = ("off", "ask", "auto")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def is_glob(path: str) -> bool:
    """A file source's path that names files by a pattern (`*`, `?`, `[`)."""
    return any(c in path for c in "*?[")


def valid_name(name: object) -> TypeGuard[str]:
    """A target's name: what ids, file names and metric labels can carry as it is."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None

_GROUP = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?")


def valid_group(name: object) -> bool:
    """A group's name as the system's tools accept it (never a path or a number)."""
    return isinstance(name, str) and _GROUP.fullmatch(name) is not None


_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def valid_host(name: object) -> bool:
    """A host's name in a fleet's dataset: a directory name, never a path or SQL."""
    return isinstance(name, str) and _HOST.fullmatch(name) is not None


# section -> key -> (type, default). None default: required when the section is present.
SCHEMA: dict[str, dict[str, tuple[type | tuple[type, ...], Any]]] = {
    # keep_days: launches that started longer ago are pruned hourly by the daemon (0: never)
    "database": {"path": (str, ""), "keep_days": ((int, float), 0)},
    # path "": chosen per user. group: readers (may connect: read, follow, reload);
    # operators_group: may also approve, reject and reset a breaker (docs/security.md);
    # idle_seconds: a connection that asks nothing for so long is closed (a subscription is
    # never idle). query_*: limits on each SQL query asked through the socket
    "socket": {"path": (str, ""), "group": (str, ""), "operators_group": (str, ""),
               "idle_seconds": ((int, float), 60.0), "query_seconds": ((int, float), 10.0),
               "query_rows": (int, 10_000)},
    # min_acceptance_percent: the draft-acceptance target; a speculative-decoding reading
    # under it is spec_decode.acceptance_below_target (a warning), under 10 garbage
    "signatures": {"dirs": (list, []), "min_acceptance_percent": ((int, float), 50.0)},
    # the daemon's Parquet export for a fleet (docs/fleet.md): dir "" exports nothing; host
    # "" is the hostname; every_minutes between exports (the days that can still change)
    "export": {"dir": (str, ""), "host": (str, ""), "every_minutes": ((int, float), 60.0)},
    # the daemon's relaunches: state_dir "" is $STATE_DIRECTORY or the XDG data dir (overlay
    # model directories go under it); dropin "persistent" (/etc/systemd/system, or
    # ~/.config/systemd/user) or "runtime" (/run/...: a reboot undoes the relaunch); a
    # relaunch has start_seconds to log that it serves, then soak_seconds of requests for a
    # speculative-decoding reading; an action waits approval_seconds for `logwatch approve`;
    # breaker_failures failed relaunches in a row open a target's breaker (`logwatch
    # reset-breaker` closes it); after the k-th, the next waits backoff_seconds * 2**(k-1);
    # dry_run: actions are proposed, decided and approved, then dropped before any change;
    # min_confidence: a relaunch starts only for a diagnosis above it (0.95 proven by the log
    # or the snapshot, 0.7 inferred, 0.5 a guess)
    "relaunch": {"state_dir": (str, ""), "dropin": (str, "persistent"), "dry_run": (bool, False),
                 "min_confidence": ((int, float), 0.8),
                 "start_seconds": ((int, float), 900.0), "soak_seconds": ((int, float), 60.0),
                 "approval_seconds": ((int, float), 3600.0), "breaker_failures": (int, 3),
                 "backoff_seconds": ((int, float), 60.0)},
    # `logwatch run`: a child still running stop_seconds after SIGTERM/SIGINT was forwarded
    # to it (or after a relaunch asked it to stop) is killed with its process group
    "run": {"stop_seconds": ((int, float), 30.0)},
}
POSITIVE = frozenset({"idle_seconds", "query_seconds", "query_rows", "start_seconds",
                      "soak_seconds", "approval_seconds", "breaker_failures", "backoff_seconds",
                      "every_minutes", "stop_seconds"})
DROPIN_KINDS = ("persistent", "runtime")
TARGET_KEYS = ("name", "source", "launch", "variants", "relaunch", "model_dir")
SOURCE_KEYS: dict[str, type] = {
    "kind": str, "path": str, "unit": str, "user_unit": str, "file": str,
               "directory": str, "namespace": str, "argv": list, "start_at": str}
LAUNCH_KEYS: dict[str, type] = {"unit": str, "user": bool, "argv": list}
RELAUNCH_KEYS: dict[str, type] = {"policy": str, "max_per_hour": int, "variant": str,
                                  "command": list, "undo_command": list}


@dataclass(frozen=True, slots=True)
class TargetConfig:
    name: str
    source: dict[str, Any]
    launch: dict[str, Any] = field(default_factory=dict)
    variants: dict[str, str] = field(default_factory=dict)
    relaunch: dict[str, Any] = field(default_factory=lambda: {"policy": "off"})
    model_dir: str | None = None


@dataclass(slots=True)
class Config:
    values: dict[str, Any] = field(default_factory=dict)  # "database.path" -> value
    origins: dict[str, str] = field(default_factory=dict)  # "database.path" -> where from
    targets: list[TargetConfig] = field(default_factory=list)
    notify: list[Any] = field(default_factory=list)  # NotifyConfig (core.settings.notify_config)
    problems: list[Problem] = field(default_factory=list)

    def get(self, key: str) -> Any:
        return self.values[key]


def _line(text: str, key: str, table: str | None = None, index: int = 0) -> int | None:
    lines = text.splitlines()
    start = 0
    if table is not None:
        headers = [i for i, ln in enumerate(lines)
                   if ln.strip() in (f"[[{table}]]", f"[{table}]")]
        if index >= len(headers):
            return None
        start = headers[index]
        if not key:
            return start + 1
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for i in range(start, len(lines)):
        if pattern.match(lines[i]):
            return i + 1
    return start + 1 if table else None


def parse_config(path: str, text: str, overrides: dict[str, Any] | None = None) -> Config:
    """Defaults, then the file, then `overrides` ("database.path": value) from flags."""
    config = Config()
    for section, keys in SCHEMA.items():
        for key, (_, default) in keys.items():
            config.values[f"{section}.{key}"] = default
            config.origins[f"{section}.{key}"] = "default"

    def problem(message: str, key: str = "", table: str | None = None, index: int = 0,
                hint: str = "") -> None:
        config.problems.append(Problem(path, _line(text, key, table, index), message, hint))

    try:
        data = tomllib.loads(text) if text else {}
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        config.problems.append(Problem(path, int(line.group(1)) if line else None,
                                       f"invalid TOML: {exc}"))
        data = {}
    for section, body in data.items():
        if section in ("targets", "notify"):
            continue
        if section not in SCHEMA:
            problem(f"unknown section [{section}]", "", section, 0,
                    did_you_mean(section, [*SCHEMA, "targets", "notify"]))
            continue
        if not isinstance(body, dict):
            problem(f"[{section}] must be a table", section)
            continue
        for key, value in body.items():
            if key not in SCHEMA[section]:
                problem(f"unknown key {key!r} in [{section}]", key, section, 0,
                        did_you_mean(key, SCHEMA[section]))
                continue
            kind = SCHEMA[section][key][0]
            if not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool):
                problem(f"{section}.{key} must be a {_kind_name(kind)}", key, section)
                continue
            if key in POSITIVE and isinstance(value, int | float) and value <= 0:
                problem(f"{section}.{key} must be more than 0", key, section)
                continue
            if (f"{section}.{key}" == "relaunch.min_confidence"
                    and isinstance(value, int | float) and not 0 < value < 1):
                problem(f"relaunch.min_confidence is {value}: more than 0, less than 1 (a "
                        "diagnosis must be above it)", key, section)
                continue
            if (f"{section}.{key}" == "signatures.min_acceptance_percent"
                    and isinstance(value, int | float) and not 10 < value <= 100):
                problem(f"signatures.min_acceptance_percent is {value}: more than 10 (below "
                        "10 a draft is garbage, spec_decode.low_acceptance), at most 100",
                        key, section)
                continue
            if f"{section}.{key}" == "relaunch.dropin" and value not in DROPIN_KINDS:
                problem(f"relaunch.dropin is {value!r}: one of {', '.join(DROPIN_KINDS)}",
                        key, section, 0, did_you_mean(str(value), DROPIN_KINDS))
                continue
            if f"{section}.{key}" == "export.host" and value and not valid_host(value):
                problem(f"export.host {value!r}: letters, digits, '.', '_' and '-' only (it "
                        "names a directory of the dataset)", key, section)
                continue
            if section == "socket" and key in ("group", "operators_group") and value \
                    and not valid_group(value):
                problem(f"socket.{key} {value!r}: a group's name (letters, digits, '_', '.', "
                        "'-'; not a number)", key, section)
                continue
            config.values[f"{section}.{key}"] = value
            config.origins[f"{section}.{key}"] = path
    readers, operators = config.values["socket.group"], config.values["socket.operators_group"]
    if readers and readers == operators:
        problem(f"socket.operators_group is {operators!r}, the same as socket.group: every "
                "reader would approve relaunches; name a group of its own for the operators",
                "operators_group", "socket")
    for i, target in enumerate(data.get("targets", []) or []):
        _target(config, target, i, problem)
    from logwatch.core.settings.notify_config import parse_notify

    entries = data.get("notify", [])
    for i, entry in enumerate(entries if isinstance(entries, list) else [entries]):
        found = parse_notify(entry, i + 1, lambda message, key, index: problem(
            message, key, "notify", index))
        if found is not None:
            config.notify.append(found)
    names = [t.name for t in config.targets]
    for name in {n for n in names if names.count(n) > 1}:
        problem(f"target name {name!r} is used twice", "name", "targets",
                names.index(name) + 1)
    for key, value in (overrides or {}).items():
        if value is not None:
            config.values[key] = value
            config.origins[key] = "command line"
    return config


def _kind_name(kind: type | tuple[type, ...]) -> str:
    return "number" if kind == (int, float) else getattr(kind, "__name__", str(kind))


def _check_keys(table: dict[str, Any], keys: dict[str, type], part: str, label: str,
                name: str, index: int, problem: Any) -> None:
    """Unknown keys (with a suggestion) and wrong types in one `[targets.PART]` table."""
    for key, value in table.items():
        expected = keys.get(key)
        if expected is None:
            problem(f"unknown key {key!r} in {label} of target {name!r}", key,
                    f"targets.{part}", index, did_you_mean(key, keys))
        elif not isinstance(value, expected):
            problem(f"{part}.{key} of target {name!r} must be a {expected.__name__}", key,
                    f"targets.{part}", index)


def _target(config: Config, raw: Any, index: int, problem: Any) -> None:
    if not isinstance(raw, dict):
        problem("each [[targets]] entry must be a table", "targets")
        return
    for key in raw:
        if key not in TARGET_KEYS:
            problem(f"unknown key {key!r} in target {index + 1}", key, "targets", index,
                    did_you_mean(key, TARGET_KEYS))
    name = raw.get("name")
    if not valid_name(name):
        problem(f"target {index + 1} needs a name (letters, digits, . _ -)", "name",
                "targets", index)
        name = f"target{index + 1}"
    source = raw.get("source")
    if not isinstance(source, dict):
        problem(f"target {name!r} needs a [targets.source] table with a kind", "source",
                "targets", index, "kind = \"file\" and path = \"/var/log/vllm/vllm.log\"")
        source = {}
    _check_keys(source, SOURCE_KEYS, "source", "the source", name, index, problem)
    kind = source.get("kind")
    if source and kind not in SOURCE_KINDS:
        problem(f"source kind {kind!r} of target {name!r} is not one of "
                f"{', '.join(SOURCE_KINDS)}", "kind", "targets.source", index,
                did_you_mean(str(kind), SOURCE_KINDS))
    needs = {"file": ("path",), "process": ("argv",)}.get(str(kind), ())
    for key in needs:
        if key not in source:
            problem(f"a {kind} source needs {key}", "kind", "targets.source", index)
    if kind == "journald" and not any(k in source for k in ("unit", "user_unit", "file",
                                                            "directory", "namespace")):
        problem(f"the journald source of target {name!r} needs unit, user_unit, file, "
                "directory or namespace", "kind", "targets.source", index)
    start_at = source.get("start_at", "start")
    if isinstance(start_at, str) and start_at not in START_AT:
        problem(f"source.start_at of target {name!r} is {start_at!r}: one of "
                f"{', '.join(START_AT)}", "start_at", "targets.source", index,
                did_you_mean(start_at, START_AT))
    elif start_at == "oldest" and kind == "file" and is_glob(str(source.get("path", ""))):
        problem(f"source.start_at = \"oldest\" of target {name!r} needs one file's path, "
                "not a glob: a glob follows every file it matches, rotated ones included "
                "when it matches them", "start_at", "targets.source", index)
    elif "start_at" in source and kind not in ("file", "journald"):
        problem(f"start_at applies to file and journald sources, not to the {kind} source "
                f"of target {name!r}", "start_at", "targets.source", index)
    launch = raw.get("launch", {})
    if isinstance(launch, dict):
        _check_keys(launch, LAUNCH_KEYS, "launch", "the launch", name, index, problem)
    else:
        problem(f"launch of target {name!r} must be a table ([targets.launch])", "launch",
                "targets", index)
    relaunch = raw.get("relaunch", {"policy": "off"})
    if isinstance(relaunch, dict):
        _check_keys(relaunch, RELAUNCH_KEYS, "relaunch", "the relaunch policy", name, index,
                    problem)
    else:
        problem(f"relaunch of target {name!r} must be a table ([targets.relaunch])",
                "relaunch", "targets", index)
    policy = relaunch.get("policy", "off") if isinstance(relaunch, dict) else "off"
    if policy not in RELAUNCH_POLICIES:
        problem(f"relaunch policy {policy!r} of target {name!r} is not one of "
                f"{', '.join(RELAUNCH_POLICIES)}", "policy", "targets.relaunch", index,
                did_you_mean(str(policy), RELAUNCH_POLICIES))
    if isinstance(relaunch, dict):
        _check_relaunch(relaunch, launch if isinstance(launch, dict) else {}, str(kind),
                        name, index, problem)
    variants = raw.get("variants", {})
    if not isinstance(variants, dict) or not all(isinstance(v, str) for v in variants.values()):
        problem(f"variants of target {name!r} must map names to model directories",
                "variants", "targets", index)
        variants = {}
    model_dir = raw.get("model_dir")
    if model_dir is not None and not isinstance(model_dir, str):
        problem(f"model_dir of target {name!r} must be a string (a directory path)",
                "model_dir", "targets", index)
    config.targets.append(TargetConfig(
        name, dict(source), dict(launch) if isinstance(launch, dict) else {},
        dict(variants), dict(relaunch) if isinstance(relaunch, dict) else {"policy": "off"},
        model_dir if isinstance(model_dir, str) else None))


def _check_relaunch(relaunch: dict[str, Any], launch: dict[str, Any], kind: str, name: str,
                    index: int, problem: Any) -> None:
    """A relaunch policy that may act needs a way to act: the unit (launch.unit) or the
    site's command (relaunch.command, with undo_command to put the launch before back)."""
    for key in ("command", "undo_command"):
        template = relaunch.get(key)
        if isinstance(template, list):
            for issue in check_template(template):
                problem(f"relaunch.{key} of target {name!r}: {issue}", key,
                        "targets.relaunch", index)
    if ("command" in relaunch) != ("undo_command" in relaunch):
        problem(f"relaunch of target {name!r} needs both command and undo_command (a "
                "relaunch that fails verification is rolled back)", "command",
                "targets.relaunch", index)
    if relaunch.get("policy", "off") in ("ask", "auto") and not (
            launch.get("unit") or "command" in relaunch):
        hint = ("the child of a process source is not relaunched yet"
                if kind == "process" else "")
        problem(f"relaunch policy {relaunch.get('policy')!r} of target {name!r} has no way "
                "to relaunch: give launch.unit (the systemd unit) or relaunch.command and "
                "relaunch.undo_command", "policy", "targets.relaunch", index, hint)
