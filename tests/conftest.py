"""Shared fixtures: the shipped library (loaded once), and paths into the repository."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from logwatch.core.library import Library
from logwatch.library.files import load_signature_dirs

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples" / "logs"


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


@pytest.fixture(scope="session")
def systemd_user() -> Iterator[dict[str, str]]:
    """A real `systemd --user` manager (the shared harness); skipped where it cannot run."""
    import os
    import subprocess

    if os.geteuid() != 0 or not HARNESS.exists():
        pytest.skip("systemd --user harness needs root and ../shared/tools")
    env = {**os.environ, "XDG_RUNTIME_DIR": "/run/user/0"}
    started = subprocess.run(["bash", str(HARNESS), "start"], capture_output=True, text=True,
                             env=env, timeout=60, check=False)
    try:
        if started.stdout.strip().splitlines()[-1:] != ["running"]:
            pytest.skip(f"systemd --user harness did not start: {started.stdout.strip()} "
                        f"{started.stderr.strip()}")
        yield env
    finally:
        subprocess.run(["bash", str(HARNESS), "stop"], capture_output=True, env=env,
                       timeout=60, check=False)


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



@pytest.fixture(scope="session", autouse=True)
def strict_protocol() -> Iterator[None]:
    """Daemons the tests start (in process or as children) raise on an event published
    outside the vocabulary (logwatch.daemon.protocol) instead of logging and dropping it."""
    saved = os.environ.get("LOGWATCH_STRICT_PROTOCOL")
    os.environ["LOGWATCH_STRICT_PROTOCOL"] = "1"
    yield
    if saved is None:
        os.environ.pop("LOGWATCH_STRICT_PROTOCOL", None)
    else:
        os.environ["LOGWATCH_STRICT_PROTOCOL"] = saved
