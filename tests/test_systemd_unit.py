"""Snapshot of a vLLM systemd unit under a real `systemd --user` manager: the effective
ExecStart with its drop-in, Environment and EnvironmentFile, then the running MainPID."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logwatch.core.signatures.library import Library
from logwatch.core.snapshot.model import GpuFacts
from logwatch.daemon.service import Daemon
from logwatch.host.capture import take_snapshot
from logwatch.store.db import Store

UNIT_DIR = Path("/run/user/0/systemd/user")
H100 = GpuFacts("NVIDIA H100", 8, "570", 90, "test")


def remove_unit(name: str, unit: Path, dropin: Path, env: dict[str, str]) -> None:
    """Stop a test unit and remove it with its drop-in, leaving the manager as it was."""
    subprocess.run(["systemctl", "--user", "stop", name], env=env, timeout=30, check=False)
    unit.unlink(missing_ok=True)
    dropin.unlink(missing_ok=True)
    if dropin.parent.exists():
        dropin.parent.rmdir()
    subprocess.run(["systemctl", "--user", "daemon-reload"], env=env, timeout=30, check=False)


async def committed(daemon: Daemon, findings: int, timeout: float = 30) -> None:
    """Until the daemon has committed `findings` new findings in all."""
    deadline = time.monotonic() + timeout
    while daemon.committed < findings:
        assert time.monotonic() < deadline, f"{findings} finding(s) not committed"
        await asyncio.sleep(0.02)


def _systemctl(env: dict[str, str], *args: str) -> str:
    return subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True,
                          env=env, timeout=30, check=True).stdout


@pytest.mark.slow
def test_unit_snapshot_stopped_then_running(systemd_user: dict[str, str], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    env = systemd_user
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])  # how systemctl --user finds it
    UNIT_DIR.mkdir(parents=True, exist_ok=True)
    name = f"logwatch-test-vllm-{os.getpid()}.service"
    fake = tmp_path / "vllm"
    fake.write_text("import time\ntime.sleep(120)\n")
    env_file = tmp_path / "vllm.env"
    env_file.write_text("# site settings\nVLLM_LOGGING_LEVEL=DEBUG\nHF_TOKEN=hf_fromfile\n")
    unit = UNIT_DIR / name
    dropin = UNIT_DIR / f"{name}.d" / "10-tp.conf"
    unit.write_text(
        "[Service]\n"
        f"ExecStart={sys.executable} {fake} serve /models/q -tp 2 --speculative-config "
        "'{\"method\": \"mtp\", \"num_speculative_tokens\": 2}' --api-key sk-unit-secret\n"
        'Environment=HF_TOKEN=hf_unitsecret "VLLM_LOGGING_PREFIX=[prod] "\n'
        f"EnvironmentFile={env_file}\n")
    dropin.parent.mkdir(parents=True, exist_ok=True)
    dropin.write_text(
        "[Service]\nExecStart=\n"
        f"ExecStart={sys.executable} {fake} serve /models/q -tp 4 --speculative-config "
        "'{\"method\": \"mtp\", \"num_speculative_tokens\": 2}'\n")
    _systemctl(env, "daemon-reload")
    try:
        stopped = take_snapshot(unit=name, user_unit=True, gpu=H100)
        assert stopped.tensor_parallel_size == 4  # the drop-in's ExecStart wins
        assert stopped.launch["speculative_config"] == {"method": "mtp",
                                                        "num_speculative_tokens": 2}
        assert stopped.env["HF_TOKEN"] == "***"
        assert stopped.env["VLLM_LOGGING_LEVEL"] == "DEBUG"  # from the EnvironmentFile
        assert stopped.env["VLLM_LOGGING_PREFIX"] == "[prod] "
        assert "drop-ins applied" in stopped.sources["argv"]

        _systemctl(env, "start", name)
        deadline = time.monotonic() + 10
        while _systemctl(env, "show", "-p", "MainPID", "--value", name).strip() in ("", "0"):
            assert time.monotonic() < deadline, "the unit did not start"
            time.sleep(0.05)
        running = take_snapshot(unit=name, user_unit=True, gpu=H100)
        pid = int(_systemctl(env, "show", "-p", "MainPID", "--value", name))
        assert running.sources["argv"] == f"/proc/{pid}/cmdline"
        assert running.tensor_parallel_size == 4
        assert running.env["VLLM_LOGGING_LEVEL"] == "DEBUG"
        assert "sk-unit-secret" not in str(running.to_dict())
        assert running.launch == stopped.launch  # the same launch, read two ways
    finally:
        remove_unit(name, unit, dropin, env)


@pytest.mark.slow
def test_a_restarted_unit_gets_a_new_snapshot_and_later_findings_link_to_it(
        systemd_user: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        library: Library) -> None:
    """vLLM restarted with other flags (a drop-in changes -tp): the daemon notices the new
    InvocationID, records the new configuration, and findings read afterwards link to it."""
    from logwatch.core.settings.config import TargetConfig
    from logwatch.host.targets import TargetSnapshots
    from logwatch.sources.files import FileSource
    from logwatch.store.db import open_store

    env = systemd_user
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
    UNIT_DIR.mkdir(parents=True, exist_ok=True)
    name = f"logwatch-test-restart-{os.getpid()}.service"
    fake = tmp_path / "vllm"
    fake.write_text("import time\ntime.sleep(120)\n")
    unit, dropin = UNIT_DIR / name, UNIT_DIR / f"{name}.d" / "10-tp.conf"
    unit.write_text(f"[Service]\nExecStart={sys.executable} {fake} serve /models/q -tp 2\n")
    log = tmp_path / "vllm.log"
    log.write_bytes(b"")
    hit = (b"(APIServer pid=1) INFO 10-14 10:00:00 [metrics.py:101] SpecDecoding metrics: "
           b"Mean acceptance length: 1.10, Accepted: 1 tokens, Drafted: 9 tokens, "
           b"Avg Draft acceptance rate: 5.5%\n")
    _systemctl(env, "daemon-reload")
    _systemctl(env, "start", name)
    targets = TargetSnapshots([TargetConfig("q", {"kind": "file", "path": str(log)},
                                            launch={"unit": name, "user": True})],
                              gpu=lambda: H100, interval=0.2)

    async def main(store: Store) -> tuple[str, str]:
        daemon = Daemon([FileSource(log, name=f"q:file:{log}")], library, store,
                        targets=targets)
        for snapshot in targets.take_all():
            daemon.record_snapshot(snapshot)
        first = daemon.snapshots["q"]
        runner = asyncio.create_task(daemon.run())
        with open(log, "ab") as out:
            out.write(hit)
        await committed(daemon, 1)
        dropin.parent.mkdir(parents=True, exist_ok=True)
        dropin.write_text("[Service]\nExecStart=\n"
                          f"ExecStart={sys.executable} {fake} serve /models/q -tp 4\n")
        await asyncio.to_thread(_systemctl, env, "daemon-reload")
        await asyncio.to_thread(_systemctl, env, "restart", name)
        deadline = time.monotonic() + 15
        while daemon.snapshots["q"] == first:
            assert time.monotonic() < deadline, "the restart was not noticed"
            await asyncio.sleep(0.1)
        with open(log, "ab") as out:
            out.write(hit)
        await committed(daemon, 2)
        daemon.stop()
        await runner
        return first, daemon.snapshots["q"]

    try:
        with open_store(tmp_path / "h.duckdb", service=True) as store:
            first, second = asyncio.run(main(store))
            links = store.query("SELECT line, snapshot_hash FROM findings ORDER BY line")
            tp = dict(store.query("SELECT hash, json_extract(body, '$.launch.tensor_parallel_size')"
                                  " FROM snapshots"))
    finally:
        remove_unit(name, unit, dropin, env)
    assert links == [(1, first), (2, second)]
    assert first != second
    assert (str(tp[first]), str(tp[second])) == ("2", "4")


@pytest.mark.slow
def test_a_unit_restarted_unchanged_keeps_its_snapshot_hash(
        systemd_user: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Each start of a unit gets a new INVOCATION_ID, JOURNAL_STREAM, SYSTEMD_EXEC_PID, ...
    from systemd: a restart of the same configuration is retaken (new InvocationID) with the
    same hash, and recorded once; so is the snapshot read while it was stopped (the unit's
    text, without the interpreter /proc shows before a #! script). A VLLM_ variable added by
    a drop-in is a new configuration, and `snapshot diff` names that variable alone."""
    from logwatch.cli.main import main
    from logwatch.core.settings.config import TargetConfig
    from logwatch.host.targets import TargetSnapshots
    from logwatch.store.db import open_store
    from logwatch.store.live import LiveWriter

    env = systemd_user
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
    UNIT_DIR.mkdir(parents=True, exist_ok=True)
    name = f"logwatch-test-same-{os.getpid()}.service"
    fake = tmp_path / "vllm"  # a script, as pip installs `vllm`
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(120)\n")
    fake.chmod(0o755)
    unit, dropin = UNIT_DIR / name, UNIT_DIR / f"{name}.d" / "10-env.conf"
    # Type=exec: `systemctl start` returns once vLLM's process is what runs (its /proc)
    unit.write_text(f"[Service]\nType=exec\nExecStart={fake} serve /models/q -tp 2\n"
                    "Environment=VLLM_LOGGING_LEVEL=INFO HF_TOKEN=hf_unitsecret\n")
    targets = TargetSnapshots([TargetConfig("q", {}, launch={"unit": name, "user": True})],
                              gpu=lambda: H100)

    def started(*how: str) -> None:
        _systemctl(env, "daemon-reload")
        _systemctl(env, *how, name)

    try:
        _systemctl(env, "daemon-reload")
        [stopped] = targets.take_all()
        started("start")
        [first] = targets.changed()
        pid = first.body["sources"]["argv"]
        started("restart")
        [again] = targets.changed()
        dropin.parent.mkdir(parents=True, exist_ok=True)
        dropin.write_text("[Service]\nEnvironment=VLLM_USE_DEEP_GEMM=0\n")
        started("restart")
        [other] = targets.changed()
    finally:
        remove_unit(name, unit, dropin, env)
    assert first.invocation != again.invocation != other.invocation  # three starts
    assert again.body["sources"]["argv"] != pid  # read from the new process
    assert "ExecStart" in stopped.body["sources"]["argv"] and "/proc/" in pid
    assert stopped.digest == first.digest == again.digest != other.digest
    assert "hf_unitsecret" not in str(first.body) and "INVOCATION_ID" not in first.body["env"]

    db = tmp_path / "h.duckdb"
    with open_store(db, service=True) as store:
        writer = LiveWriter(store, None)  # type: ignore[arg-type]  # snapshots only
        for snapshot in (stopped, first, again, other):
            writer.record_snapshot(snapshot.digest, snapshot.body)
        assert store.query("SELECT count(*) FROM snapshots") == [(2,)]
    capsys.readouterr()
    assert main(["snapshot", "diff", first.digest, other.digest, "--db", str(db)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{first.digest} -> {other.digest}: 1 change(s)", '  env.VLLM_USE_DEEP_GEMM: null -> "0"']
