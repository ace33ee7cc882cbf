"""The dashboard: each target with its state and configuration, the newest launches' open
incidents (root cause first), the plan waiting for an operator with Approve / Reject behind a
confirmation (hidden with --read-only), and what happened lately."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Static

from logwatch.tui.board import TONE
from logwatch.tui.messages import BoardChanged
from logwatch.tui.plan_text import plan_lines
from logwatch.tui.render import SEVERITY_STYLE, TONE_STYLE, cell, plain, styled_lines
from logwatch.tui.screens.base import AppScreen
from logwatch.tui.widgets.connection_bar import ConnectionBar
from logwatch.tui.widgets.fitted_table import fill

TARGET_COLUMNS = ("target", "state", "root cause", "launch", "uptime", "vLLM", "GPU",
                  "scheme", "kernel", "MTP", "snapshot")  # what matters most on the left
ACTIVITY_LINES = 12  # before the panel has a size
INCIDENT_COLUMNS = ("sev", "target", "signature", "diagnosis", "n")


class DashboardScreen(AppScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_incident", "Open", priority=True),  # the incident, over the table
        Binding("a", "approve", "Approve"),
        Binding("x", "reject", "Reject"),
        Binding("c", "copy", "Copy"),
    ]

    def compose(self) -> ComposeResult:
        yield ConnectionBar()
        yield DataTable(id="targets", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="middle"):
            with Vertical(id="incidents-pane"):
                yield Static("Open incidents", classes="pane-title")
                yield DataTable(id="incidents", cursor_type="row")
            with Vertical(id="plan-pane"):
                yield Static("Pending plan", classes="pane-title", id="plan-title")
                yield Static(id="plan")
        yield Static(id="activity")
        yield Footer(compact=True, show_command_palette=False)  # fits 80 columns (? lists ctrl+p)

    def on_mount(self) -> None:
        self.query_one("#incidents", DataTable).focus()
        self.draw()

    def on_board_changed(self, _: BoardChanged) -> None:
        self.draw()
        self.refresh_bindings()

    def draw(self) -> None:
        board = self.lw.board
        targets = self.query_one("#targets", DataTable)
        keep = targets.cursor_row
        rows: list[list[Text | str]] = [
            [cell(row.target, "bold"), cell(row.state, TONE_STYLE[TONE.get(row.state, "idle")]),
             cell(row.cause, "red"), cell(row.launch), cell(row.uptime), cell(row.vllm),
             cell(row.gpu), cell(row.scheme),
             cell(row.kernel, "yellow" if row.kernel.startswith("Marlin") else ""),
             cell(row.mtp, "red" if "not" in row.mtp.lower() else ""),
             cell(row.snapshot, "dim")] for row in board.targets]
        if not board.targets:
            rows.append([cell("—", "dim"), cell("no launch recorded yet", "dim"),
                         *[""] * (len(TARGET_COLUMNS) - 2)])
        fill(targets, TARGET_COLUMNS, rows)  # widths fit what is shown now, not what was
        targets.move_cursor(row=min(keep, max(0, targets.row_count - 1)))
        incidents = self.query_one("#incidents", DataTable)
        keep = incidents.cursor_row
        shown: list[list[Text | str]] = []
        for incident in board.incidents:
            sev = ("ROOT " if incident.root_cause else "") + incident.severity
            style = SEVERITY_STYLE.get(incident.severity, "")
            if incident.severity == "info" and incident.diagnosis:
                sev, style = "latent", "yellow"  # not a failure yet (a kernel vLLM chose)
            shown.append([cell(sev, style), cell(incident.target),
                          cell(incident.signature, "bold"),
                          cell(incident.diagnosis or incident.title), cell(incident.count)])
        fill(incidents, INCIDENT_COLUMNS, shown, keys=[i.id for i in board.incidents])
        incidents.move_cursor(row=min(keep, max(0, incidents.row_count - 1)))
        self._draw_plan()
        self._draw_activity()
        if board.error:
            self.notify(f"refresh failed: {board.error}", severity="error", timeout=4)
            board.error = ""

    def _draw_plan(self) -> None:
        board = self.lw.board
        title = self.query_one("#plan-title", Static)
        panel = self.query_one("#plan", Static)
        if not board.actions:
            title.update("Pending plan")
            panel.update(Text("no action is waiting", style="dim"))
            return
        first = board.actions[0]
        keys = (" — a: approve · x: reject" if self.lw.can_act and first.answerable else
                " — x: reject" if self.lw.can_act else " — read-only")
        title.update(cell(f"Pending plan: {first.target} · {first.state.replace('_', ' ')}"
                          f"{keys}", "bold magenta"))
        body = Text()
        body.append(f"action {first.id}\n", style="dim")
        body.append(cell(first.reason))
        body.append("\n")
        if board.plan and board.plan_action == first.id:
            body.append(styled_lines(plan_lines(board.plan, board.model)))
        more = len(board.actions) - 1
        if more > 0:
            body.append(f"\n{more} more open action(s): `logwatch status` lists them", "dim")
        panel.update(body)

    def _draw_activity(self) -> None:
        panel = self.query_one("#activity", Static)
        rows = panel.content_size.height or ACTIVITY_LINES  # the newest that fit, one a row
        entries = list(self.lw.activity.entries)[-rows:]
        text = Text(no_wrap=True, overflow="ellipsis")
        for at, tone, what in entries:
            text.append(f"{at:%H:%M:%S} ", style="dim")
            text.append(cell(what, TONE_STYLE.get(tone, "")))
            text.append("\n")
        panel.update(text if entries else Text("nothing yet", style="dim"))

    def on_resize(self) -> None:
        self._draw_activity()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("approve", "reject"):
            actions = self.lw.board.actions
            if not self.lw.can_act:
                return False  # --read-only or no daemon: not even shown
            if not actions:
                return None  # shown, greyed: nothing waits
            if action == "approve" and not actions[0].answerable:
                return None
        return True

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "incidents":
            self._open(event.row_key.value)

    def action_open_incident(self) -> None:
        table = self.query_one("#incidents", DataTable)
        if table.row_count and self.lw.board.incidents:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
            self._open(key.value)

    def _open(self, incident_id: str | None) -> None:
        if not incident_id:
            return
        from logwatch.tui.screens.incident import IncidentScreen

        self.app.push_screen(IncidentScreen(incident_id))

    def action_approve(self) -> None:
        self._confirm("approve")

    def action_reject(self) -> None:
        self._confirm("reject")

    def _confirm(self, verb: str) -> None:
        actions = self.lw.board.actions
        if not self.lw.can_act or not actions:
            return
        action = actions[0]
        from logwatch.tui.screens.confirm import ConfirmScreen

        question = (f"{verb.capitalize()} action {action.id} for {action.target}?\n\n"
                    f"{action.reason}\n\nThe daemon records you (this terminal's user) as "
                    "the operator.")

        def answered(yes: bool | None) -> None:
            if yes:
                self._send(verb, action.id)
        self.app.push_screen(ConfirmScreen(question, verb.capitalize()), answered)

    @work(group="act")
    async def _send(self, verb: str, action_id: str) -> None:
        done, said = await self.lw.act(verb, id=action_id, reason="from the logwatch TUI")
        self.notify(said, title=f"{verb} {'sent' if done else 'refused'}",
                    severity="information" if done else "error")

    def action_copy(self) -> None:
        """The selected incident's diagnosis, else the pending plan's reason (OSC 52)."""
        board = self.lw.board
        table = self.query_one("#incidents", DataTable)
        if board.incidents and table.row_count:
            row = board.incidents[min(table.cursor_row, len(board.incidents) - 1)]
            text = f"{row.signature}: {row.diagnosis or row.title}"
        elif board.actions:
            text = board.actions[0].reason
        else:
            return
        self.app.copy_to_clipboard(plain(text))  # controls shown, never sent
        self.notify("copied to the clipboard (OSC 52)", timeout=2)
