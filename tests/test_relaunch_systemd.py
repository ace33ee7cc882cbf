"""A plan carried out through a real `systemd --user` manager: logwatch's drop-in written, the
unit restarted with exactly the planned argv and environment, the operator's own drop-in
untouched, and the undo putting the operator's launch back.

The unit runs a recorder instead of vLLM: it writes the argv and environment systemd gave it,
which is what the relaunch is judged on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logwatch.core.remedy.dropin import DROPIN_NAME, exec_line, relaunch_dropin
from logwatch.core.remedy.plan import Plan, plan_relaunch
from logwatch.core.snapshot.host_facts import exec_start_from_unit
from logwatch.core.snapshot.model import GpuFacts
from logwatch.host.capture import take_snapshot
from logwatch.host.variants import variant_candidates
from logwatch.relaunch.systemd import RelaunchError, SystemdUnit
from tests.test_plan import A16, MODELS, SPEC, W4A4_COVERED, marlin_failure

UNIT_DIR = Path("/run/user/0/systemd/user")
RECORDER = """\
import json, os, sys, time
record = {"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items()
                                          if k.startswith(("VLLM_", "OPERATOR"))}}
path = os.environ["RECORD"]
with open(path + ".tmp", "w") as fh:
    json.dump(record, fh)
os.replace(path + ".tmp", path)
time.sleep(300)
"""
HOSTILE = ["$(touch {pwned})", "`touch {pwned}`", "; rm -rf {pwned}", "%n %h %%", "$HOME",
           "${{HOME}}", 'a"b\\c', "tab\there", "new\nline", "ünïcødé", "--flag='x y'"]


def _systemctl(env: dict[str, str], *args: str) -> str:
    return subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True,
                          env=env, timeout=30, check=True).stdout


def recorded(path: Path, previous: dict[str, object] | None, timeout: float = 20
             ) -> dict[str, object]:
    """The recorder's next record (one other than `previous`), waiting for the restart."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            record: dict[str, object] = json.loads(path.read_text())
            if record != previous:
                return record
        except (OSError, ValueError):
            pass
        assert time.monotonic() < deadline, "the unit did not (re)start with a new launch"
        time.sleep(0.05)


@pytest.fixture
def unit(systemd_user: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
         ) -> dict[str, object]:
    """A unit running the recorder as `vllm serve` of the seed's NVFP4A16 model (a copy with
    its W4A4 variant beside it), with an operator's drop-in of its own."""
    env = systemd_user
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
    UNIT_DIR.mkdir(parents=True, exist_ok=True)
    models = tmp_path / "models"
    for name in (A16, W4A4_COVERED):
        shutil.copytree(MODELS / name, models / name)
    script = tmp_path / "bin" / "vllm"  # named as vLLM's entry point is
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\n{RECORDER}")
    script.chmod(0o755)
    record = tmp_path / "record.json"
    name = f"logwatch-relaunch-{os.getpid()}.service"
    unit_file = UNIT_DIR / name
    unit_file.write_text(
        "[Service]\n"
        f"ExecStart={script} serve {models / A16} -tp 4 "
        f"--speculative-config '{SPEC}'\n"
        f"Environment=RECORD={record} VLLM_NVFP4_GEMM_BACKEND=marlin\n")
    operator = UNIT_DIR / f"{name}.d" / "10-operator.conf"
    operator.parent.mkdir(parents=True, exist_ok=True)
    operator.write_text("[Service]\nEnvironment=OPERATOR_SETTING=kept\n")
    _systemctl(env, "daemon-reload")
    _systemctl(env, "start", name)
    try:
        yield {"env": env, "name": name, "models": models, "record": record,
               "operator": operator, "operator_text": operator.read_text()}
    finally:
        subprocess.run(["systemctl", "--user", "stop", name], env=env, timeout=30, check=False)
        shutil.rmtree(operator.parent, ignore_errors=True)
        unit_file.unlink(missing_ok=True)
        subprocess.run(["systemctl", "--user", "daemon-reload"], env=env, timeout=30,
                       check=False)


@pytest.mark.slow
def test_a_plan_relaunches_the_unit_and_the_undo_restores_it(unit: dict[str, object]) -> None:
    name, models, record = str(unit["name"]), Path(str(unit["models"])), Path(str(unit["record"]))
    before = recorded(record, None)
    assert before["argv"] == ["serve", str(models / A16), "-tp", "4", "--speculative-config",
                              SPEC]
    executor = SystemdUnit(name, user=True, dropin_root=UNIT_DIR)
    snap = take_snapshot(unit=name, user_unit=True, model_dir=str(models / A16),
                         gpu=GpuFacts("B200", 4, capability=100, source="given"))
    plan = plan_relaunch([marlin_failure()], snap, variant_candidates(str(models / A16)))
    assert plan is not None and plan.startable, plan

    started = executor.apply(plan)
    after = recorded(record, before)
    assert after["argv"] == started.spec.argv()[1:]  # exactly what was planned
    argv = list(after["argv"])  # type: ignore[call-overload]
    assert argv[1] == str(models / W4A4_COVERED)
    assert argv[argv.index("--served-model-name") + 1] == str(models / A16)
    env = dict(after["env"])  # type: ignore[call-overload]
    assert env["OPERATOR_SETTING"] == "kept"  # the operator's drop-in still applies
    assert "VLLM_NVFP4_GEMM_BACKEND" not in env  # it forced Marlin: unset
    assert executor.dropin.read_text().startswith("# Written by logwatch")
    assert Path(str(unit["operator"])).read_text() == unit["operator_text"]

    again = executor.current()  # the operator's launch, logwatch's drop-in left out
    assert again.spec.model == str(models / A16)

    assert executor.undo()
    restored = recorded(record, after)
    assert restored["argv"] == before["argv"]
    assert not executor.dropin.exists() and Path(str(unit["operator"])).exists()
    assert not executor.undo()  # nothing of logwatch's left


@pytest.mark.slow
def test_hostile_words_reach_the_process_exactly_and_run_nothing(
        unit: dict[str, object], tmp_path: Path) -> None:
    """Quotes, `$(...)`, backticks, specifiers, variables, control characters: systemd
    passes each word through as written, and nothing is executed."""
    name, record = str(unit["name"]), Path(str(unit["record"]))
    before = recorded(record, None)
    pwned = tmp_path / "pwned"
    words = [w.format(pwned=pwned) for w in HOSTILE]
    argv = [str(tmp_path / "bin" / "vllm"), *words]
    executor = SystemdUnit(name, user=True, dropin_root=UNIT_DIR)
    executor.dropin.parent.mkdir(parents=True, exist_ok=True)
    executor.dropin.write_text(relaunch_dropin(argv, {"VLLM_HOSTILE": "$(x) %n \"q\""}, [],
                                               "test", ["hostile"]))
    _systemctl(unit["env"], "daemon-reload")  # type: ignore[arg-type]
    _systemctl(unit["env"], "restart", name)  # type: ignore[arg-type]
    got = recorded(record, before)
    assert got["argv"] == words
    assert dict(got["env"])["VLLM_HOSTILE"] == "$(x) %n \"q\""  # type: ignore[call-overload]
    assert not pwned.exists()
    assert executor.undo()


def test_an_operator_file_in_logwatchs_place_is_not_removed(tmp_path: Path) -> None:
    executor = SystemdUnit("vllm.service", user=True, dropin_root=tmp_path)
    executor.dropin.parent.mkdir(parents=True)
    executor.dropin.write_text("[Service]\nEnvironment=MINE=1\n")
    with pytest.raises(RelaunchError, match="not written by logwatch"):
        executor.undo()
    with pytest.raises(RelaunchError, match="not written by logwatch"):
        executor.apply(Plan(("mtp_ignore_list_gap",)))  # nor written over
    with pytest.raises(RelaunchError, match="only a drop-in logwatch wrote"):
        executor.restore("[Service]\nExecStart=\nExecStart=/bin/sh -c 'rm -rf /'\n")
    assert executor.dropin.read_text() == "[Service]\nEnvironment=MINE=1\n"


def test_exec_line_reads_back_as_the_same_words() -> None:
    """What logwatch reads of a unit (core.snapshot.host_facts) gives back the words it wrote, for
    words without systemd's `$` and `%` (those are doubled for systemd, not for shlex)."""
    words = ["/usr/bin/vllm", "serve", "/m/a b", 'x"y', "a\\b", "--speculative-config", SPEC]
    text = f"# /u/{DROPIN_NAME}\n[Service]\nExecStart=\n{exec_line(words)}\n"
    assert exec_start_from_unit(text) == words


@pytest.mark.slow
def test_automatic_restarts_are_held_while_an_action_runs(
        systemd_user: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit with Restart=always: while logwatch holds restarts, a killed process stays down
    (the manager does not fight the action); released, the unit's own Restart= is back. The
    hold lives under the runtime directory and is left out of the operator's launch."""
    env = systemd_user
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
    name = f"logwatch-hold-{os.getpid()}.service"
    UNIT_DIR.mkdir(parents=True, exist_ok=True)
    unit_file = UNIT_DIR / name
    unit_file.write_text(f"[Service]\nExecStart={sys.executable} -c 'import time; "
                         "time.sleep(300)'\nRestart=always\nRestartSec=0.1\n")
    _systemctl(env, "daemon-reload")
    _systemctl(env, "start", name)
    executor = SystemdUnit(name, user=True, dropin_root=tmp_path / "persistent",
                           runtime_root=UNIT_DIR)
    try:
        assert executor.restart_policy() == "always"
        assert executor.hold_restarts("a1")
        assert executor.restart_policy() == "no" and executor.hold.exists()
        pid = _systemctl(env, "show", "-p", "MainPID", "--value", name).strip()
        os.kill(int(pid), 9)
        deadline = time.monotonic() + 20
        while (state := _systemctl(env, "show", "-p", "ActiveState", "--value", name).strip()
               ) not in ("failed", "inactive"):
            now = _systemctl(env, "show", "-p", "MainPID", "--value", name).strip()
            assert now in ("0", pid), "restarted while held"
            assert time.monotonic() < deadline, f"still {state}"
            time.sleep(0.05)
        assert _systemctl(env, "show", "-p", "NRestarts", "--value", name).strip() == "0"
        assert executor.release_restarts() and not executor.hold.exists()
        assert executor.restart_policy() == "always"
        assert not executor.release_restarts()
    finally:
        subprocess.run(["systemctl", "--user", "stop", name], env=env, timeout=30, check=False)
        subprocess.run(["systemctl", "--user", "reset-failed", name], env=env, timeout=30,
                       check=False)
        shutil.rmtree(UNIT_DIR / f"{name}.d", ignore_errors=True)
        unit_file.unlink(missing_ok=True)
        subprocess.run(["systemctl", "--user", "daemon-reload"], env=env, timeout=30,
                       check=False)
