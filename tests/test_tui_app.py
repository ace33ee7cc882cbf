"""The TUI driven with Textual's pilot: over a history with no daemon (read-only, nothing
to approve), and live over a real `logwatch run --relaunch ask` with the vLLM stand-in:
lines arrive, the plan waits, the operator approves it in the TUI, the target turns
healthy; the daemon going away shows "disconnected since" and coming back reconnects."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path

import pytest

from logwatch.tui.app import LogwatchApp
from logwatch.tui.screens.dashboard import DashboardScreen
from logwatch.tui.screens.help import HelpScreen
from logwatch.tui.screens.history import HistoryScreen
from logwatch.tui.screens.incident import IncidentScreen
from logwatch.tui.state import DOWN, HISTORY, LIVE
from tests.conftest import ROOT, SAMPLES, free_port

NOW = datetime(2026, 12, 2, 12, 0, 0)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("tui") / "h.duckdb"
    subprocess.run([sys.executable, "-m", "logwatch", "scan", "--db", str(db),
                    str(SAMPLES / "demo_marlin_and_mtp.log")], cwd=ROOT, check=False,
                   capture_output=True)
    assert db.exists()
    return db


async def _until(pilot: object, check: Callable[[], bool], timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "timed out"
        await pilot.pause(0.05)  # type: ignore[attr-defined]


async def test_without_a_daemon_the_history_is_shown_read_only(history: Path,
                                                               tmp_path: Path) -> None:
    app = LogwatchApp(tmp_path / "none.sock", history, clock=lambda: NOW)
    async with app.run_test(size=(120, 36)) as pilot:
        await _until(pilot, lambda: bool(app.board.targets))
        assert app.connection.kind == HISTORY and not app.can_act
        (target,) = app.board.targets
        assert (target.target, target.state) == ("demo_marlin_and_mtp.log", "failed")
        assert app.board.incidents[0].root_cause
        assert isinstance(app.screen, DashboardScreen)
        assert app.screen.check_action("approve", ()) is False  # hidden, not greyed
        await pilot.press("enter")
        await _until(pilot, lambda: isinstance(app.screen, IncidentScreen)
                     and bool(app.screen.diagnosis_text))
        await pilot.press("escape", "h")
        assert isinstance(app.screen, HistoryScreen)
        app.screen.run_preset("failures_by_config")
        screen = app.screen
        await _until(pilot, lambda: screen.result is not None)
        assert screen.result is not None and screen.result.rows
        screen.run_sql("DELETE FROM launches")  # refused, said inline
        await pilot.pause(0.5)
        assert "read-only" in str(screen.query_one("#sql-error").render())


@contextlib.asynccontextmanager
async def _asking_run(tmp_path: Path) -> AsyncIterator[tuple[subprocess.Popen[bytes], Path]]:
    """A real `logwatch run --relaunch ask` of the vLLM stand-in, and its socket; it must
    end by itself once interrupted (or once nothing is left to run)."""
    from tests.test_run_relaunch import _ended, _start

    run, sock = await asyncio.to_thread(_start, tmp_path, "ask", free_port())
    try:
        yield run, sock
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
        _ended(run, 60)


@pytest.mark.slow
async def test_approve_in_the_tui_relaunches_and_the_target_turns_healthy(
        tmp_path: Path) -> None:
    async with _asking_run(tmp_path) as (run, sock):
        app = LogwatchApp(sock, tmp_path / "h.duckdb")
        async with app.run_test(size=(120, 36)) as pilot:
            await _until(pilot, lambda: app.connection.kind == LIVE)
            await _until(pilot, lambda: any(a.answerable for a in app.board.actions), 90)
            assert app.board.plan is not None and app.board.plan["startable"]
            assert app.board.targets[0].state == "awaiting approval"
            await pilot.press("a")  # a confirmation first: nothing sent yet
            await pilot.pause(0.2)
            assert app.board.actions and app.board.actions[0].answerable
            await pilot.press("y")
            await _until(pilot, lambda: any("succeeded" in text for _, _, text in
                                            app.activity.entries), 120)
            await _until(pilot, lambda: bool(app.board.targets)
                         and app.board.targets[0].state == "healthy", 30)
            assert any("(operator:" in text and "approved" in text
                       for _, _, text in app.activity.entries)
            await pilot.press("l")
            await _until(pilot, lambda: len(app.ring.lines) > 10)
            await pilot.press("slash", *"INFO", "enter")  # the relaunch's lines: all INFO
            assert app.ring.filter.include == "INFO" and len(app.ring) > 0
            assert all("INFO" in app.ring.row(r).text for r in range(len(app.ring)))
            await pilot.press("escape")
            assert not app.ring.filter.active and len(app.ring) == len(app.ring.lines)
            run.send_signal(signal.SIGINT)  # the daemon goes away
            await _until(pilot, lambda: app.connection.kind == DOWN, 60)
            assert app.connection.since is not None


@pytest.mark.slow
async def test_the_tui_reconnects_when_the_daemon_comes_back(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text("INFO 12-02 11:00:00 [api_server.py:1] vLLM API server version 0.11.2\n")
    sock = tmp_path / "s.sock"

    def daemon() -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--file",
                                 str(log), "--db", str(tmp_path / "h.duckdb"), "--socket",
                                 str(sock)], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    first = daemon()
    second = None
    app = LogwatchApp(sock, tmp_path / "h.duckdb")
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await _until(pilot, lambda: app.connection.kind == LIVE)
            first.send_signal(signal.SIGTERM)
            await asyncio.to_thread(first.wait, 30)
            await _until(pilot, lambda: app.connection.kind == DOWN)
            bar = str(app.screen.query_one("ConnectionBar").render())
            assert "disconnected since" in bar
            second = daemon()
            await _until(pilot, lambda: app.connection.kind == LIVE)
            assert any("reconnected" in text for _, _, text in app.activity.entries)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def test_the_readmes_tui_section_is_what_the_app_does() -> None:
    """Its commands parse as `logwatch tui`, every key its table names is bound where it
    says, and the picture is a PNG beside it."""
    import re
    import shlex

    from logwatch.cli.parser import build_parser
    from logwatch.tui.screens.history import HistoryScreen as History
    from logwatch.tui.screens.log import LogScreen

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("### Watch it: `logwatch tui`")
    section = text[start:text.index("\n### ", start + 1)]
    commands = [shlex.split(line.split("  #")[0]) for line in
                section.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
                if line.strip()]
    assert len(commands) == 3
    for words in commands:
        args = build_parser().parse_args(words[1:])
        assert args.command == "tui"
    assert build_parser().parse_args(["tui", "--read-only"]).read_only is True
    image = re.search(r"!\[[^\]]*\]\(([^)]+)\)", section)
    assert image is not None
    assert (ROOT / image.group(1)).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    def keys(bindings: list[object]) -> set[str]:
        return {k for b in bindings for k in b.key.split(",")}  # type: ignore[attr-defined]

    table = {row.split("|")[1].strip().strip("`"): row for row in section.splitlines()
             if row.startswith("| `")}
    app_keys = keys(LogwatchApp.BINDINGS)
    assert {"d", "l", "h", "s", "question_mark"} <= app_keys and set(table) == {
        "d", "l", "h", "s", "?"}
    assert {"enter", "a", "x"} <= keys(DashboardScreen.BINDINGS)
    named = {"/": "slash", "\\": "backslash", "End": "end"}
    in_log = {named.get(k, k) for k in re.findall(r"`([^`]+)`", table["l"])} - {"G/End"}
    in_log |= {"G", "end", "e", "E", "w", "W"}
    assert in_log - {"l"} <= keys(LogScreen.BINDINGS)
    assert "ctrl+s" in keys(History.BINDINGS)


@pytest.mark.slow
async def test_reject_in_the_tui_drops_the_plan_and_nothing_relaunches(tmp_path: Path) -> None:
    from tests.test_run_relaunch import _ended

    async with _asking_run(tmp_path) as (run, sock):
        app = LogwatchApp(sock, tmp_path / "h.duckdb")
        async with app.run_test(size=(120, 36)) as pilot:
            await _until(pilot, lambda: any(a.answerable for a in app.board.actions), 90)
            action = app.board.actions[0].id
            await pilot.press("x")
            await pilot.press("escape")  # the confirmation, cancelled: still waiting
            await pilot.pause(0.3)
            assert [a.id for a in app.board.actions] == [action]
            await pilot.press("x", "y")
            await _until(pilot, lambda: any(f"{action} rejected (operator:" in text
                                            for _, _, text in app.activity.entries), 60)
        await asyncio.to_thread(_ended, run, 60)  # nothing more to run: `logwatch run` ends
        from logwatch.store.operator_sql import read_only_query

        moves = [r[0] for r in read_only_query(
            tmp_path / "h.duckdb", "SELECT to_state FROM action_transitions "
            f"WHERE action_id = '{action}' ORDER BY seq").rows]
        assert moves[-1] == "rejected" and "applying" not in moves


@pytest.mark.slow
async def test_the_signatures_screen_shows_a_reload_as_it_went(tmp_path: Path) -> None:
    from tests.test_control import SITE_SIGNATURE, daemon_with_a_site_library

    proc, site, _, sock = daemon_with_a_site_library(tmp_path)
    app = LogwatchApp(sock, tmp_path / "h.duckdb")
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await _until(pilot, lambda: app.connection.kind == LIVE)
            await pilot.press("s")
            await _until(pilot, lambda: bool((app.signature_states or {}).get("signatures")))
            head = app.screen.query_one("#library")
            (site / "local" / "boom.toml").write_text(SITE_SIGNATURE)
            await _until(pilot, lambda: "loaded" in str(head.render()))
            await _until(pilot, lambda: any(s["id"] == "site.boom" for s in
                                            (app.signature_states or {}).get("signatures",
                                                                             [])))
            (site / "local" / "broken.toml").write_text('id = "site.broken"\nversion = [\n')
            await _until(pilot, lambda: "refused" in str(head.render()))
            assert "broken.toml" in str(head.render())
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_text_from_logs_is_never_markup_in_toasts_column_names_or_the_dialog(
        history: Path, tmp_path: Path) -> None:
    """`[/]` used to end the app (a MarkupError) as a column name or in a toast, and
    `[@click=app.quit]` in a target's name quit it when the toast was clicked."""
    from textual.widgets import DataTable

    from logwatch.tui.screens.confirm import ConfirmScreen

    app = LogwatchApp(tmp_path / "none.sock", history, clock=lambda: NOW)
    async with app.run_test(size=(120, 36)) as pilot:
        await _until(pilot, lambda: bool(app.board.targets))
        hostile = "[/] [@click=app.quit]x[/] [bold red]y\x1b]52;c;aGk=\x07"
        app.notify(hostile)
        app.screen.notify(hostile, title="[/]")  # a widget's toast: markup on by default
        await pilot.pause(0.2)
        shown = [n.message for n in app._notifications]
        assert shown and all("[/] [@click=app.quit]x[/]" in m and "\x1b" not in m
                             for m in shown)
        await pilot.press("h")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        await _until(pilot, lambda: screen.result is not None)
        screen.run_sql('SELECT 1 AS "[/]", 2 AS "[@click=app.quit]q[/]"')
        await _until(pilot, lambda: screen.result is not None
                     and screen.result.columns[0] == "[/]")
        table = screen.query_one("#result", DataTable)
        assert [str(c.label) for c in table.columns.values()] == [
            "[/]", "[@click=app.quit]q[/]"]
        app.push_screen(ConfirmScreen("Approve x?\n\n[/] because\x1b[2J", "Approve"))
        await pilot.pause(0.2)
        text = str(app.screen.query_one("#question").render())
        assert "Approve x?\n\n[/] because^[[2J" in text
        assert app.is_running


@pytest.mark.slow
def test_the_live_demo_runs_in_a_workspace_whose_name_has_a_quote(tmp_path: Path) -> None:
    """`logwatch demo --keep DIR` writes DIR into the run's configuration: a `"` in it
    made the TOML invalid and the demo's TUI said only "no daemon"."""
    from logwatch.daemon.client import wait_ready
    from logwatch.demo.live import start_run
    from logwatch.demo.scenario import workspace

    run, sock = start_run(workspace(tmp_path / 'a "quoted" dir'), "b200", "ask")
    try:
        asyncio.run(wait_ready(sock, 30, alive=lambda: run.poll() is None))
    finally:
        run.send_signal(signal.SIGINT)
        run.wait(30)


async def test_the_history_chart_ranks_root_causes_and_severity_before_counts(
        history: Path, tmp_path: Path) -> None:
    """The chart has eight rows: the critical root causes of the sample's two failed
    launches are on it, first, and no info line (`lifecycle.*`, logged at every start)
    stands above an error."""
    app = LogwatchApp(tmp_path / "none.sock", history, clock=lambda: NOW)
    async with app.run_test(size=(120, 36)) as pilot:
        await _until(pilot, lambda: bool(app.board.targets))
        await pilot.press("h")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        await _until(pilot, lambda: bool(screen.chart))
        shown = [signature for signature, _, _ in screen.chart]
        assert set(shown[:2]) == {"marlin.repack_tile_n", "weights.tensor_size_mismatch"}, \
            shown
        infos = [i for i, s in enumerate(shown) if s.startswith("lifecycle.")]
        errors = [i for i, s in enumerate(shown) if s.startswith("engine.")]
        assert errors and all(i > max(errors) for i in infos), shown


async def test_help_lists_each_key_once(history: Path, tmp_path: Path) -> None:
    """`G,end` is one binding for two keys: `?` listed `G Follow` twice."""
    app = LogwatchApp(tmp_path / "none.sock", history, clock=lambda: NOW)
    async with app.run_test(size=(120, 36)) as pilot:
        await _until(pilot, lambda: bool(app.board.targets))
        await pilot.press("l", "question_mark")
        await _until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert isinstance(app.screen, HelpScreen)
        rows = app.screen.rows
        follow = [keys for keys, what in rows if what == "Follow"]
        assert len(follow) == 1 and "end" in follow[0], rows
        assert len({what for _, what in rows}) == len(rows), rows
