"""One incident: its diagnosis in plain words, the evidence (the first lines, a long
traceback folded), the captured values, the configuration fields that differ from the last
launch that served, the plan as a diff and the action's moves. `c` copies the diagnosis."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Collapsible, Footer, Static

from logwatch.tui import queries
from logwatch.tui.backend import BackendError
from logwatch.tui.board import target_of
from logwatch.tui.plan_text import plan_lines, snapshot_diff_lines
from logwatch.tui.render import SEVERITY_STYLE, cell, plain, styled_lines
from logwatch.tui.screens.base import AppScreen
from logwatch.tui.widgets.connection_bar import ConnectionBar

FOLD_LINES = 6  # evidence longer than this starts folded
MAX_DETAILS = 8  # a diagnosis's details shown under it
MAX_VALUE = 100  # a configuration value's characters shown


class IncidentScreen(AppScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "app.pop_screen", "Back"),
        Binding("c", "copy", "Copy diagnosis"),
    ]

    def __init__(self, incident_id: str) -> None:
        super().__init__()
        self.incident_id = incident_id
        self.diagnosis_text = ""

    def compose(self) -> ComposeResult:
        yield ConnectionBar()
        with VerticalScroll(id="incident"):
            yield Static(Text("reading…", style="dim"), id="summary")
            yield Static(id="diagnosis")
            with Collapsible(title="Evidence", id="evidence-box", collapsed=False):
                yield Static(id="evidence")
            yield Static(id="captures")
            yield Static(id="config")
            yield Static(id="incident-plan")
            yield Static(id="timeline")
        yield Footer(compact=True, show_command_palette=False)  # fits 80 columns (? lists ctrl+p)

    def on_mount(self) -> None:
        self.draw_connection()
        self.load()

    @work(group="incident", exclusive=True)
    async def load(self) -> None:
        backend = self.lw.backend
        if backend is None:
            return
        try:
            rows = (await backend.sql(queries.incident(self.incident_id))).dicts()
            if not rows:
                self.query_one("#summary", Static).update(
                    cell(f"incident {self.incident_id}: not in the history", "red"))
                return
            incident = rows[0]
            findings = (await backend.sql(queries.incident_findings(self.incident_id))).dicts()
            diagnoses = (await backend.sql(queries.diagnoses(self.incident_id))).dicts()
            launch = (await backend.sql(
                "SELECT source, number, snapshot_hash FROM launches WHERE id = "
                + queries.literal(str(incident["launch_id"] or "")))).dicts()
            config = await self._config_diff(backend, incident)
            actions = []
            if launch:
                actions = (await backend.sql(queries.launch_actions(
                    target_of(str(launch[0]["source"])), int(launch[0]["number"])))).dicts()
        except (BackendError, ValueError) as exc:
            self.query_one("#summary", Static).update(cell(f"could not read it: {exc}", "red"))
            return
        self._draw(incident, findings, diagnoses, config, actions)

    async def _config_diff(self, backend: Any, incident: dict[str, Any]) -> Text:
        launch_id, digest = incident.get("launch_id"), incident.get("snapshot_hash")
        if not launch_id or not digest:
            return Text("no configuration recorded with it", style="dim")
        healthy = (await backend.sql(queries.last_healthy_before(str(launch_id)))).rows
        if not healthy:
            return Text("no earlier launch of this source served with another configuration",
                        style="dim")
        before = (await backend.sql(queries.snapshot_body(str(healthy[0][0])))).rows
        after = (await backend.sql(queries.snapshot_body(str(digest)))).rows
        if not before or not after:
            return Text("a snapshot is missing from the history", style="dim")
        head = Text()
        head.append(f"since the last launch that served ({str(healthy[0][0])[:12]}):\n",
                    style="bold")
        head.append(styled_lines(snapshot_diff_lines(queries.json_value(before[0][0]),  # type: ignore[arg-type]
                                                     queries.json_value(after[0][0]))))  # type: ignore[arg-type]
        return head

    def _draw(self, incident: dict[str, Any], findings: list[dict[str, Any]],
              diagnoses: list[dict[str, Any]], config: Text,
              actions: list[dict[str, Any]]) -> None:
        severity = str(incident["severity"])
        summary = Text()
        summary.append(f" {severity.upper()} ", style=SEVERITY_STYLE.get(severity, "") or "bold")
        summary.append(" ")
        summary.append(cell(incident["signature"], "bold"))
        summary.append(cell(f" v{incident['signature_version']}", "dim"))
        if incident["root_cause"]:
            summary.append("  root cause", style="bold red")
        summary.append("\n")
        summary.append(cell(incident["title"], "bold"))
        summary.append("\n")
        summary.append(cell(f"{incident['count']} occurrence(s) · first "
                            f"{plain(incident['first_time'])} at {plain(incident['first_source'])}"
                            f":{incident['first_line']} · processes "
                            f"{', '.join(map(str, incident['processes'] or [])) or '—'}",
                            "dim"))
        self.query_one("#summary", Static).update(summary)
        text = heading("Diagnosis")
        if diagnoses:
            for d in diagnoses:
                text.append(cell(f"{d['title']}", "bold"))
                text.append(cell(f"  (confidence {float(d['confidence'] or 0):.0%}, "
                                 f"cause {d['cause']})", "dim"))
                text.append("\n")
                text.append(Text(plain_lines(d["summary"]) + "\n"))
                details = queries.json_value(d.get("details"))
                for detail in (details if isinstance(details, list) else [])[:MAX_DETAILS]:
                    text.append(f"  • {plain(detail)}", style="dim")
                    text.append("\n")
            self.diagnosis_text = "\n".join(f"{d['title']}\n{d['summary']}" for d in diagnoses)
        else:
            text.append(Text(plain_lines(incident["explanation"] or "no diagnosis recorded")))
            self.diagnosis_text = str(incident["explanation"] or incident["title"])
        self.query_one("#diagnosis", Static).update(text)
        evidence = [str(f["text"] or "") for f in findings]
        lines = "\n".join(evidence).splitlines()
        box = self.query_one("#evidence-box", Collapsible)
        box.title = f"Evidence ({len(findings)} finding(s), {len(lines)} line(s))"
        box.collapsed = len(lines) > FOLD_LINES
        self.query_one("#evidence", Static).update(Text(plain_lines("\n".join(lines))))
        captures = queries.json_value(incident["captures"]) or {}
        cap = heading("Captures")
        for key, value in (captures.items() if isinstance(captures, dict) else []):
            cap.append(f"  {plain(key)} = ", style="dim")
            cap.append(plain(value), style="bold")
            cap.append("\n")
        self.query_one("#captures", Static).update(cap)
        conf = heading("Configuration")
        conf.append(fields_involved(diagnoses))
        conf.append(config)
        self.query_one("#config", Static).update(conf)
        plan = heading("Plan")
        moves = heading("Action")
        if actions:
            body = queries.json_value(actions[-1]["plan"])
            if isinstance(body, dict):
                plan.append(styled_lines(plan_lines(body)))
            for a in actions:
                moves.append(f"  {plain(a['time'])}  ", style="dim")
                moves.append(f"{plain(a['to_state']):<18}", style="bold")
                moves.append(f" {plain(a['actor'])}: {plain(a['reason'])}")
                moves.append("\n")
        else:
            plan.append("no action was proposed for this launch\n", style="dim")
        self.query_one("#incident-plan", Static).update(plan)
        self.query_one("#timeline", Static).update(moves if actions else Text())

    def action_copy(self) -> None:
        if self.diagnosis_text:
            self.app.copy_to_clipboard(plain_lines(self.diagnosis_text))  # controls shown
            self.notify("diagnosis copied (OSC 52)", timeout=2)


def fields_involved(diagnoses: list[dict[str, Any]]) -> Text:
    """The configuration each diagnosis judged, field by field (values cut to a line)."""
    text = Text()
    for d in diagnoses:
        fields = queries.json_value(d.get("config"))
        if not isinstance(fields, dict) or not fields:
            continue
        text.append(f"{plain(d['cause'])} looked at:\n", style="bold")
        for key, value in fields.items():
            shown = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) \
                else value
            text.append(f"  {plain(key)} = ", style="dim")
            text.append(plain(shown if len(shown) <= MAX_VALUE else
                              shown[:MAX_VALUE - 1] + "…"))
            text.append("\n")
    return text


def heading(title: str) -> Text:
    text = Text()
    text.append(f"\n{title}\n", style="bold underline")
    return text


def plain_lines(value: Any) -> str:
    """Multi-line text with its control characters shown, newlines kept."""
    from logwatch.core.safe_text.visible import visible

    return visible(str(value), lines=True)
