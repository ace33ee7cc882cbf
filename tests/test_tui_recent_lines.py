"""The live log opens on what the daemon read before the TUI connected (the socket's
`recent_lines`, secrets masked), then goes on with the lines that arrive: each line once,
in order. Over a real daemon following a real file."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from logwatch.daemon.recent_lines import RecentLines, last_lines
from logwatch.tui.app import LogwatchApp
from logwatch.tui.screens.log import LogScreen
from logwatch.tui.state import LIVE
from tests.following import Running, filler_line

SECRET = "hf_" + "Q" * 34


async def _until(pilot: object, check: Callable[[], bool], timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "timed out"
        await pilot.pause(0.05)  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_the_live_log_opens_on_the_lines_read_before_the_tui_connected(
        tmp_path: Path) -> None:
    log, db, sock = tmp_path / "vllm.log", tmp_path / "h.duckdb", tmp_path / "lw.sock"
    before = 30
    log.write_bytes(b"".join(filler_line(n) for n in range(before - 1))
                    + f"(APIServer pid=1) INFO serve --hf-token {SECRET}\n".encode())
    daemon = Running("--file", str(log), "--db", str(db), "--poll-interval", "0.2",
                     sock=sock)
    try:
        await asyncio.to_thread(daemon.wait_status, lambda st: st["lines"] >= before, 60,
                                "the lines read")
        app = LogwatchApp(sock, db)
        async with app.run_test(size=(120, 36)) as pilot:
            await _until(pilot, lambda: app.connection.kind == LIVE)
            await pilot.press("l")
            assert isinstance(app.screen, LogScreen)
            await _until(pilot, lambda: len(app.ring.lines) >= before)
            with open(log, "ab") as out:  # and the log goes on
                out.write(filler_line(before) + filler_line(before + 1))
            await _until(pilot, lambda: len(app.ring.lines) >= before + 2)
            await pilot.pause(0.3)  # a line shown twice would arrive by now
            numbers = [line.number for line in app.ring.lines]
            assert numbers == list(range(1, before + 3)), numbers
            texts = [line.text for line in app.ring.lines]
            assert texts[0] == filler_line(0).decode().rstrip("\n")
            assert SECRET not in "\n".join(texts) and "--hf-token ***" in texts[before - 1]
            assert f"{before + 2:,} lines in view" in str(
                app.screen.query_one("#log-status").render())
    finally:
        assert daemon.stop() == 0


def _last_lines_by_walking(data: bytes, lines: int, limit: int) -> int:
    """The definition: back from the end one line at a time, within the byte limit."""
    start = max(0, len(data) - limit)
    if start and data[start - 1] != 0x0A:
        start = data.find(b"\n", start) + 1 or len(data)
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(lines):
        end = data.rfind(b"\n", start, end)
        if end < 0:
            return start
    return end + 1


def test_the_last_lines_are_found_as_walking_back_finds_them() -> None:
    rng = random.Random(8)
    for _ in range(2000):
        data = bytes(rng.choice(b"ab\n") for _ in range(rng.randint(0, 80)))
        lines, limit = rng.randint(1, 12), rng.randint(1, 90)
        assert last_lines(data, lines, limit) == _last_lines_by_walking(data, lines, limit)


def test_the_daemon_keeps_a_bounded_tail_of_each_source() -> None:
    recent = RecentLines(lines=50, limit=4096, sources=2)
    for first in range(1, 10_001, 100):  # 10,000 lines in chunks of 100
        data = b"".join(b"line %d\n" % n for n in range(first, first + 100))
        recent.add("a", first, data, 100)
        assert len(recent._tails["a"].data) <= 2 * 4096
    (tail,) = recent.read(1000)
    assert tail["first_line"] == 9_951 and tail["text"].count("\n") == 50
    assert tail["text"].startswith("line 9951\n") and tail["text"].endswith("line 10000\n")
    recent.add("b", 1, b"b\n", 1)
    recent.add("c", 1, b"c\n", 1)  # a third source: the one read longest ago goes
    assert [t["source"] for t in recent.read(10)] == ["b", "c"]
    recent.add("c", 1, b"again\n", 1)  # numbered from 1 again: a new generation
    assert recent.read(10)[-1] == {"source": "c", "first_line": 1, "text": "again\n"}
