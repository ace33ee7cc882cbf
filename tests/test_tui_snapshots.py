"""Pictures of every screen, compared with the accepted ones in `__snapshots__/` (update
with `pytest --snapshot-update` and look at the SVGs before committing them). The data is
a real scan of the demo's sample under a fixed clock (`tests/tui_history.py`), read
through the same queries a daemon answers; the live log is fed the sample's lines and
findings as the daemon's events would carry them. No daemon runs, so the app is in its
read-only history mode: approving is pictured by the pilot tests against a real one."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from logwatch.daemon.protocol import FindingEvent, LinesEvent
from logwatch.tui.app import LogwatchApp
from logwatch.tui.screens.dashboard import DashboardScreen
from logwatch.tui.screens.history import HistoryScreen
from logwatch.tui.screens.incident import IncidentScreen
from logwatch.tui.screens.signatures import SignaturesScreen
from tests.conftest import ROOT
from tests.tui_history import DB, NOW, build

Compare = Callable[..., bool]
WIDE, NARROW = (120, 36), (80, 24)
WINDOW_BUTTONS = {"#ff5f57", "#febc2e", "#28c840"}  # the SVG's window frame, not the app


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tui-pictures") / "ws"
    build(path)
    return path


@pytest.fixture
def app(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> LogwatchApp:
    monkeypatch.chdir(workspace)  # the history is named by its relative path
    monkeypatch.delenv("NO_COLOR", raising=False)
    return LogwatchApp(Path("no-daemon.sock"), Path(DB), clock=lambda: NOW,
                       library_dirs=(ROOT / "signatures",))


async def _until(pilot: Pilot[Any], check: Callable[[], bool]) -> None:
    for _ in range(600):
        if check():
            busy = [w for w in pilot.app.workers if w.group != "watch"]  # it never ends
            if busy:  # (an empty list would mean all of them)
                await pilot.app.workers.wait_for_complete(busy)
            await pilot.pause()
            return
        await pilot.pause(0.05)
    raise AssertionError("the screen never got its data")


def _board_read(app: LogwatchApp) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def wait(pilot: Pilot[Any]) -> None:
        await _until(pilot, lambda: bool(app.board.targets) and app.board.plan is not None)
    return wait


def test_dashboard(snap_compare: Compare, app: LogwatchApp) -> None:
    assert snap_compare(app, terminal_size=WIDE, run_before=_board_read(app))


def test_dashboard_at_80x24(snap_compare: Compare, app: LogwatchApp) -> None:
    assert snap_compare(app, terminal_size=NARROW, run_before=_board_read(app))


def test_incident(snap_compare: Compare, app: LogwatchApp) -> None:
    async def open_root_cause(pilot: Pilot[Any]) -> None:
        await _board_read(app)(pilot)
        await pilot.press("enter")
        await _until(pilot, lambda: isinstance(app.screen, IncidentScreen)
                     and bool(app.screen.diagnosis_text))
    assert snap_compare(app, terminal_size=WIDE, run_before=open_root_cause)


async def _log_fed(app: LogwatchApp, pilot: Pilot[Any], workspace: Path) -> None:
    """The live log on show, the sample in it."""
    await _board_read(app)(pilot)
    await pilot.press("l")
    _feed_the_sample(app, workspace)
    await _until(pilot, lambda: len(app.ring) > 0)


def _feed_the_sample(app: LogwatchApp, workspace: Path) -> None:
    """The sample's lines and the history's findings, as a daemon's events carry them."""
    source = "file:logs/vllm.log"
    text = (workspace / "logs" / "vllm.log").read_bytes().decode()  # \r kept, as read
    app._on_event(LinesEvent(source=source, first_line=1, text=text,
                             count=text.count("\n")))
    import duckdb

    with duckdb.connect(str(workspace / DB), read_only=True) as con:
        rows = con.execute(
            "SELECT f.line, f.signature, i.severity, i.fatal FROM findings f "
            "JOIN incidents i ON i.id = f.incident_id ORDER BY f.line").fetchall()
    for line, signature, severity, fatal in rows:
        app._on_event(FindingEvent(source=source, line=line, signature=signature,
                                   severity=severity, fatal=fatal, captures={}))


def test_log_paused_on_the_first_error(snap_compare: Compare, app: LogwatchApp,
                                       workspace: Path) -> None:
    async def feed(pilot: Pilot[Any]) -> None:
        await _log_fed(app, pilot, workspace)
        await pilot.press("g", "e")  # from the top to the first error: paused, not following
    assert snap_compare(app, terminal_size=WIDE, run_before=feed)


def test_log_filtered_to_one_process(snap_compare: Compare, app: LogwatchApp,
                                     workspace: Path) -> None:
    async def feed(pilot: Pilot[Any]) -> None:
        await _log_fed(app, pilot, workspace)
        await pilot.press("slash", *"Error", "enter")
        for _ in range(len(app.ring.processes())):  # p: the next process the lines name
            if app.ring.filter.process == "Worker_TP1":
                break
            await pilot.press("p")
        assert app.ring.filter.process == "Worker_TP1"
    assert snap_compare(app, terminal_size=WIDE, run_before=feed)


async def _history_shown(app: LogwatchApp, pilot: Pilot[Any]) -> HistoryScreen:
    """The history screen, its first query answered and its chart drawn (the chart's query
    is a worker of its own: under load it used to be missing from the picture)."""
    await _board_read(app)(pilot)
    await pilot.press("h")
    screen = app.screen
    assert isinstance(screen, HistoryScreen)
    await _until(pilot, lambda: screen.result is not None and bool(screen.chart))
    # the rows in and laid out (their column widths are set before any row: fitted_table)
    table = screen.query_one("#result", DataTable)
    await _until(pilot, lambda: screen.result is not None
                 and table.row_count == len(screen.result.rows)
                 and not table._require_update_dimensions)
    return screen


def test_history(snap_compare: Compare, app: LogwatchApp) -> None:
    async def query(pilot: Pilot[Any]) -> None:
        await _history_shown(app, pilot)
    assert snap_compare(app, terminal_size=WIDE, run_before=query)


def test_history_error_inline(snap_compare: Compare, app: LogwatchApp) -> None:
    async def refused(pilot: Pilot[Any]) -> None:
        screen = await _history_shown(app, pilot)
        screen.run_sql("DELETE FROM launches")
        await _until(pilot, lambda: "read-only" in str(screen.query_one("#sql-error").render()))
        # the error line takes a row: the table lays itself out again on idle
        table = screen.query_one("#result", DataTable)
        await _until(pilot, lambda: not table._require_update_dimensions)
        await pilot.pause()
    assert snap_compare(app, terminal_size=WIDE, run_before=refused)


def test_signatures(snap_compare: Compare, app: LogwatchApp) -> None:
    async def listed(pilot: Pilot[Any]) -> None:
        await _board_read(app)(pilot)
        await pilot.press("s")
        await _until(pilot, lambda: isinstance(app.screen, SignaturesScreen)
                     and "hits" in (app.signature_states or {})
                     and app.screen.query_one(DataTable).row_count > 0)
    assert snap_compare(app, terminal_size=WIDE, run_before=listed)


def test_help(snap_compare: Compare, app: LogwatchApp) -> None:
    async def keys(pilot: Pilot[Any]) -> None:
        await _board_read(app)(pilot)
        await pilot.press("question_mark")
    assert snap_compare(app, terminal_size=NARROW, run_before=keys)


async def test_no_color_draws_in_greys_only(workspace: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """NO_COLOR set: every colour on screen is a grey (the same picture has colours
    without it)."""
    monkeypatch.chdir(workspace)

    async def colours(no_color: bool) -> set[str]:
        if no_color:
            monkeypatch.setenv("NO_COLOR", "1")
        else:
            monkeypatch.delenv("NO_COLOR", raising=False)
        app = LogwatchApp(Path("no-daemon.sock"), Path(DB), clock=lambda: NOW)
        async with app.run_test(size=WIDE) as pilot:
            await _board_read(app)(pilot)
            svg = app.export_screenshot()
        return set(re.findall(r"#[0-9a-f]{6}", svg.lower()))

    def grey(colour: str) -> bool:
        if colour in WINDOW_BUTTONS:
            return True
        r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
        return max(r, g, b) - min(r, g, b) <= 8

    coloured = await colours(no_color=False)
    assert any(not grey(c) for c in coloured)
    monochrome = await colours(no_color=True)
    assert monochrome and all(grey(c) for c in monochrome), \
        sorted(c for c in monochrome if not grey(c))
    await asyncio.sleep(0)


async def test_a_frame_drawn_before_the_tables_idle_cuts_no_column(workspace: Path,
                                                                   app: LogwatchApp) -> None:
    """Textual sizes an auto-width column on idle and keeps the cells of a frame drawn
    before that: the history's snapshot column stayed cut to its header's width
    (`1f602e7…`, a flaky picture in CI). Columns get their widths before the rows now, so a
    frame drawn at once shows every cell whole, and so does the next."""
    async with app.run_test(size=WIDE) as pilot:
        await _board_read(app)(pilot)
        assert isinstance(app.screen, DashboardScreen)
        app.screen.draw()  # the dashboard again, then a frame before any idle
        assert "weights.tensor_size_mismatch" in app.export_screenshot()
        await pilot.pause()
        assert "weights.tensor_size_mismatch" in app.export_screenshot()
        screen = await _history_shown(app, pilot)
        assert screen.result is not None
        screen.show(screen.result)
        for _ in range(2):
            picture = app.export_screenshot()
            assert "1f602e70a9c23b81" in picture and "1f602e7…" not in picture
            await pilot.pause()
