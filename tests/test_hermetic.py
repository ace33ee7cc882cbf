"""The tests' own isolation: under the test environment the daemon's defaults resolve into the
test's private directory, never a system path, and the guard refuses one when asked."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from logwatch.daemon.config_file import default_socket_path
from logwatch.store.db import default_db_path
from tests import hermetic
from tests.conftest import ROOT


def test_the_default_socket_and_history_are_the_tests_own(own_runtime: Path) -> None:
    for path in (default_socket_path(), default_db_path()):
        assert not hermetic.is_system_path(path), path
        assert path.is_relative_to(own_runtime), path
    assert default_socket_path() == own_runtime / "run" / "logwatch.sock"
    assert default_db_path() == own_runtime / "state" / default_db_path().name


_seen_runtimes: set[Path] = set()


@pytest.mark.parametrize("repeat", [1, 2])
def test_each_test_gets_a_private_directory_of_its_own(repeat: int, own_runtime: Path) -> None:
    assert own_runtime.stat().st_mode & 0o077 == 0  # a socket directory others cannot write
    assert len(str(default_socket_path()).encode()) < 108  # AF_UNIX's limit
    assert own_runtime not in _seen_runtimes
    _seen_runtimes.add(own_runtime)


def test_a_child_with_the_tests_environment_resolves_the_same(own_runtime: Path) -> None:
    """A child given `{**os.environ, ...}`, as the tests start them, inherits the test's
    directory (a child of root without it would pick /run/logwatch)."""
    code = ("from logwatch.daemon.config_file import default_socket_path as s; "
            "from logwatch.store.db import default_db_path as d; print(s()); print(d())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=60,
                         check=True).stdout.split()
    assert [Path(p).parent.parent for p in out] == [own_runtime, own_runtime]


@pytest.mark.parametrize("path", [p / "probe.sock" for p in hermetic.SYSTEM_PATHS])
def test_the_guard_refuses_a_socket_under_a_system_path(path: Path) -> None:
    """Refused by the audit hook before the system call: nothing is created."""
    with socket.socket(socket.AF_UNIX) as sock:
        with pytest.raises(hermetic.SystemPathTouched):
            sock.bind(str(path))
        with pytest.raises(hermetic.SystemPathTouched):
            sock.connect(str(path))
    with pytest.raises(hermetic.SystemPathTouched):
        open(path.with_name("probe.toml"), "w")  # noqa: SIM115
    assert len(hermetic.refused) == 3
    hermetic.refused.clear()  # asked for: not a failure of this test


def test_the_guard_reads_what_changed() -> None:
    before = {"/run/logwatch": (1, 0o040000)}
    after = {"/run/logwatch": (2, 0o040000), "/run/logwatch/logwatch.sock": (3, 0o140000)}
    assert hermetic.changes(before, after) == ["created /run/logwatch/logwatch.sock",
                                               "replaced /run/logwatch"]
    assert hermetic.changes(after, before) == ["removed /run/logwatch/logwatch.sock",
                                               "replaced /run/logwatch"]
    assert hermetic.is_system_path("/run/logwatch") and hermetic.is_system_path(
        "/var/lib/logwatch/../logwatch/h.duckdb")
    assert not hermetic.is_system_path("/run/logwatch2/x")


def test_the_guard_names_who_holds_a_socket(tmp_path: Path) -> None:
    """On a machine shared with other checkouts' test runs, a change is blamed on this
    session unless the path is held by processes of another checkout alone."""
    path = str(tmp_path / "held.sock")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(path)
        sock.listen()
        (pid, _, cwd), = hermetic.holders([path])[path]
    assert pid == os.getpid() and cwd == os.getcwd()
    none = hermetic.Snapshot({}, {})
    ours = hermetic.Snapshot({path: (1, 0o140000)}, {path: [(pid, sys.executable, cwd)]})
    assert hermetic.blame(none, ours, ROOT) == ([f"created {path}"], [])
    other = [(4242, "/elsewhere/.venv/bin/python -m logwatch daemon", "/elsewhere")]
    theirs = hermetic.Snapshot(ours.state, {path: other})
    blamed, told = hermetic.blame(none, theirs, ROOT)
    assert blamed == [] and told[0].startswith(f"created {path}\n    by pid 4242: ")
    assert hermetic.blame(theirs, none, ROOT)[0] == []  # theirs went
    assert hermetic.blame(hermetic.Snapshot(ours.state, {path: []}), none, ROOT)[0] == []
    unheld = hermetic.Snapshot(ours.state, {path: []})
    assert hermetic.blame(none, unheld, ROOT) == ([f"created {path}"], [])  # nobody: ours
