"""Run `logwatch ...` inside the test process: `logwatch.cli.main(argv)` with its own stdin,
stdout, stderr, environment additions and umask, shaped like `subprocess.run`'s result.

For tests about what a command says and does; a subprocess costs ~0.5-1 s of imports and
proves nothing more there. Tests where the process boundary is the point (signals, exit
status seen by systemd, sd_notify, kill -9, another uid, a terminal) keep a real process."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import structlog

from logwatch.cli.main import main

if TYPE_CHECKING:
    from logwatch.daemon.service import Daemon

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


def _feed(fd: int, data: bytes) -> None:
    """Write `data` into the pipe, then close it (end of input); a reader that stops early
    closes its end: the rest is dropped, as a shell's writer would get SIGPIPE."""
    with contextlib.suppress(BrokenPipeError), open(fd, "wb") as pipe:
        pipe.write(data)


def _run(argv: list[str], stdin: bytes, env: Mapping[str, str | None]
         ) -> tuple[int, bytes, bytes]:
    # stdin is a real pipe, as a shell gives it: the daemon's --stdin reads its descriptor
    read_end, write_end = os.pipe()
    feeder = threading.Thread(target=_feed, args=(write_end, stdin), daemon=True)
    feeder.start()
    try:
        return _with_streams(argv, read_end, env)
    finally:  # the read end is closed by now: a writer of unread input gets EPIPE
        feeder.join(timeout=60)


def _with_streams(argv: list[str], read_end: int, env: Mapping[str, str | None]
                  ) -> tuple[int, bytes, bytes]:
    out, err = io.BytesIO(), io.BytesIO()
    with open(read_end, "rb") as raw_in:
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


def last_line_end(path: str | os.PathLike[str]) -> int:
    """Where the file's last complete line ends: a reader is at the end there (what follows
    is a line still being written, which the daemon holds back until its newline comes)."""
    with open(path, "rb") as file:
        size = file.seek(0, os.SEEK_END)
        start = size
        while start > 0:
            start = max(0, start - (1 << 16))
            file.seek(start)
            block = file.read(min(1 << 16, size - start))
            if (at := block.rfind(b"\n")) >= 0:
                return start + at + 1
        return 0


def caught_up(findings: int = 0) -> Callable[[Daemon], bool]:
    """The daemon has read something, every file to its last complete line, settled and
    committed it all, and recorded at least `findings` new findings: what a test waits for
    before stopping it (a journal has no end to compare with: its findings say it)."""
    def check(daemon: Daemon) -> bool:
        return (bool(daemon.streams) and daemon.committed >= findings and not daemon.pending
                and all(stream.settled for stream in daemon.streams.values())
                and all(offset >= _end_of(path) for path, offset in daemon.read_positions.values()))
    return check


def _end_of(path: str) -> int:
    try:
        return last_line_end(path)
    except OSError:  # gone (rotated away and deleted): nothing more to read there
        return 0


def daemon_until(condition: Callable[[Daemon], bool], *args: str, timeout: float = 60,
                 stdin: bytes = b"") -> Completed[str]:
    """`logwatch daemon ARGS` in-process, stopped as SIGTERM stops it once `condition(daemon)`
    holds (checked on its loop every 20 ms): a readiness signal where `--until-idle` would
    guess one (under load, idle for a second is not done). Fails after `timeout` seconds."""
    from logwatch.daemon.service import Daemon

    run = Daemon.run
    missed: list[str] = []

    async def run_until(daemon: Daemon) -> int:
        async def watch() -> None:
            deadline = time.monotonic() + timeout
            try:
                while not condition(daemon):
                    if time.monotonic() > deadline:
                        missed.append(f"not met after {timeout} s: {daemon.status()}")
                        break
                    await asyncio.sleep(0.02)
            except Exception as exc:  # a broken condition fails the test, never hangs it
                missed.append(f"the condition failed: {exc!r}")
            finally:
                daemon.stop()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            return await run(daemon)
        finally:
            watcher.cancel()

    Daemon.run = run_until  # type: ignore[method-assign,assignment]
    try:
        done = logwatch_text("daemon", *args, stdin=stdin)
    finally:
        Daemon.run = run  # type: ignore[method-assign]
    assert not missed, f"{missed[0]}\n{done.stderr[-3000:]}"
    return done
