"""Output conventions of every command: when to colour (`--color`, NO_COLOR), how wide a
report may be, a pager for long output on a terminal (`--no-pager`, LOGWATCH_PAGER,
PAGER), and a line for the operator on stderr with what it quotes shown visibly (warn).

Colour: `--color=auto` (the default) colours a terminal unless NO_COLOR is set and not
empty; `always` colours even a pipe, NO_COLOR or not (an explicit flag wins over the
environment, as https://no-color.org asks); `never` never does.

Pager: the output of a long text command (PAGED) on a terminal is gathered, then, when it is
taller than the terminal, handed to `$LOGWATCH_PAGER`, else `$PAGER`, else `less -FRX`. The
first of the two variables that is set decides; empty or `cat` means no pager. The command
is split with shlex and started without a shell. A pager that cannot start, or that fails
before it has read the text, leaves the text printed directly."""

from __future__ import annotations

import argparse
import io
import os
import sys
from typing import Any, TextIO

from logwatch.core.safe_text.visible import visible

COLOR_CHOICES = ("auto", "always", "never")
DEFAULT_WIDTH = 80  # a pipe or a file: wrap as for the classic terminal
DEFAULT_HEIGHT = 24
DEFAULT_PAGER = ("less", "-FRX")  # -F: quit when it fits, -R: colours, -X: leave it shown
# (command, action) pairs whose text output can be long; None: any action. `--json`, `--csv`
# and `--jsonl` output is never paged (it is for programs).
PAGED: frozenset[tuple[str, str | None]] = frozenset({
    ("scan", None), ("history", None), ("sql", None),
    ("signatures", "list"), ("signatures", "show"), ("snapshot", "show"), ("plan", None),
})

_colour_choice = "auto"
_capture: _Captured | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--color` and `--no-pager` on `parser` and on every subcommand below it. Only the top
    level has defaults: a subcommand that is not given the flag keeps the top level's value
    (`logwatch --color=never scan x` and `logwatch scan x --color=never` are the same)."""
    seen: set[int] = set()

    def add(sub: argparse.ArgumentParser, top: bool) -> None:
        if id(sub) in seen:  # an alias names the same parser twice
            return
        seen.add(id(sub))
        default: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
        sub.add_argument("--color", "--colour", choices=COLOR_CHOICES, metavar="WHEN",
                         **({"default": "auto"} if top else default),
                         help="colour the output: auto (a terminal, unless NO_COLOR is set), "
                              "always (even a pipe; wins over NO_COLOR) or never; default auto")
        sub.add_argument("--no-pager", action="store_true",
                         **({"default": False} if top else default),
                         help="never page long output (default on a terminal: "
                              "$LOGWATCH_PAGER, else $PAGER, else less -FRX)")
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    add(child, False)

    add(parser, True)


def configure(args: argparse.Namespace) -> None:
    """Take the parsed `--color` and `--no-pager`; start gathering stdout for the pager
    when the command's output may need one (`finish` pages or prints it)."""
    global _colour_choice, _capture
    _colour_choice = getattr(args, "color", "auto") or "auto"
    if _capture is not None or getattr(args, "no_pager", False) or not _paged(args):
        return
    stdout = sys.stdout
    if not stdout.isatty() or pager_command() is None:
        return
    _capture = _Captured(stdout)
    sys.stdout = _capture


def finish(page: bool = True) -> None:
    """Print what `configure` gathered: through the pager when it is taller than the
    terminal (and `page`: not after Ctrl-C), else directly. Never raises (Ctrl-C and a
    pager quit early included); a second call does nothing."""
    global _capture
    captured, _capture = _capture, None
    if captured is None:
        return
    sys.stdout = captured.real
    text = captured.getvalue()
    try:
        if not page or _rows_unknown(captured.real) or text.count("\n") < terminal_size(
                captured.real)[1] or not _page(text, captured.real):
            captured.real.write(text)
            captured.real.flush()
    except BrokenPipeError:
        pass
    except KeyboardInterrupt:
        pass


def colour(stream: TextIO) -> bool:
    """Whether to colour what is written to `stream`: the one decision every output makes."""
    if _colour_choice == "always":
        return True
    if _colour_choice == "never":
        return False
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real stream
        return False
    return bool(tty) and not os.environ.get("NO_COLOR")


def width(stream: TextIO) -> int:
    """Columns a report written to `stream` may use: COLUMNS when set, else the terminal's
    width, else (a pipe, a file) DEFAULT_WIDTH; never under 40."""
    return max(40, terminal_size(stream)[0])


def terminal_size(stream: TextIO) -> tuple[int, int]:
    """(columns, lines) of the terminal behind `stream`: COLUMNS and LINES win when they are
    set; a pipe, a file or a terminal that does not know its size: 80 x 24."""
    stream = getattr(stream, "real", stream)  # the terminal behind a gathered stdout
    size = [0, 0]
    try:
        if stream.isatty():
            found = os.get_terminal_size(stream.fileno())
            size = [found.columns, found.lines]
    except (AttributeError, ValueError, OSError):
        pass
    for index, name in enumerate(("COLUMNS", "LINES")):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            size[index] = int(value)
    return (size[0] or DEFAULT_WIDTH, size[1] or DEFAULT_HEIGHT)


def _rows_unknown(stream: TextIO) -> bool:
    """A terminal that says it has 0 rows (`script` without a size, some CI consoles) and no
    LINES: a pager there cannot tell a screenful and waits for a key, so none is started."""
    stream = getattr(stream, "real", stream)
    value = os.environ.get("LINES", "")
    if value.isdigit() and int(value) > 0:
        return False
    try:
        return bool(stream.isatty()) and os.get_terminal_size(stream.fileno()).lines == 0
    except (AttributeError, ValueError, OSError):
        return False


def pager_command(env: dict[str, str] | None = None) -> list[str] | None:
    """The pager's argv, or None for no pager: LOGWATCH_PAGER, else PAGER (the first that is
    set; empty or `cat` is none), else `less -FRX` where less is installed."""
    import shlex
    import shutil

    env = dict(os.environ) if env is None else env
    for name in ("LOGWATCH_PAGER", "PAGER"):
        if name in env:
            try:
                argv = shlex.split(env[name])
            except ValueError:  # unbalanced quotes: no pager rather than a wrong one
                return None
            return None if not argv or argv == ["cat"] else argv
    return list(DEFAULT_PAGER) if shutil.which(DEFAULT_PAGER[0]) else None


class _Captured(io.StringIO):
    """stdout while a command runs that may be paged: the text is kept, and the command
    still sees the terminal behind it (colours, cell widths)."""

    def __init__(self, real: TextIO) -> None:
        super().__init__()
        self.real = real

    def isatty(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.real, "encoding", None) or "utf-8"


def _paged(args: argparse.Namespace) -> bool:
    if any(getattr(args, flag, False) for flag in ("json", "jsonl", "csv")):
        return False
    command = getattr(args, "command", None)
    action = getattr(args, "action", None)
    return (command, None) in PAGED or (command, action) in PAGED


def _page(text: str, real: TextIO) -> bool:
    """Hand `text` to the pager, which writes to the terminal; False when it could not start
    or failed before reading it all (then the caller prints it)."""
    import signal
    import subprocess

    argv = pager_command()
    if argv is None:
        return False
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")  # a bare `less` from PAGER keeps the colours too
    env.setdefault("LV", "-c")
    try:
        real.flush()
        pager = subprocess.Popen(argv, stdin=subprocess.PIPE, env=env)
    except (OSError, ValueError):
        return False
    restore = _ignore_interrupts(signal)  # Ctrl-C is the pager's; wait for it to end
    complete = True
    try:
        assert pager.stdin is not None
        try:
            pager.stdin.write(text.encode(getattr(real, "encoding", None) or "utf-8",
                                          errors="replace"))
        except (BrokenPipeError, OSError):  # the pager quit before the end: fine
            complete = False
        try:
            pager.stdin.close()
        except (BrokenPipeError, OSError):
            complete = False
        code = _wait(pager)
    finally:
        restore()
    return complete or code == 0


def _wait(pager: Any) -> int:
    while True:
        try:
            return int(pager.wait())
        except KeyboardInterrupt:
            continue


def _ignore_interrupts(signal: Any) -> Any:
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: Ctrl-C is caught around the wait instead
        return lambda: None
    return lambda: signal.signal(signal.SIGINT, previous)


def warn(message: str) -> None:
    """A line for the operator on stderr. What it quotes (file names, log text, SQL, database
    values) is shown visibly, never obeyed by the terminal."""
    print(visible(message, lines=True), file=sys.stderr)
