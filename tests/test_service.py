"""The daemon as a service: shipped units verify, sd_notify speaks the protocol, and a real
`systemd --user` manager runs it as Type=notify through start, watchdog, reload and stop."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from logwatch.daemon.client import raw_subscription
from logwatch.daemon.notify import Notifier
from tests.conftest import ROOT, SAMPLES

UNITS = ROOT / "systemd"
ANALYZE = shutil.which("systemd-analyze")


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("unit", ["logwatch.service", "vllm.service"])
def test_shipped_units_verify_clean(unit: str, tmp_path: Path) -> None:
    """Only the executables are swapped for ones that exist here; everything else as shipped."""
    text = (UNITS / unit).read_text()
    text = text.replace("/usr/local/bin/logwatch", shutil.which("true") or "/bin/true")
    text = text.replace("/opt/vllm/bin/vllm", shutil.which("true") or "/bin/true")
    (tmp_path / unit).write_text(text)
    result = subprocess.run([ANALYZE, "verify", str(tmp_path / unit)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_the_hardened_unit_may_write_exactly_where_a_relaunch_writes() -> None:
    """ReadWritePaths= of the shipped unit against the paths the systemd executor writes for
    vllm.service under the system manager (the drop-in, persistent or runtime, and the
    restart hold), each made by ExecStartPre= before the sandbox; the overlays go under
    StateDirectory=. (The sandbox itself needs the system manager at PID 1.)"""
    from logwatch.core.settings.config import TargetConfig
    from logwatch.relaunch.executors import unit_of

    text = (UNITS / "logwatch.service").read_text()
    keys = [line.split("=", 1) for line in text.splitlines() if "=" in line
            and not line.startswith("#")]
    writable = {p for k, v in keys if k == "ReadWritePaths" for p in v.split()}
    made = {p for k, v in keys if k == "ExecStartPre" and "mkdir -p" in v
            for p in v.split("mkdir -p", 1)[1].split()}
    target = TargetConfig("qwen", {"kind": "journald"}, {"unit": "vllm.service"})
    wanted = set()
    for kind in ("persistent", "runtime"):
        unit = unit_of(target, kind)
        assert unit is not None
        wanted |= {str(unit.dropin.parent), str(unit.hold.parent)}
    assert writable == wanted == made
    assert ("ExecStartPre", "+/bin/mkdir -p " + " ".join(sorted(made, key=lambda p: not
                                                                  p.startswith("/etc")))) \
        in [tuple(k) for k in keys]
    assert ("StateDirectory", "logwatch") in [tuple(k) for k in keys]


def test_notify_protocol_on_a_real_socket(tmp_path: Path) -> None:
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        server.settimeout(5)
        notifier = Notifier({"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "4000000"})
        assert notifier.watchdog_interval == 2.0
        notifier.ready("following 1 source(s)")
        notifier.watchdog()
        notifier.stopping()
        got = [server.recv(4096).decode() for _ in range(3)]
    assert got == ["READY=1\nSTATUS=following 1 source(s)", "WATCHDOG=1", "STOPPING=1"]
    Notifier({}).ready()  # not under systemd: silent, no error


def _user(env: dict[str, str], *args: str, check: bool = True) -> str:
    return subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True,
                          env=env, timeout=60, check=check).stdout.strip()


def _wait(predicate, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def reloaded(sock: Path, reload: Callable[[], object]) -> dict[str, object]:
    """The `library` event the daemon publishes once a reload asked by `reload()` is done."""
    async def watch() -> dict[str, object]:
        reader, writer = await raw_subscription(sock, ["library"], wait=30)
        try:
            await asyncio.to_thread(reload)
            event: dict[str, object] = json.loads(await asyncio.wait_for(reader.readline(), 60))
            return event
        finally:
            writer.close()

    return asyncio.run(watch())


@pytest.mark.slow
def test_type_notify_unit_under_systemd_user(systemd_user: dict[str, str],
                                             tmp_path: Path) -> None:
    env = systemd_user
    unit_dir = Path("/run/user/0/systemd/user")
    unit_dir.mkdir(parents=True, exist_ok=True)
    name = f"logwatch-test-{os.getpid()}.service"
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes((SAMPLES / "mtp_tensor_mismatch_glm_033.log").read_bytes())
    config, sock = tmp_path / "logwatch.toml", tmp_path / "lw.sock"
    config.write_text("")  # not the host's /etc/logwatch/logwatch.toml
    # the manager strips $RUNTIME_DIRECTORY from what its units inherit: without --socket a
    # root daemon would bind /run/logwatch/logwatch.sock
    (unit_dir / name).write_text(
        "[Service]\nType=notify\nNotifyAccess=main\n"
        f"ExecStart={sys.executable} -m logwatch daemon --file {log} --db {db} "
        f"--socket {sock} --config {config}\n"
        "ExecReload=/bin/kill -HUP $MAINPID\nWatchdogSec=2\nRestart=on-failure\n"
        f"WorkingDirectory={ROOT}\n")
    _user(env, "daemon-reload")
    try:
        _user(env, "start", name)  # returns once READY=1 arrived (Type=notify)
        assert _user(env, "is-active", name) == "active"
        pid = _user(env, "show", "-p", "MainPID", "--value", name)
        _wait(lambda: "lines/s" in _user(env, "show", "-p", "StatusText", "--value", name))
        time.sleep(5)  # more than twice WatchdogSec: the watchdog must have been fed
        assert _user(env, "is-active", name) == "active"
        assert _user(env, "show", "-p", "NRestarts", "--value", name) == "0"
        assert reloaded(sock, lambda: _user(env, "reload", name))["loaded"] is True  # SIGHUP
        assert _user(env, "is-active", name) == "active"
        assert _user(env, "show", "-p", "MainPID", "--value", name) == pid  # same process
        _user(env, "stop", name)
        assert _user(env, "is-active", name, check=False) == "inactive"  # not "failed"
    finally:
        _user(env, "stop", name, check=False)
        (unit_dir / name).unlink(missing_ok=True)
        _user(env, "daemon-reload", check=False)
    con = duckdb.connect(str(db), read_only=True)
    signatures = {r[0] for r in con.execute("SELECT signature FROM findings").fetchall()}
    con.close()
    assert "weights.tensor_size_mismatch" in signatures


@pytest.mark.slow
def test_restarting_logwatch_never_starts_the_vllm_it_watches(systemd_user: dict[str, str]
                                                               ) -> None:
    """The shipped unit's [Unit] dependencies, under a real manager, with vllm.service a
    stand-in the operator stopped for maintenance: starting and restarting logwatch leaves
    it stopped (it said Wants=vllm.service, which started it each time)."""
    env = systemd_user
    unit_dir = Path("/run/user/0/systemd/user")
    unit_dir.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid()}"
    vllm, watcher = f"vllm-standin-{tag}.service", f"logwatch-deps-{tag}.service"
    shipped = (UNITS / "logwatch.service").read_text().split("[Service]", 1)[0]
    deps = [line.replace("vllm.service", vllm) for line in shipped.splitlines()
            if line.split("=", 1)[0] in ("After", "Wants", "Requires", "BindsTo", "Requisite",
                                         "PartOf", "Upholds")]
    assert any(line.startswith("After=") for line in deps)  # ordered after it, still
    sleep = shutil.which("sleep") or "/bin/sleep"
    (unit_dir / vllm).write_text(f"[Service]\nExecStart={sleep} infinity\n")
    (unit_dir / watcher).write_text("[Unit]\n" + "\n".join(deps) +
                                    f"\n[Service]\nExecStart={sleep} infinity\n")
    try:
        _user(env, "daemon-reload")
        _user(env, "start", watcher)
        _user(env, "restart", watcher)
        assert _user(env, "is-active", watcher, check=False) == "active"
        assert _user(env, "is-active", vllm, check=False) == "inactive"
    finally:
        _user(env, "stop", watcher, vllm, check=False)
        for unit in (vllm, watcher):
            (unit_dir / unit).unlink(missing_ok=True)
        _user(env, "daemon-reload", check=False)
