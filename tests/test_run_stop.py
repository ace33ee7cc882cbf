"""`logwatch run` always lets go of vLLM: a child that ignores SIGTERM (as a vLLM stuck in
NCCL teardown does) is killed, with its process group, on a second SIGINT/SIGTERM or once the
stop deadline passes, and said on stderr; a run killed with SIGKILL leaves no child behind
holding its port. The child here is real: a Python script that traps TERM and binds a port."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port, run_children


def _stubborn(ready: Path, port: int) -> str:
    """A child that binds `port`, starts a helper of its own that ignores SIGTERM too (as
    vLLM's EngineCore is: in the child's process group), says both pids in `ready`, and
    prints a line per SIGTERM it ignores."""
    return ("import os, pathlib, signal, socket, subprocess, sys, time\n"
            "def ignored(*_):\n"
            "    try:\n"
            "        print('ignored SIGTERM', flush=True)\n"
            "    except OSError:\n"
            "        pass  # its reader gone: it goes on all the same\n"
            "signal.signal(signal.SIGTERM, ignored)\n"
            "signal.signal(signal.SIGINT, ignored)\n"
            f"s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(1)\n"
            "helper = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)'])\n"
            f"pathlib.Path({str(ready)!r}).write_text(str(helper.pid))\n"
            "while True: time.sleep(1)\n")


def _start(tmp: Path, port: int, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    ready = tmp / "ready"
    run = subprocess.Popen([sys.executable, "-m", "logwatch", "run", "--db",
                            str(tmp / "h.duckdb"), "--gpu-capability", "9.0", *extra, "--",
                            sys.executable, "-c", _stubborn(ready, port)],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert time.monotonic() < deadline and run.poll() is None, "the child never ran"
        time.sleep(0.05)  # polling for the child's own sign of life
    children = run_children(run.pid)
    assert len(children) == 1, children
    return run, int(children[0])


def _gone(pid: int) -> bool:
    path = Path(f"/proc/{pid}/stat")
    try:
        return "Z" in path.read_text().split()[2]
    except OSError:
        return True


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _until(condition: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)  # polling a process's state, within the deadline


def _wait_line(run: subprocess.Popen[bytes], text: bytes) -> None:
    assert run.stdout is not None
    line = run.stdout.readline()
    assert line == text, line


@pytest.mark.slow
def test_a_second_signal_kills_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    port = free_port()
    run, child = _start(tmp_path, port)
    try:
        run.send_signal(signal.SIGTERM)
        _wait_line(run, b"ignored SIGTERM\n")  # forwarded once, and ignored
        started = time.monotonic()
        run.send_signal(signal.SIGINT)
        code = run.wait(15)
        took = time.monotonic() - started
    finally:
        if run.poll() is None:
            run.kill()
    err = run.stderr.read().decode() if run.stderr else ""
    assert took < 10, err
    assert code == 128 + signal.SIGKILL, err
    assert "a second signal (SIGINT): SIGKILL to its process group" in err, err
    _until(lambda: _gone(child), 10, "the child outlived its run")
    assert _port_free(port)


@pytest.mark.slow
def test_the_stop_deadline_kills_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    """The deadline from the configuration ([run] stop_seconds), said when it passes."""
    config = tmp_path / "lw.toml"
    config.write_text("[run]\nstop_seconds = 1\n")
    port = free_port()
    run, child = _start(tmp_path, port, "--config", str(config))
    try:
        started = time.monotonic()
        run.send_signal(signal.SIGTERM)
        code = run.wait(20)
        took = time.monotonic() - started
    finally:
        if run.poll() is None:
            run.kill()
    err = run.stderr.read().decode() if run.stderr else ""
    assert code == 128 + signal.SIGKILL, err
    assert 1 <= took < 10, (took, err)
    assert "did not stop within 1 s of SIGTERM: SIGKILL to its process group" in err, err
    _until(lambda: _gone(child), 10, "the child outlived its run")
    assert _port_free(port)


@pytest.mark.slow
def test_the_stop_deadline_flag(tmp_path: Path) -> None:
    port = free_port()
    run, child = _start(tmp_path, port, "--stop-seconds", "0.5")
    try:
        run.send_signal(signal.SIGINT)
        code = run.wait(20)
    finally:
        if run.poll() is None:
            run.kill()
    err = run.stderr.read().decode() if run.stderr else ""
    assert code == 128 + signal.SIGKILL, err
    assert "did not stop within 0.5 s of SIGINT" in err, err
    _until(lambda: _gone(child), 10, "the child outlived its run")


@pytest.mark.slow
def test_a_run_killed_with_sigkill_leaves_no_child_holding_its_port(tmp_path: Path) -> None:
    """Neither the child nor what it started in its process group (as vLLM's EngineCore and
    workers are) outlives a run killed with SIGKILL: before, the death signal reached the
    child only, and its helper lived on, orphaned (holding the GPUs, with real vLLM)."""
    port = free_port()
    run, child = _start(tmp_path, port)
    _until(lambda: (tmp_path / "ready").read_text().isdigit(), 15, "the helper's pid")
    helper = int((tmp_path / "ready").read_text())
    try:
        run.kill()
        run.wait(30)
        _until(lambda: _gone(child), 15, "the child outlived its killed run")
        _until(lambda: _gone(helper), 15, "the child's helper outlived the killed run")
        _until(lambda: _port_free(port), 15, "the child's port stayed held")
    finally:
        if run.poll() is None:
            run.kill()
        import os
        for pid in (child, helper):
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_check_config_knows_the_stop_deadline(tmp_path: Path) -> None:
    from tests.inprocess import logwatch

    config = tmp_path / "lw.toml"
    config.write_text("[run]\nstop_seconds = 0\nstop_second = 3\n")
    done = logwatch("check-config", "--config", str(config))
    err = done.stdout + done.stderr
    assert done.returncode != 0
    assert b"run.stop_seconds must be more than 0" in err, err
    assert b"unknown key 'stop_second' in [run]" in err, err
    config.write_text("[run]\nstop_seconds = 5\n")
    assert logwatch("check-config", "--config", str(config)).returncode == 0
