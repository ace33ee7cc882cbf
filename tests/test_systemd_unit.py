"""Snapshot of a vLLM systemd unit under a real `systemd --user` manager: the effective
ExecStart with its drop-in, Environment and EnvironmentFile, then the running MainPID."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logwatch.core.snapshot import GpuFacts
from logwatch.snapshot.capture import take_snapshot

UNIT_DIR = Path("/run/user/0/systemd/user")
H100 = GpuFacts("NVIDIA H100", 8, "570", 90, "test")


def _systemctl(env: dict[str, str], *args: str) -> str:
    return subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True,
                          env=env, timeout=30, check=True).stdout


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
        subprocess.run(["systemctl", "--user", "stop", name], env=env, timeout=30, check=False)
        unit.unlink(missing_ok=True)
        dropin.unlink(missing_ok=True)
        dropin.parent.rmdir()
        subprocess.run(["systemctl", "--user", "daemon-reload"], env=env, timeout=30,
                       check=False)
