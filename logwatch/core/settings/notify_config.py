"""`[[notify]]` entries of the configuration: where the daemon tells an operator about a
failed launch (one page, naming its root cause), a crash loop (N failed or crashed launches of
a source within M minutes: one page per loop) or a relaunch changing state. Two kinds:
`hook`, an argv run without a shell (the event's fields as LOGWATCH_* environment variables
and its JSON on stdin), and `webhook`, a JSON POST with a timeout and retries. A failed
launch's page and a relaunch's state are told at most once per `every_seconds` for the same
source and root cause, the same action and state. `fatal_incident`, the event of earlier
versions (one page per fatal incident, consequences included), is read as `launch_failed`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

EVENTS = ("launch_failed", "crash_loop", "relaunch")
RENAMED_EVENTS = {"fatal_incident": "launch_failed"}  # an older name -> the event it is now
KINDS = ("hook", "webhook")
# key -> the TOML types it takes (the defaults are NotifyConfig's)
KEYS: dict[str, type | tuple[type, ...]] = {
    "kind": str, "argv": list, "url": str, "on": list, "timeout_seconds": (int, float),
    "retries": int, "every_seconds": (int, float), "crash_loop_launches": int,
    "crash_loop_minutes": (int, float)}


@dataclass(frozen=True, slots=True)
class NotifyConfig:
    kind: str
    argv: tuple[str, ...] = ()
    url: str = ""
    on: tuple[str, ...] = EVENTS
    timeout_seconds: float = 5.0
    retries: int = 2
    every_seconds: float = 600.0
    crash_loop_launches: int = 3
    crash_loop_minutes: float = 10.0


def parse_notify(entry: Any, index: int, problem: Callable[[str, str, int], None]
                 ) -> NotifyConfig | None:
    """One `[[notify]]` table, or None (each problem told through `problem(message, key,
    index)`)."""
    if not isinstance(entry, dict):
        problem("each [[notify]] entry must be a table", "notify", index)
        return None
    values: dict[str, Any] = {}
    ok = True
    for key, value in entry.items():
        if key not in KEYS:
            problem(f"unknown key {key!r} in [[notify]] (one of {', '.join(KEYS)})", key, index)
            ok = False
            continue
        if not isinstance(value, KEYS[key]) or isinstance(value, bool):
            problem(f"notify.{key} has the wrong type", key, index)
            ok = False
            continue
        values[key] = value
    kind = str(values.get("kind"))
    if kind not in KINDS:
        problem(f"notify.kind is {kind!r}: one of {', '.join(KINDS)}", "kind", index)
        return None
    argv, url = values.get("argv", []), values.get("url", "")
    if kind == "hook" and (not argv or not all(isinstance(a, str) and a for a in argv)
                           or not str(argv[0]).startswith("/")):
        problem("a hook's argv is a list of strings, its program an absolute path (no "
                "shell runs it)", "argv", index)
        ok = False
    if kind == "webhook" and not (url.startswith("http://") or url.startswith("https://")):
        problem(f"a webhook's url is http:// or https://, not {url!r}", "url", index)
        ok = False
    on = [RENAMED_EVENTS.get(e, e) if isinstance(e, str) else e
          for e in values.get("on", list(EVENTS))]
    if not on or any(e not in EVENTS for e in on):
        problem(f"notify.on: some of {', '.join(EVENTS)}", "on", index)
        ok = False
    for key in ("timeout_seconds", "every_seconds", "crash_loop_launches",
                "crash_loop_minutes"):
        if key in values and values[key] <= 0:
            problem(f"notify.{key} must be more than 0", key, index)
            ok = False
    if "retries" in values and values["retries"] < 0:
        problem("notify.retries must be 0 or more", "retries", index)
        ok = False
    if not ok:
        return None
    numbers: dict[str, Any] = {k: float(v) if isinstance(KEYS[k], tuple) else v
                               for k, v in values.items()
                               if k not in ("kind", "argv", "url", "on")}
    return NotifyConfig(kind=kind, argv=tuple(argv), url=url, on=tuple(dict.fromkeys(on)),
                        **numbers)
