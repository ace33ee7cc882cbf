"""The real `logwatch demo` in a real terminal (tmux): it shows the TUI, which shows the
failure, the diagnosis, the plan being applied and the target turning healthy; a second
terminal runs `logwatch tui --read-only` on the demo's socket, and the keys the footer
names switch screens."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


class Tmux:
    def __init__(self, name: str, command: str, width: int = 120, height: int = 36) -> None:
        self.name = name
        # the terminal's size is tmux's: no COLUMNS/LINES from the test's environment
        subprocess.run(["tmux", "-L", name, "new-session", "-d", "-x", str(width), "-y",
                        str(height), f"unset COLUMNS LINES; {command}"], check=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "-L", self.name, "capture-pane", "-p"],
                              capture_output=True, text=True, check=False).stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-L", self.name, "send-keys", *keys], check=True)

    def until(self, *texts: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(t in screen for t in texts):
                return screen
            assert time.monotonic() < deadline, f"never showed {texts}:\n{screen}"
            time.sleep(0.2)  # polling the terminal; the condition decides

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.name, "kill-server"], check=False,
                       capture_output=True)


def test_logwatch_demo_in_a_terminal_shows_the_loop_in_the_tui(tmp_path: Path) -> None:
    logwatch = f"{sys.executable} -m logwatch"
    work = tmp_path / "demo"
    demo = Tmux(f"lwdemo{id(tmp_path)}", f"cd {ROOT} && env -u NO_COLOR {logwatch} demo "
                f"--keep {work}; echo DEMO-EXIT=$?; sleep 60", 120, 48)
    viewer = None
    try:
        screen = demo.until("demo    healthy", timeout=120)
        assert "● live" in screen
        assert "0.33.0" in screen  # the release the stand-in's log announced
        for story in ("launch failed", "diagnosis:", "applying", "succeeded"):
            assert story in screen, f"{story!r} not on the dashboard:\n{screen}"
        viewer = Tmux(f"lwview{id(tmp_path)}", f"cd {ROOT} && {logwatch} tui --read-only "
                      f"--socket {work / 'control.sock'} --db {work / 'history.duckdb'}",
                      80, 24)
        screen = viewer.until("demo", "healthy", "Quit")
        assert "Approve" not in screen  # --read-only hides the actions
        viewer.keys("l")
        viewer.until("lines in view")
        viewer.keys("h")
        viewer.until("failures_by_config", "row(s)")
        viewer.keys("s")
        viewer.until("signatures ·")
        viewer.keys("?")
        viewer.until("Keys —")
        viewer.keys("Escape", "q")
        demo.keys("q")
        demo.until("DEMO-EXIT=0", "logwatch demo: healthy")
    finally:
        demo.kill()
        if viewer is not None:
            viewer.kill()


def test_closing_the_terminal_on_the_demo_ends_its_run_and_vllm(tmp_path: Path) -> None:
    """The terminal goes (the tmux server killed: SIGHUP, then the demo dies): the
    `logwatch run` it started in a session of its own, and the stand-in vLLM under it, end
    too instead of serving on with no one to stop them."""
    work = tmp_path / "demo"
    demo = Tmux(f"lwhup{id(tmp_path)}", f"cd {ROOT} && {sys.executable} -m logwatch demo "
                f"--keep {work}", 100, 30)
    try:
        demo.until("● live", timeout=60)
    finally:
        demo.kill()

    def left() -> list[str]:  # processes whose command line names the workspace
        found = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if str(work).encode() in cmdline.read_bytes():
                    found.append(cmdline.parent.name)
            except OSError:
                continue  # it ended while the table was read
        return found

    deadline = time.monotonic() + 60
    while left():
        assert time.monotonic() < deadline, f"still running: {left()}"
        time.sleep(0.2)  # polling the process table; the condition decides


def test_the_live_log_under_no_color_is_drawn_and_the_tui_exits_0(tmp_path: Path) -> None:
    """NO_COLOR: Textual draws every row in monochrome, which needs a style on each of
    them; the live log's empty rows had none and `l` crashed the app (an AttributeError,
    and an exit status of 0)."""
    tui = Tmux(f"lwnocolor{id(tmp_path)}", f"cd {ROOT} && NO_COLOR=1 {sys.executable} -m "
               f"logwatch tui --socket {tmp_path / 'none.sock'} --db {tmp_path / 'h.duckdb'}"
               "; echo TUI-EXIT=$?; sleep 60", 80, 24)
    try:
        tui.until("no daemon", "Quit", timeout=60)
        tui.keys("l")
        screen = tui.until("lines in view", timeout=30)
        assert "Traceback" not in screen and "TUI-EXIT" not in screen
        tui.keys("q")
        tui.until("TUI-EXIT=0", timeout=30)
    finally:
        tui.kill()


CRASHING_TUI = """
import sys
from logwatch.cli.main import main
from logwatch.tui.screens.log import LogScreen

def draw(self):
    raise RuntimeError("a bug in a screen")

LogScreen.draw = draw  # the one fault planted: the rest is the real command
sys.exit(main(sys.argv[1:]))
"""


def test_a_crash_of_the_tui_exits_non_zero(tmp_path: Path) -> None:
    """Textual prints a crash's traceback and returns from run(): `logwatch tui` exited 0,
    and a script or a unit that started it read a clean quit."""
    script = tmp_path / "crashing_tui.py"
    script.write_text(CRASHING_TUI)
    tui = Tmux(f"lwcrash{id(tmp_path)}", f"cd {ROOT} && {sys.executable} {script} tui "
               f"--socket {tmp_path / 'none.sock'} --db {tmp_path / 'h.duckdb'}"
               "; echo TUI-EXIT=$?; sleep 60", 80, 24)
    try:
        tui.until("no daemon", "Quit", timeout=60)
        tui.keys("l")
        screen = tui.until("TUI-EXIT=", timeout=30)
        assert "a bug in a screen" in screen
        assert "TUI-EXIT=70" in screen
    finally:
        tui.kill()
