"""Output conventions: `--color=auto|always|never` with NO_COLOR, the pager for long output on
a terminal (LOGWATCH_PAGER, PAGER, `--no-pager`), and reports that fit 80 columns.

The terminal cases run `logwatch` as a real process on a pseudo-terminal of a set size; the
pipe cases in-process (tests/inprocess.py), where stdout is not a terminal."""

from __future__ import annotations

import argparse
import fcntl
import io
import json
import os
import pty
import re
import select
import shlex
import shutil
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from logwatch.cli.output import pager_command
from tests.conftest import ROOT, SAMPLES
from tests.inprocess import logwatch

DEMO = SAMPLES / "demo_marlin_and_mtp.log"
ALL_SAMPLES = sorted([*SAMPLES.glob("*.log"), *SAMPLES.glob("*.log.*.gz")])
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
PAGER_MARK = "FAKE PAGER SHOWED IT"
# Standing in for less: what it read and how it was started, kept for the test to check.
FAKE_PAGER = """\
import json, os, signal, sys
out = sys.argv[1]
interrupted = []
signal.signal(signal.SIGINT, lambda *_: interrupted.append(True))  # as less does
if sys.argv[2] == "quit-early":  # a user pressing q after the first screen
    sys.stdin.buffer.read(100)
    data = b""
else:
    data = sys.stdin.buffer.read()
if sys.argv[2] == "interrupt":  # Ctrl-C on the terminal: the whole foreground group
    os.killpg(os.getpgrp(), signal.SIGINT)
with open(out + ".argv", "w") as f:
    json.dump({"argv": sys.argv, "tty": os.isatty(1), "less": os.environ.get("LESS"),
               "interrupted": bool(interrupted)}, f)
with open(out, "wb") as f:
    f.write(data)
print("FAKE PAGER SHOWED IT")
"""


def _env(**extra: str) -> dict[str, str]:
    """The test process's environment without what would decide for the command."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NO_COLOR", "COLUMNS", "LINES", "PAGER", "LOGWATCH_PAGER",
                        "LOGWATCH_PROGRESS_AFTER")}
    env["LOGWATCH_PAGER"] = ""  # never a real less waiting for a key, unless a test says
    env.update(extra)
    return env


@dataclass
class OnPty:
    code: int
    shown: str  # what reached the terminal (pager included), \r\n made \n
    stderr: str


def on_pty(args: list[str], env: dict[str, str], tmp_path: Path, rows: int = 24,
           cols: int = 80, timeout: float = 120) -> OnPty:
    """`logwatch ARGS` with stdout on a pseudo-terminal of `rows` x `cols` (stderr to a file),
    read until every writer of the terminal is gone; killed, and the test failed, after
    `timeout` seconds (a pager waiting for a key would otherwise hang it)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    err_path = tmp_path / f"stderr-{time.monotonic_ns()}"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "logwatch", *args], cwd=ROOT, env=env,
                                stdin=subprocess.DEVNULL, stdout=slave, stderr=err,
                                start_new_session=True)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                proc.kill()
                pytest.fail(f"still writing after {timeout} s: {seen[-2000:]!r}")
            ready, _, _ = select.select([master], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: no process holds the terminal any more
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    return OnPty(code, seen.decode("utf-8", errors="replace").replace("\r\n", "\n"),
                 err_path.read_text(errors="replace"))


@pytest.fixture
def fake_pager(tmp_path: Path) -> tuple[Path, Path]:
    """(the script, where it leaves what it read), in a directory whose name has a space:
    LOGWATCH_PAGER is split as a shell would quote it, never on every space."""
    folder = tmp_path / "pager dir"
    folder.mkdir()
    script = folder / "fake_pager.py"
    script.write_text(FAKE_PAGER)
    return script, folder / "seen.txt"


def pager_env(script: Path, seen: Path, mode: str = "read-all") -> str:
    # $HOME unquoted: a shell would expand it; the pager must get it as written
    return (f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} "
            f"{shlex.quote(str(seen))} {mode} $HOME")


# --- colour ----------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "env", "coloured"), [
    (["scan", str(DEMO)], {}, False),  # auto, a pipe
    (["scan", str(DEMO), "--color=auto"], {}, False),
    (["scan", str(DEMO), "--color=always"], {}, True),
    (["scan", "--color", "always", str(DEMO)], {"NO_COLOR": "1"}, True),  # the flag wins
    (["--color=always", "scan", str(DEMO)], {"NO_COLOR": "1"}, True),  # before the command
    (["scan", str(DEMO), "--colour=always"], {}, True),
    (["--color=always", "scan", str(DEMO), "--color=never"], {}, False),  # the last one
    (["scan", str(DEMO), "--color=never"], {}, False),
])
def test_color_in_a_pipe(args: list[str], env: dict[str, str], coloured: bool) -> None:
    done = logwatch(*args, env={"NO_COLOR": None, "COLUMNS": None, **env})
    assert done.returncode == 1, done.stderr
    assert b"ROOT CAUSE" in done.stdout
    assert (b"\x1b[" in done.stdout) is coloured


def test_color_on_a_terminal(tmp_path: Path) -> None:
    """auto colours a terminal; NO_COLOR turns that off; --color=always turns it back on;
    --color=never is plain."""
    cases = [([], {}, True), ([], {"NO_COLOR": "1"}, False),
             (["--color=always"], {"NO_COLOR": "1"}, True), (["--color=never"], {}, False)]
    for flags, extra, coloured in cases:
        shown = on_pty(["scan", str(DEMO), "--no-pager", *flags], _env(**extra), tmp_path)
        assert shown.code == 1, shown.stderr
        assert "ROOT CAUSE" in shown.shown
        assert ("\x1b[1;4mROOT CAUSE" in shown.shown) is coloured, (flags, extra)


def test_a_wrong_color_is_a_usage_error() -> None:
    done = logwatch("scan", str(DEMO), "--color=sometimes")
    assert done.returncode == 2
    assert b"--color" in done.stderr and b"sometimes" in done.stderr


def test_every_subcommand_takes_color_and_no_pager() -> None:
    """Given before or after any command; after it, only when given (the top level's value
    stays otherwise)."""
    from logwatch.cli.parser import build_parser

    parser = build_parser()
    for argv in (["status", "--color=never", "--no-pager"],
                 ["signatures", "list", "--color", "never", "--no-pager"],
                 ["snapshot", "show", "--color=never"],
                 ["--color=never", "--no-pager", "history"],
                 ["run", "--color=never", "--", "vllm", "serve", "--color=x"]):
        args = parser.parse_args(argv)
        assert args.color == "never", argv
    args = parser.parse_args(["--color=always", "--no-pager", "scan", "x.log"])
    assert (args.color, args.no_pager) == ("always", True)
    assert parser.parse_args(["run", "--", "vllm", "--color=x"]).argv[-1] == "--color=x"


# --- pager -----------------------------------------------------------------------------


def test_long_output_on_a_terminal_goes_through_the_pager(tmp_path: Path,
                                                          fake_pager: tuple[Path, Path]
                                                          ) -> None:
    script, seen = fake_pager
    shown = on_pty(["scan", str(DEMO)], _env(LOGWATCH_PAGER=pager_env(script, seen)),
                   tmp_path, rows=24)
    assert shown.code == 1, shown.stderr  # the scan's exit status, not the pager's
    assert PAGER_MARK in shown.shown
    assert "ROOT CAUSE" not in shown.shown  # the report went to the pager only
    report = seen.read_text()
    assert report.count("\n") > 24 and "\x1b[1;4mROOT CAUSE" in report  # colours kept
    started = json.loads(Path(f"{seen}.argv").read_text())
    assert started["argv"] == [str(script), str(seen), "read-all", "$HOME"]  # no shell
    assert started["tty"] is True  # the pager writes to the terminal itself
    assert started["less"] == "FRX"


def test_a_terminal_of_zero_rows_gets_no_pager(tmp_path: Path,
                                               fake_pager: tuple[Path, Path]) -> None:
    """`script` without a size gives a terminal that says it has 0 rows: a pager there waited
    for a key (issue 30). The report is printed directly instead."""
    script, seen = fake_pager
    shown = on_pty(["scan", str(DEMO)], _env(LOGWATCH_PAGER=pager_env(script, seen)),
                   tmp_path, rows=0)
    assert shown.code == 1, shown.stderr
    assert PAGER_MARK not in shown.shown and "ROOT CAUSE" in shown.shown
    assert not seen.exists()


def test_the_pager_is_not_used_when_it_should_not_be(tmp_path: Path,
                                                     fake_pager: tuple[Path, Path]) -> None:
    script, seen = fake_pager
    env = _env(LOGWATCH_PAGER=pager_env(script, seen))
    for args, rows in ((["scan", str(DEMO), "--no-pager"], 24),  # asked not to
                       (["--no-pager", "scan", str(DEMO)], 24),
                       (["scan", str(DEMO)], 500),  # it fits the terminal
                       (["scan", "--json", str(DEMO)], 24)):  # for programs
        shown = on_pty(args, env, tmp_path, rows=rows)
        assert shown.code == 1, shown.stderr
        assert PAGER_MARK not in shown.shown and not seen.exists(), args
        assert "ROOT CAUSE" in shown.shown or '"root_cause"' in shown.shown
    # not a terminal: straight into the pipe, whatever LOGWATCH_PAGER says
    piped = subprocess.run([sys.executable, "-m", "logwatch", "scan", str(DEMO)], cwd=ROOT,
                           env=env, capture_output=True, timeout=120, check=False)
    assert piped.returncode == 1 and b"ROOT CAUSE" in piped.stdout
    assert PAGER_MARK.encode() not in piped.stdout and not seen.exists()


@pytest.mark.parametrize("pager", ["/nonexistent/pager -R", "", "cat", "'unbalanced"])
def test_no_pager_or_one_that_cannot_start_prints_directly(tmp_path: Path,
                                                            pager: str) -> None:
    shown = on_pty(["scan", str(DEMO)], _env(LOGWATCH_PAGER=pager), tmp_path, rows=24)
    assert shown.code == 1, shown.stderr
    assert "ROOT CAUSE" in shown.shown and "OTHER PROBLEMS" in shown.shown
    assert "Traceback" not in shown.shown + shown.stderr


def test_a_pager_quit_early_is_no_error(tmp_path: Path, fake_pager: tuple[Path, Path]
                                        ) -> None:
    """The pager reads a screen and quits (q in less) while megabytes wait: the write breaks,
    and that is the operator's choice, not a traceback."""
    script, seen = fake_pager
    paths = [str(p) for p in ALL_SAMPLES]  # a report longer than a pipe's buffer
    shown = on_pty(["scan", *paths],
                   _env(LOGWATCH_PAGER=pager_env(script, seen, "quit-early")), tmp_path)
    assert shown.code == 1, shown.stderr
    assert PAGER_MARK in shown.shown and Path(f"{seen}.argv").exists()
    assert "Traceback" not in shown.shown + shown.stderr
    assert "BrokenPipe" not in shown.shown + shown.stderr
    assert "ROOT CAUSE" not in shown.shown  # not printed again: the pager had it


def test_a_pager_that_fails_before_reading_leaves_the_text_printed(tmp_path: Path) -> None:
    failing = f"{shlex.quote(sys.executable)} -c 'import sys; sys.exit(3)'"
    paths = [str(p) for p in ALL_SAMPLES]  # longer than a pipe's buffer: the write breaks
    shown = on_pty(["scan", *paths], _env(LOGWATCH_PAGER=failing), tmp_path)
    assert shown.code == 1, shown.stderr
    assert "ROOT CAUSE" in shown.shown and "Traceback" not in shown.stderr  # logs have some


def test_ctrl_c_in_the_pager_is_no_error(tmp_path: Path, fake_pager: tuple[Path, Path]
                                         ) -> None:
    """Ctrl-C reaches logwatch and the pager alike: the pager handles it, logwatch waits
    for the pager and exits as the scan said, without a traceback."""
    script, seen = fake_pager
    shown = on_pty(["scan", str(DEMO)],
                   _env(LOGWATCH_PAGER=pager_env(script, seen, "interrupt")), tmp_path)
    assert json.loads(Path(f"{seen}.argv").read_text())["interrupted"] is True
    assert shown.code == 1, shown.stderr
    assert PAGER_MARK in shown.shown
    assert "Traceback" not in shown.shown + shown.stderr
    assert "KeyboardInterrupt" not in shown.shown + shown.stderr


def test_a_long_sql_table_is_paged_and_csv_is_not(tmp_path: Path,
                                                  fake_pager: tuple[Path, Path]) -> None:
    script, seen = fake_pager
    db = tmp_path / "h.duckdb"
    assert logwatch("scan", "--db", str(db), str(DEMO)).returncode == 1
    env = _env(LOGWATCH_PAGER=pager_env(script, seen))
    query = "SELECT range AS n FROM range(100)"
    csv = on_pty(["sql", "--db", str(db), "--csv", query], env, tmp_path)
    assert csv.code == 0, csv.stderr
    assert "\n99\n" in csv.shown and not seen.exists()
    table = on_pty(["sql", "--db", str(db), query], env, tmp_path)
    assert table.code == 0, table.stderr
    assert PAGER_MARK in table.shown and "(100 rows)" in seen.read_text()


def test_which_pager() -> None:
    less = ["less", "-FRX"] if shutil.which("less") else None
    assert pager_command({"LOGWATCH_PAGER": "most -s", "PAGER": "more"}) == ["most", "-s"]
    assert pager_command({"PAGER": "less -R"}) == ["less", "-R"]
    assert pager_command({"LOGWATCH_PAGER": "", "PAGER": "more"}) is None  # set and empty
    assert pager_command({"LOGWATCH_PAGER": "cat"}) is None
    assert pager_command({"PAGER": " cat "}) is None
    assert pager_command({"PAGER": "'a b' c"}) == ["a b", "c"]
    assert pager_command({"PAGER": "'open"}) is None
    assert pager_command({}) == less


# --- width -----------------------------------------------------------------------------


def _too_wide(text: str, columns: int) -> list[str]:
    return [line for line in COLOUR.sub("", text).splitlines() if len(line) > columns]


@pytest.mark.parametrize("sample", ALL_SAMPLES, ids=lambda p: p.name)
def test_every_report_line_fits_80_columns(sample: Path) -> None:
    """Not a terminal and no COLUMNS: 80. Coloured, so the codes are really stripped."""
    done = logwatch("scan", str(sample), "--color=always", env={"COLUMNS": None})
    assert done.returncode in (0, 1, 3), done.stderr
    text = done.stdout.decode()
    assert "\x1b[" in text
    assert _too_wide(text, 80) == []


def test_a_command_in_a_deep_directory_still_fits_and_pastes_as_one(tmp_path: Path) -> None:
    """The report's `logwatch signatures draft <path>` for a log in a deep directory (CI's
    checkout, a mounted volume): no row wider than the terminal, and a shell that reads the
    rows gets the command back, the path whole."""
    deep = tmp_path.joinpath(*["a-rather-long-directory-name-level-" + str(i)
                               for i in range(6)])
    deep.mkdir(parents=True)
    log = deep / "vllm.log"
    log.write_text("(APIServer pid=1) ERROR 12-01 03:12:44 [zorblax.py:9] Zorblax gave up\n")
    done = logwatch("scan", str(log), env={"COLUMNS": None, "NO_COLOR": "1"})
    text = done.stdout.decode()
    assert _too_wide(text, 80) == []
    rows = text.split("draft a signature:\n", 1)[1].split("\n")
    command = "\n".join(rows[:rows.index(next(r for r in rows if not r.endswith("\\"))) + 1])
    assert shlex.split(command.replace("\\\n", "")) == [
        "logwatch", "signatures", "draft", str(log), "--group", "1"]


def test_the_terminals_width_decides(tmp_path: Path) -> None:
    shown = on_pty(["scan", str(DEMO), "--no-pager"], _env(), tmp_path, cols=60)
    assert shown.code == 1, shown.stderr
    assert _too_wide(shown.shown, 60) == []
    assert _too_wide(shown.shown, 59) != []  # it used the width it had
    wide = logwatch("scan", str(DEMO), env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert _too_wide(wide.stdout.decode(), 150) != []  # log lines whole on a wide screen


def _evidence_shown(text: str) -> list[tuple[int, str]]:
    """(line number, text) of each quoted log line, its wrapped rows joined back."""
    found: list[tuple[int, str]] = []
    prefix = 0
    for row in text.splitlines():
        head = re.match(r"( +)(\d+): ", row)
        if head:
            prefix = head.end()
            found.append((int(head.group(2)), row[prefix:]))
        elif found and prefix and row.startswith(" " * prefix):
            found[-1] = (found[-1][0], found[-1][1] + row[prefix:])
        else:
            prefix = 0
    return found


@pytest.mark.parametrize("columns", ["80", "40"])
def test_log_lines_are_wrapped_whole_or_cut_with_a_marker(columns: str) -> None:
    """Every quoted line joins back to the evidence --json has; where it is cut (a narrow
    terminal), a marker says how many characters are left out, and they add up."""
    env = {"COLUMNS": columns, "NO_COLOR": "1"}
    evidence = {ev["line"]: ev["text"]
                for inc in json.loads(logwatch("scan", "--json", str(DEMO), env=env).stdout)
                ["incidents"] for ev in inc["evidence"]}
    shown = _evidence_shown(logwatch("scan", str(DEMO), env=env).stdout.decode())
    assert len(shown) > 10
    cut = 0
    for line, text in shown:
        marker = re.search(r" … \(\+(\d+) chars cut\)$", text)
        if marker:
            cut += 1
            assert evidence[line].startswith(text[:marker.start()])
            assert marker.start() + int(marker.group(1)) == len(evidence[line])
        else:
            assert text == evidence[line]
    assert (cut > 0) is (columns == "40")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_ctrl_c_during_a_long_command_prints_what_it_wrote_without_a_pager(
        tmp_path: Path, fake_pager: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupted, a paged command's gathered output is printed as it stands: opening a
    pager on half an answer after Ctrl-C (the old behaviour) makes the operator quit twice."""
    from logwatch.cli import output

    script, seen = fake_pager
    monkeypatch.setenv("LOGWATCH_PAGER", pager_env(script, seen))
    monkeypatch.setenv("LINES", "5")
    for page, paged in ((False, False), (True, True)):
        screen = _Terminal()
        monkeypatch.setattr(sys, "stdout", screen)
        output.configure(argparse.Namespace(command="history", color="auto", no_pager=False))
        print("\n".join(f"row {n}" for n in range(40)))
        output.finish(page=page)
        output.finish()  # main's `finally` after the interrupt: nothing more
        assert seen.exists() is paged
        assert ("row 39" in screen.getvalue()) is not paged
