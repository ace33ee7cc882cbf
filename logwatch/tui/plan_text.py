"""A recorded plan (the JSON the history keeps with its action) and a snapshot diff as the
lines the incident screen shows: `-` what the launch had, `+` what the plan makes of it, the
checks and refusals after. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logwatch.core.snapshot.model import diff_dicts

Styled = tuple[str, str]  # (tone: add, remove, ok, bad, note, plain), text


def plan_lines(plan: Mapping[str, Any], model: str | None = None) -> list[Styled]:
    """The plan as a diff of the launch, with why, its checks and what refused it."""
    out: list[Styled] = [("plain", f"plan {plan.get('id', '?')}: "
                                   + ", ".join(plan.get("causes") or []))]
    for change in plan.get("changes") or []:
        kind, name, value = change.get("kind"), change.get("name"), change.get("value")
        if kind == "model":
            out.append(("remove", f"- serve {model or '(the model served)'}"))
            out.append(("add", f"+ serve {value or '(an overlay: the ignore list merged)'}"))
        elif kind == "flag":
            out.append(("add", f"+ {name} {value}" if value is not None else f"+ {name}"))
        elif kind == "env":
            out.append(("add", f"+ {name}={value}"))
        elif kind in ("unset_flag", "unset_env"):
            out.append(("remove", f"- {name}"))
        else:
            out.append(("add", f"+ {name} (the model name the launch served)"))
        if change.get("reason"):
            out.append(("note", f"    why: {change['reason']}"))
    overlay = plan.get("overlay")
    if overlay:
        out.append(("add", f"+ {overlay.get('file')} {overlay.get('key')} += "
                           + ", ".join(overlay.get("entries") or [])))
    for check in plan.get("checks") or []:
        holds = check.get("holds")
        mark = {True: "ok", False: "NO"}.get(holds, "??")
        out.append(("ok" if holds else "bad", f"[{mark}] {check.get('name')}: "
                                              f"{check.get('why')}"))
    out.extend(("bad", f"REFUSED: {reason}") for reason in plan.get("refused") or [])
    out.extend(("note", f"note: {note}") for note in plan.get("notes") or [])
    if not plan.get("startable"):
        for alt in plan.get("alternatives") or []:
            out.append(("note", f"what else may work: {alt.get('summary', alt)}"))
    out.append(("ok", "startable") if plan.get("startable") else ("bad", "not startable"))
    return out


def snapshot_diff_lines(before: Mapping[str, Any], after: Mapping[str, Any],
                        limit: int = 40) -> list[Styled]:
    """What changed from the last healthy launch's configuration to this one."""
    changed = diff_dicts(dict(before), dict(after))
    out: list[Styled] = []
    for path, old, new in changed[:limit]:
        out.append(("remove", f"- {path}: {_short(old)}"))
        out.append(("add", f"+ {path}: {_short(new)}"))
    if len(changed) > limit:
        out.append(("note", f"... {len(changed) - limit} more differences"))
    return out or [("note", "no difference")]


def _short(value: Any, width: int = 100) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= width else text[: width - 1] + "…"
