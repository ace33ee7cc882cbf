"""Shared fixtures: the shipped library (loaded once), and paths into the repository."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from logwatch.library.files import load_signature_dirs
from tests import hermetic

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples" / "logs"
# The shipped library's version, read rather than repeated: every signature change bumps it.
LIBRARY_VERSION = tomllib.loads((ROOT / "signatures" / "library.toml").read_text())["version"]
_SYSTEM_AT_START = pytest.StashKey[hermetic.Snapshot]()


@pytest.fixture(scope="session", autouse=True)
def private_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every daemon and client the tests start, unless told otherwise, uses a socket and a
    history of the test session's own ($RUNTIME_DIRECTORY and $STATE_DIRECTORY, as systemd
    sets them): never /run/logwatch or the user's real history."""
    base = tmp_path_factory.mktemp("runtime")
    base.chmod(0o700)
    saved = {k: os.environ.get(k) for k in ("RUNTIME_DIRECTORY", "STATE_DIRECTORY")}
    os.environ["RUNTIME_DIRECTORY"] = str(base / "run")
    os.environ["STATE_DIRECTORY"] = str(base / "state")
    yield base
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def own_runtime(private_runtime: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test its own socket and history: $RUNTIME_DIRECTORY and $STATE_DIRECTORY in a
    short private directory of its own (a socket path must stay under 108 bytes), so that
    daemons of different tests never meet, even when a test leaves one running."""
    base = Path(tempfile.mkdtemp(prefix="t", dir=private_runtime))
    monkeypatch.setenv("RUNTIME_DIRECTORY", str(base / "run"))
    monkeypatch.setenv("STATE_DIRECTORY", str(base / "state"))
    yield base


@pytest.fixture(autouse=True)
def off_system_paths() -> Iterator[None]:
    """Fails the test that made, removed or replaced anything under /run/logwatch,
    /var/lib/logwatch or /etc/logwatch (itself, a child, a unit it started), or whose
    process tried to bind, connect to or write there (see tests/hermetic.py)."""
    before = hermetic.Snapshot.take()
    hermetic.refused.clear()
    yield
    ours, theirs = hermetic.blame(before, hermetic.Snapshot.take(), ROOT)
    tried, hermetic.refused[:] = list(hermetic.refused), []
    if theirs:
        warnings.warn("processes of another checkout touched the host's logwatch paths "
                      "during this test:\n" + "\n".join(theirs), stacklevel=1)
    if ours or tried:
        pytest.fail("the test touched the host's logwatch paths:\n"
                    + "\n".join(ours + tried), pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    hermetic.install_audit_hook()
    config.stash[_SYSTEM_AT_START] = hermetic.Snapshot.take()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Whatever a test left running that touched a system path after its test ended."""
    ours, theirs = hermetic.blame(session.config.stash[_SYSTEM_AT_START],
                                  hermetic.Snapshot.take(), ROOT)
    if theirs:
        sys.stderr.write("\nhermetic tests: processes of another checkout touched the host's "
                         "logwatch paths during this session:\n" + "\n".join(theirs) + "\n")
    if ours:
        sys.stderr.write("\nhermetic tests: the session touched the host's logwatch paths:\n"
                         + "\n".join(ours) + "\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def umask_kept() -> Iterator[None]:
    """A command run in-process (`cli.main`) may set the umask for its files (history files
    are private); the next test starts with the one the session had."""
    umask = os.umask(0o022)
    os.umask(umask)
    yield
    os.umask(umask)


@pytest.fixture(scope="session")
def library() -> Library:
    return load_signature_dirs()


def roomy_matcher(library: Library, engine: str = "auto") -> Matcher:
    """A matcher for tests that compare two scans of one input: a budget no record runs over
    and no signature disabled. The match budget counts the process's CPU time, which other
    threads of a long test session spend too, and a record that ran over differs by design;
    callers check `matcher.timeouts` is empty afterwards."""
    return Matcher(library.signatures, engine=engine, timeout=10.0, disable_after=None)


@pytest.fixture(scope="session", autouse=True)
def _vetted_cache_in_a_temp_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Commands the tests run remember vetted libraries in a temp dir, never the user's."""
    saved = {key: os.environ.get(key) for key in ("XDG_CACHE_HOME", "CACHE_DIRECTORY")}
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    os.environ.pop("CACHE_DIRECTORY", None)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


HARNESS = ROOT.parent / "shared" / "tools" / "systemd-user-harness.sh"


HARNESS_LOCK = Path(tempfile.gettempdir()) / "systemd-user-harness.lock"


@contextlib.contextmanager
def harness_lock(timeout: float = 600) -> Iterator[bool]:
    """The machine has one /run/user/0: one `systemd --user` harness at a time, whichever
    test session (or xdist worker) wants it; True once held, False after `timeout`."""
    with open(HARNESS_LOCK, "a") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    yield False
                    return
                time.sleep(0.2)  # polling a lock another session holds, within a deadline
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def systemd_user() -> Iterator[dict[str, str]]:
    """A real `systemd --user` manager (the shared harness) for one test module, its pid
    files in a directory of this session's (so that stop ends this manager, not another
    session's); skipped where it cannot run."""
    if os.geteuid() != 0 or not HARNESS.exists():
        pytest.skip("systemd --user harness needs root and ../shared/tools")
    with harness_lock() as held:
        if not held:
            pytest.skip(f"another session held {HARNESS_LOCK} for 10 minutes")
        state = tempfile.mkdtemp(prefix="systemd-user-harness-")
        env = {**os.environ, "XDG_RUNTIME_DIR": "/run/user/0", "STATE": state}
        # the suite's own RUNTIME_/STATE_DIRECTORY (hermetic defaults for logwatch) must not
        # reach journald: it would put its sockets there, and no unit's output would reach it
        harness = {k: v for k, v in env.items()
                   if k not in ("RUNTIME_DIRECTORY", "STATE_DIRECTORY")}
        started = subprocess.run(["bash", str(HARNESS), "start"], capture_output=True,
                                 text=True, env=harness, timeout=60, check=False)
        try:
            if started.stdout.strip().splitlines()[-1:] != ["running"]:
                pytest.skip(f"systemd --user harness did not start: {started.stdout.strip()} "
                            f"{started.stderr.strip()}")
            yield env
        finally:
            subprocess.run(["bash", str(HARNESS), "stop"], capture_output=True, env=harness,
                           timeout=60, check=False)
            shutil.rmtree(state, ignore_errors=True)


def read_pty(master: int) -> bytes:
    """Everything a child wrote to a pseudo-terminal, once its writer side is closed."""
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side is gone
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    return seen



def _for_the_session(key: str, value: str, **more: str) -> Iterator[None]:
    """Environment variables set for the test session (children inherit them), then put
    back as they were."""
    wanted = {key: value, **more}
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    yield
    for k, was in saved.items():
        if was is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = was


@pytest.fixture(scope="session", autouse=True)
def strict_protocol() -> Iterator[None]:
    """Daemons the tests start (in process or as children) raise on an event published
    outside the vocabulary (logwatch.daemon.protocol) instead of logging and dropping it."""
    yield from _for_the_session("LOGWATCH_STRICT_PROTOCOL", "1")


@pytest.fixture(scope="session", autouse=True)
def standard_terminal() -> Iterator[None]:
    """Reports the tests read are laid out for an 80x24 terminal, whatever the one `make
    test` runs in (or the COLUMNS and LINES it exports): the width decides where a report
    wraps. Tests of other widths set their own."""
    yield from _for_the_session("COLUMNS", "80", LINES="24")


@pytest.fixture(scope="session", autouse=True)
def no_pager() -> Iterator[None]:
    """A command the tests run on a pseudo-terminal prints its long output there instead of
    waiting in `less` for a key (tests/test_output_conventions.py sets its own pager)."""
    yield from _for_the_session("LOGWATCH_PAGER", "")


def free_port() -> int:
    """A loopback TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_children(pid: int) -> list[int]:
    """The commands a `logwatch run` process `pid` started (pgrep -P), without the watcher of
    each one's process group (sources/dies_with_parent.py) that runs beside it."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True,
                           check=False).stdout.split()
    children = []
    for child in map(int, found):
        try:
            if b"group watcher" in Path(f"/proc/{child}/cmdline").read_bytes():
                continue
        except OSError:
            continue
        children.append(child)
    return children
