"""Run `logwatch ...` inside the test process: `logwatch.cli.main(argv)` with its own stdin,
stdout, stderr, environment additions and umask, shaped like `subprocess.run`'s result.

For tests about what a command says and does; a subprocess costs ~0.5-1 s of imports and
proves nothing more there. Tests where the process boundary is the point (signals, exit
status seen by systemd, sd_notify, kill -9, another uid, a terminal) keep a real process."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

import structlog

from logwatch.cli.main import main

Out = TypeVar("Out", str, bytes)


@dataclass
class Completed(Generic[Out]):
    """What `subprocess.run(..., capture_output=True)` gives, for a command run in-process."""

    args: list[str]
    returncode: int
    stdout: Out
    stderr: Out


@contextlib.contextmanager
def _environment(env: Mapping[str, str | None]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in env}
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _run(argv: list[str], stdin: bytes, env: Mapping[str, str | None]
         ) -> tuple[int, bytes, bytes]:
    out, err = io.BytesIO(), io.BytesIO()
    # stdin is a real file: the daemon's --stdin reads a file descriptor
    with tempfile.TemporaryFile() as raw_in:
        raw_in.write(stdin)
        raw_in.seek(0)
        streams = (sys.stdin, sys.stdout, sys.stderr)
        sys.stdin = io.TextIOWrapper(raw_in, encoding="utf-8")
        sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
        sys.stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace",
                                      write_through=True)
        umask = os.umask(0o022)
        os.umask(umask)
        try:
            with _environment(env):
                try:
                    code = main(argv)
                except SystemExit as exc:  # argparse's usage errors
                    code = exc.code if isinstance(exc.code, int) else 1
            sys.stdout.flush()
            sys.stderr.flush()
            return code, out.getvalue(), err.getvalue()
        finally:
            sys.stdin, sys.stdout, sys.stderr = streams
            os.umask(umask)  # `daemon`, `run` and `scan --db` make their files private
            structlog.reset_defaults()  # the daemon configured logging onto our stderr


def logwatch(*args: str, stdin: bytes = b"",
             env: Mapping[str, str | None] | None = None) -> Completed[bytes]:
    """`logwatch ARGS` in-process; output as bytes. `env`: variables set (None: unset)
    while it runs."""
    argv = list(args)
    code, out, err = _run(argv, stdin, env or {})
    return Completed(argv, code, out, err)


def logwatch_text(*args: str, stdin: bytes = b"",
                  env: Mapping[str, str | None] | None = None) -> Completed[str]:
    """The same, output decoded."""
    done = logwatch(*args, stdin=stdin, env=env)
    return Completed(done.args, done.returncode, done.stdout.decode(errors="replace"),
                     done.stderr.decode(errors="replace"))
