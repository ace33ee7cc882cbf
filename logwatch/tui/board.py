"""What the dashboard shows, worked out from the daemon's status and the history's rows:
each target's state and configuration, its open incidents (root cause first), the plans
waiting for an operator. Pure: dictionaries and rows in, frozen dataclasses out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# an open action's state -> the target's state while it is there
_ACTION_STATES = {
    "proposed": "awaiting approval", "awaiting_approval": "awaiting approval",
    "approved": "relaunching", "applying": "relaunching", "restarting": "relaunching",
    "verifying": "verifying", "rolling_back": "rolling back", "blocked": "blocked",
}
_ENDED_STATES = {"succeeded": "healthy", "rolled_back": "rolled back",
                 "escalated": "rolled back", "rollback_failed": "rollback failed",
                 "verify_failed": "rolled back"}
# how each state is drawn: the style's name in app.tcss terms (good, busy, bad, idle)
TONE = {"healthy": "good", "serving": "good", "starting": "busy", "relaunching": "busy",
        "verifying": "busy", "rolling back": "busy", "awaiting approval": "ask",
        "blocked": "ask", "failed": "bad", "rolled back": "bad", "rollback failed": "bad",
        "breaker open": "bad", "crash loop": "bad", "stopped": "idle", "crashed": "bad",
        "replaced": "idle", "unknown": "idle"}


# an activity line's tone: an action's new state, a launch's outcome (live events and the
# history seeded when a TUI connects say them alike)
ACTION_TONE = {"succeeded": "good", "escalated": "bad", "rolled_back": "bad",
               "verify_failed": "bad", "rollback_failed": "bad", "awaiting_approval": "ask",
               "rejected": "idle", "expired": "idle"}
LAUNCH_TONE = {"failed": "bad", "crashed": "bad", "serving": "good"}


def target_of(source: str) -> str:
    """The target a source belongs to: `run:NAME` is `logwatch run --target NAME`, a
    configured target's sources are `NAME:...`; other sources are their own target, a
    file by its name."""
    kind, _, rest = source.partition(":")
    if kind == "run" and rest:
        return rest
    if kind in ("file", "journal", "stdin", "glob") or not rest:
        return source.rsplit("/", 1)[-1] if "/" in source else source
    return kind


@dataclass(frozen=True, slots=True)
class TargetRow:
    target: str
    source: str
    state: str
    launch: str  # "#3"
    vllm: str
    gpu: str
    scheme: str
    kernel: str
    mtp: str
    snapshot: str
    uptime: str
    cause: str  # the root cause's signature, when it failed
    launch_id: str | None = None

    @property
    def tone(self) -> str:
        return TONE.get(self.state, "idle")


@dataclass(frozen=True, slots=True)
class IncidentRow:
    id: str
    severity: str
    fatal: bool
    root_cause: bool
    signature: str
    title: str
    count: int
    target: str
    diagnosis: str


@dataclass(frozen=True, slots=True)
class PendingAction:
    id: str
    target: str
    state: str
    reason: str

    @property
    def answerable(self) -> bool:
        """An operator's approve applies (reject applies to every open one not started)."""
        return self.state == "awaiting_approval"


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
    return f"{seconds // 86400}d{seconds // 3600 % 24:02d}h"


def _kernel(marlin: Any, scheme: str | None) -> str:
    if marlin in (True, "true"):
        return "Marlin (weight-only)"
    if marlin in (False, "false"):
        return "W4A4 (CUTLASS/FlashInfer)" if scheme and "w4a4" in scheme.lower() \
            else "not Marlin"
    return "?"


def _mtp(uses: Any, covered: Any, modules: Any, uncovered: Any) -> str:
    if uses is None:
        return "?"
    if not uses:
        return "none"
    if covered:
        return f"covered ({modules} modules)" if modules else "covered"
    return f"{uncovered} not covered" if uncovered else "NOT covered"


def _time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def target_rows(rows: Sequence[Mapping[str, Any]], status: Mapping[str, Any] | None,
                last_actions: Mapping[str, str], now: datetime) -> list[TargetRow]:
    """One row per source's newest launch (the TARGETS query), its state from the launch's
    outcome, the target's open action, breaker and last ended action. `status`: the
    daemon's (None: no daemon, the history alone); `last_actions`: target -> the state of
    its newest action in the history."""
    relaunch = (status or {}).get("relaunch") or {}
    open_by_target: dict[str, str] = {}
    for action in relaunch.get("actions") or []:
        open_by_target.setdefault(action["target"], action["state"])
    breakers = relaunch.get("breakers") or {}
    live = {launch["source"]: launch for launch in (status or {}).get("launches") or []}
    out = []
    for row in rows:
        source = str(row["source"])
        target = target_of(source)
        outcome = str(live.get(source, {}).get("outcome") or row["outcome"] or "unknown")
        state = outcome
        if breakers.get(target):
            state = "breaker open"
        elif target in open_by_target:
            state = _ACTION_STATES.get(open_by_target[target], open_by_target[target])
        elif outcome == "serving" and last_actions.get(target) == "succeeded":
            state = "healthy"
        elif outcome == "failed" and last_actions.get(target) in _ENDED_STATES:
            state = _ENDED_STATES[last_actions[target]]
            state = "failed" if state == "healthy" else state
        if state == "failed" and live.get(source, {}).get("crash_loop"):
            state = "crash loop"  # failing again and again: the daemon's judgement
        started = _time(row.get("started"))
        capability = row.get("gpu_capability")
        sm = f"sm {int(capability) / 10:.1f}" if capability else ""
        name = str(row.get("gpu_name") or "")
        gpu = f"{name} ({sm})" if name and sm else name or sm or "?"
        scheme = row.get("quant_scheme")
        out.append(TargetRow(
            target=target, source=source, state=state, launch=f"#{row.get('number')}",
            vllm=str(row.get("vllm_version") or "?"), gpu=gpu, scheme=str(scheme or "?"),
            kernel=_kernel(row.get("marlin"), scheme),
            mtp=_mtp(row.get("uses_mtp"), row.get("mtp_covered"), row.get("mtp_modules"),
                     row.get("mtp_uncovered")),
            snapshot=str(row.get("snapshot_hash") or "?")[:12],
            uptime=_age((now - started).total_seconds()) if started and outcome in (
                "serving", "starting") else "—",
            cause=str(row.get("root_signature") or ""), launch_id=str(row["id"])))
    return out


def incident_rows(rows: Sequence[Mapping[str, Any]]) -> list[IncidentRow]:
    """The OPEN_INCIDENTS query's rows, in its order (root cause first)."""
    return [IncidentRow(id=str(r["id"]), severity=str(r["severity"] or "?"),
                        fatal=bool(r["fatal"]), root_cause=bool(r["root_cause"]),
                        signature=str(r["signature"]), title=str(r["title"] or ""),
                        count=int(r["count"] or 0), target=target_of(str(r["source"])),
                        diagnosis=str(r["diagnosis"] or "")) for r in rows]


def pending_actions(status: Mapping[str, Any] | None,
                    history_rows: Sequence[Mapping[str, Any]]) -> list[PendingAction]:
    """The open actions: the daemon's when it runs, else what the history last said."""
    if status is not None:
        source: Sequence[Mapping[str, Any]] = (status.get("relaunch") or {}).get("actions") \
            or []
    else:
        source = history_rows
    return [PendingAction(str(a["id"]), str(a["target"]), str(a["state"]),
                          str(a.get("reason") or "")) for a in source]


def recent_activity(rows: Sequence[Mapping[str, Any]]
                    ) -> list[tuple[datetime | None, str, str]]:
    """The RECENT query's rows, oldest first, as (time, tone, text) for the activity."""
    out: list[tuple[datetime | None, str, str]] = []
    for row in reversed(rows):
        kind, what, why = str(row["kind"]), str(row["what"] or ""), str(row["why"] or "")
        who = target_of(str(row["who"] or ""))
        if kind == "launch":
            tone = LAUNCH_TONE.get(what, "busy")
            text = f"{who}: launch {what}" + (f" — root cause {why}" if why else "")
        elif kind == "action":
            tone = ACTION_TONE.get(what, "busy")
            text = f"{who}: action {what} ({why})"
        else:
            tone, text = "ask", f"diagnosis: {what}"
        out.append((_time(row["time"]), tone, text))
    return out


def as_dicts(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(columns, row, strict=True)) for row in rows]


SPARK = "▁▂▃▄▅▆▇█"


def sparkline(counts: Sequence[int]) -> str:
    """Counts as block characters, scaled to the largest (a zero stays blank-low)."""
    top = max(counts, default=0)
    if top <= 0:
        return SPARK[0] * len(counts)
    return "".join(" " if c == 0 else SPARK[min(len(SPARK) - 1, (c * len(SPARK) - 1) // top)]
                   for c in counts)


def timeline(rows: Sequence[Mapping[str, Any]], hours: int = 48
             ) -> list[tuple[str, str, int]]:
    """The TIMELINE query's rows as (signature, sparkline over `hours` hours ending at the
    newest hour seen, total): root causes first, then by worst severity, then by count (an
    info line logged at every start outnumbers the failure that ended the launch)."""
    stamps = [t for r in rows if (t := _time(r["hour"])) is not None]
    if not stamps:
        return []
    end = max(stamps)
    by_signature: dict[str, list[int]] = {}
    rank: dict[str, tuple[bool, int]] = {}  # (never a root cause, worst severity rank)
    for row in rows:
        hour = _time(row["hour"])
        if hour is None:
            continue
        slot = hours - 1 - int((end - hour).total_seconds() // 3600)
        if 0 <= slot < hours:
            signature = str(row["signature"])
            by_signature.setdefault(signature, [0] * hours)[slot] += int(row["incidents"])
            held = rank.get(signature, (True, 3))
            severity = row.get("severity_rank")
            rank[signature] = (held[0] and not row.get("root_cause"),
                               min(held[1], 3 if severity is None else int(severity)))
    return sorted(((sig, sparkline(c), sum(c)) for sig, c in by_signature.items()),
                  key=lambda item: (*rank[item[0]], -item[2], item[0]))
