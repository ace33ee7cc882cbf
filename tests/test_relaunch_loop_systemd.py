"""The loop under a real `systemd --user` manager (and the real journald the harness starts):
the vLLM stand-in as the operator's unit. First the pieces by hand: its failure read back from
its output file, diagnosed and planned from the history, the plan carried out through
logwatch's drop-in and verified, a relaunch that fails rolled back to the last launch that
verified. Then the daemon itself following the unit through journald (`--user-unit`, as
production follows `-u vllm.service`): policy auto, policy ask with `logwatch approve`, a
forced failure rolled back and escalated, the breaker, expiry and reject; the operator's
drop-in is never touched. And `logwatch demo --executor systemd`."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from logwatch.core.remedy.actions import APPROVED, POLICY, Action, propose, transition
from logwatch.core.remedy.plan import Change, Launch, Plan
from logwatch.core.remedy.policy import (
    BREAKER_OPEN,
    RelaunchPolicy,
    Request,
    TargetPolicy,
    Thresholds,
    decide,
)
from logwatch.core.remedy.verify import Probes, Verdict, judge
from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from logwatch.core.snapshot.argv import LaunchSpec
from logwatch.core.snapshot.host_facts import exec_start_from_unit
from logwatch.daemon import client
from logwatch.daemon.protocol import ActionEvent
from logwatch.demo.scenario import standin_entry
from logwatch.relaunch.from_history import failed_launch
from logwatch.relaunch.runner import carry_out, file_recorder
from logwatch.relaunch.systemd import SystemdUnit
from logwatch.relaunch.unit_executor import UnitExecutor
from logwatch.relaunch.verify import endpoint, probe, served_name, wait_healthy
from logwatch.scan.offline import resolve_inputs, scan_inputs
from logwatch.scan.triage import SnapshotOptions
from logwatch.store.actions import load_history
from logwatch.store.db import open_store
from logwatch.store.record import ScanRecorder
from tests.conftest import ROOT, free_port
from tests.live_actions import logwatch_cli, until_state
from tests.test_plan import MODELS, SPEC, W4A4_UNCOVERED

UNIT_DIR = Path("/run/user/0/systemd/user")
MODEL = "Qwen3.6-NVFP4"  # the sample W4A4 checkpoint with its MTP entry taken out


def _systemctl(env: dict[str, str], *args: str) -> str:
    return subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True,
                          env=env, timeout=30, check=True).stdout


OUTPUT: dict[str, int] = {}  # the unit's log file -> where the current launch's lines start


def _output(env: dict[str, str], unit: str) -> str:
    """What the unit printed since its current launch started (its StandardOutput file)."""
    path = Path(env["LOOP_LOG"])
    data = path.read_bytes() if path.exists() else b""
    return data[OUTPUT.get(str(path), 0):].decode(errors="replace")


def _mark(env: dict[str, str]) -> None:
    """A launch starts now: its lines are the ones after this point."""
    path = Path(env["LOOP_LOG"])
    OUTPUT[str(path)] = path.stat().st_size if path.exists() else 0


def _until(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.1)  # polling the manager within the deadline


UNITS_MADE = itertools.count(1)


@pytest.fixture
def loop(systemd_user: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         request: pytest.FixtureRequest) -> object:
    """The stand-in as the operator's unit, failing on the MTP gap. Its output goes to a
    file (`loop`), or to the journal (parametrized "journal"), where it is read as
    production reads it; a unit name of its own each time, so that no earlier test's entries
    are read for it. `hostile` (a file) is printed by the unit once, before its first start."""
    env = systemd_user
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
    output = getattr(request, "param", "file")
    UNIT_DIR.mkdir(parents=True, exist_ok=True)
    models = tmp_path / "models"
    shutil.copytree(MODELS / W4A4_UNCOVERED, models / MODEL)  # MTP not covered
    vllm = standin_entry(tmp_path / "bin")
    name = f"logwatch-loop-{os.getpid()}-{next(UNITS_MADE)}.service"
    port = free_port()
    hostile, once = tmp_path / "hostile.txt", tmp_path / "hostile.printed"
    (UNIT_DIR / name).write_text(
        "[Service]\n"
        f"ExecStartPre=/bin/sh -c 'test -e {once} || {{ cat {hostile} 2>/dev/null; "
        f"touch {once}; }}'\n"
        f"ExecStart={vllm} serve {models / MODEL} -tp 4 --speculative-config '{SPEC}' "
        f"--port {port}\n"
        "Environment=LOGWATCH_STANDIN_GPU=b200 LOGWATCH_STANDIN_GPU_COUNT=4 "
        "LOGWATCH_STANDIN_PACE=0 VLLM_LOG_STATS_INTERVAL=1 PYTHONUNBUFFERED=1\n"
        + (f"StandardOutput=append:{tmp_path / 'vllm.log'}\nStandardError=inherit\n"
           if output == "file" else "")
        + "Restart=on-failure\nRestartSec=5\n")
    operator = UNIT_DIR / f"{name}.d" / "10-operator.conf"
    operator.parent.mkdir(parents=True, exist_ok=True)
    operator.write_text("[Service]\nEnvironment=OPERATOR_SETTING=kept\n")
    _systemctl(env, "daemon-reload")
    try:
        yield {"env": {**env, "LOOP_LOG": str(tmp_path / "vllm.log")}, "name": name,
               "models": models, "operator": operator, "text": operator.read_text(),
               "tmp": tmp_path, "port": port, "output": output, "hostile": hostile}
    finally:
        subprocess.run(["systemctl", "--user", "stop", name], env=env, timeout=30, check=False)
        subprocess.run(["systemctl", "--user", "reset-failed", name], env=env, timeout=30,
                       check=False)
        shutil.rmtree(operator.parent, ignore_errors=True)
        (UNIT_DIR / name).unlink(missing_ok=True)
        subprocess.run(["systemctl", "--user", "daemon-reload"], env=env, timeout=30,
                       check=False)


def _verify(library: Library, env: dict[str, str], unit: str, launch: Launch) -> Verdict:
    spec: LaunchSpec = launch.spec
    base, name = endpoint(spec), served_name(spec) or ""
    deadline = time.monotonic() + 20
    healthy = False
    while not healthy and time.monotonic() < deadline:
        healthy = wait_healthy(base, time.monotonic() + 0.5)
        state = _systemctl(env, "show", "-p", "ActiveState", "--value", unit).strip()
        if state in ("failed", "inactive"):
            break  # the relaunch died (restarts are held): nothing will answer
    matcher = Matcher(library.signatures)
    answers = Probes(errors={"health": "never answered"})
    deadline = time.monotonic() + 15
    while True:
        if healthy:
            answers = probe(base, name)
        text = _output(env, unit)
        scanner = BlockScanner(matcher, unit, datetime.now())
        findings = scanner.feed(text.encode()) + scanner.finish()
        done = any(f.signature.id == "spec_decode.acceptance" for f in findings)
        if not healthy or done or time.monotonic() > deadline:
            return judge(findings, answers, name, spec.uses_mtp)
        time.sleep(0.3)  # the soak: a reading each second the server had requests


def _approved(action_id: str, plan: Plan, now: datetime) -> Action:
    return transition(propose(action_id, "vllm", plan.digest, plan.digest, "cfg",
                              "weights.tensor_size_mismatch", "launch", now, "test"),
                      APPROVED, now, POLICY, "auto")


@pytest.mark.slow
def test_the_loop_through_systemd(loop: dict[str, object], library: Library) -> None:
    env, name = loop["env"], str(loop["name"])
    tmp, models = Path(str(loop["tmp"])), Path(str(loop["models"]))
    assert isinstance(env, dict)
    _mark(env)
    _systemctl(env, "start", name)
    _until(lambda: _systemctl(env, "show", "-p", "ActiveState", "--value", name).strip()
           in ("failed", "activating"), 20, "the first launch did not fail")
    _until(lambda: "must match the size of tensor b" in _output(env, name), 5,
           "the failure did not reach the journal")
    log = tmp / "journal.log"
    log.write_text(_output(env, name))
    _systemctl(env, "stop", name)  # no automatic restart into the same failure meanwhile
    db = tmp / "history.duckdb"
    recorder = ScanRecorder()
    report = scan_inputs(resolve_inputs([str(log)]), library, recorder=recorder, jobs=1,
                         snapshot_options=SnapshotOptions(unit=name, user_unit=True,
                                                          model_dir=str(models / MODEL),
                                                          gpu_capability=100))
    with open_store(db) as store:
        recorder.write(store, report)
    found = failed_launch(db)
    assert found is not None and found.plan is not None and found.plan.startable, found
    assert found.plan.overlay is not None

    unit = SystemdUnit(name, user=True, dropin_root=UNIT_DIR, runtime_root=UNIT_DIR)
    now = datetime(2026, 12, 1, 11)
    executor = UnitExecutor(unit, "a1")
    _mark(env)
    outcome = carry_out(file_recorder(db), _approved("a1", found.plan, now), found.plan, executor,
                        lambda launch: _verify(library, env, name, launch), tmp / "state",
                        now=lambda: now)
    assert outcome.action.state == "succeeded", outcome.verdict
    assert unit.dropin.exists() and not unit.hold.exists()
    assert unit.restart_policy() == "on-failure"
    assert Path(str(loop["operator"])).read_text() == loop["text"]
    healthy = unit.dropin.read_text()

    # a relaunch that fails: the checkpoint itself again, without the overlay (the MTP draft
    # crashes), is rolled back to the last launch that verified (a1's) and escalated
    bad = Plan(("mtp_ignore_list_gap",), changes=(
        Change("model", "model", str(models / MODEL), "forced failure"),
        Change("flag", "--max-model-len", "4096", "forced failure")))
    executor = UnitExecutor(unit, "a2")
    later = now + timedelta(hours=1)
    _mark(env)
    failed = carry_out(file_recorder(db), _approved("a2", bad, later), bad, executor,
                       lambda launch: _verify(library, env, name, launch), tmp / "state",
                       now=lambda: later)
    assert [t.to_state for t in failed.action.transitions][-4:] == [
        "verify_failed", "rolling_back", "rolled_back", "escalated"]
    assert unit.dropin.read_text() == healthy and not unit.hold.exists()
    assert Path(str(loop["operator"])).read_text() == loop["text"]
    assert unit.current().spec.argv()[2] == str(models / MODEL)  # the operator's, untouched
    back = unit.current(in_force=True).spec
    assert Path(back.argv()[2]).parent == tmp / "state" / "overlays"  # a1's overlay again
    assert wait_healthy(endpoint(back), time.monotonic() + 20)  # and it serves

    with open_store(db) as store:
        history = load_history(store, "vllm")
    assert sorted(a.state for a in history) == ["escalated", "succeeded"]
    third = propose("a3", "vllm", "p3", "p3", "cfg-2", "weights.tensor_size_mismatch", "l3",
                    later + timedelta(hours=2), "test")
    decision = decide(history, later + timedelta(hours=2),
                      RelaunchPolicy({"vllm": TargetPolicy("auto")},
                                     Thresholds(breaker_failures=1)),
                      Request(third, "stable", 0.95))
    assert decision.verdict == "block" and decision.reason == BREAKER_OPEN, decision


# -- the daemon itself: it follows the unit, diagnoses, proposes, decides and relaunches ------

# What a log may hold that must never reach what is launched: lines in vLLM's own format
# carrying shell syntax, paths that climb, a 100 KB token and terminal escapes.
HOSTILE_LINES = [
    "INFO 12-01 10:00:00 [api_server.py:1] vLLM API server version $(touch {pwned})",
    "INFO 12-01 10:00:00 [api_server.py:1] non-default args: {{'model': '../../../etc; rm -rf "
    "{pwned}', 'served_model_name': '`touch {pwned}`'}}",
    "ERROR 12-01 10:00:01 [core.py:1] EngineCore failed to start: --model=$(id) ; rm -rf ~",
    "WARNING 12-01 10:00:01 [config.py:1] \x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J loading "
    "/models/../../root/.ssh",
    "INFO 12-01 10:00:02 [loader.py:1] token " + "A" * 100_000,
]
NVIDIA_SMI = ("#!/bin/sh\n"  # no GPU here: what nvidia-smi prints on a four-B200 host
              "for i in 1 2 3 4; do echo 'NVIDIA B200, 580.65.06, 10.0'; done\n")


def _daemon_config(loop: dict[str, object], policy: str, relaunch: str = "") -> Path:
    tmp = Path(str(loop["tmp"]))
    models = Path(str(loop["models"]))
    env = loop["env"]
    assert isinstance(env, dict)
    config = tmp / "logwatch.toml"
    config.write_text(
        f'[database]\npath = "{tmp / "history.duckdb"}"\n'
        f'[socket]\npath = "{tmp / "control.sock"}"\n'
        f'[relaunch]\nstate_dir = "{tmp / "state"}"\ndropin = "runtime"\n'
        + "".join(f"{k} = {v}\n" for k, v in {
            "start_seconds": 30, "soak_seconds": 15, "approval_seconds": 120,
            **dict(line.split(" = ") for line in relaunch.splitlines())}.items()) +
        f'[[targets]]\nname = "vllm"\nmodel_dir = "{models / MODEL}"\n'
        + (f'[targets.source]\nkind = "file"\npath = "{env["LOOP_LOG"]}"\n'
           if loop["output"] == "file" else
           f'[targets.source]\nkind = "journald"\nuser_unit = "{loop["name"]}"\n') +
        f'[targets.launch]\nunit = "{loop["name"]}"\nuser = true\n'
        f'[targets.relaunch]\npolicy = "{policy}"\n')
    return config


def _start_daemon(loop: dict[str, object], policy: str, relaunch: str = "",
                  *extra: str) -> tuple[subprocess.Popen[str], Path]:
    tmp = Path(str(loop["tmp"]))
    env = loop["env"]
    assert isinstance(env, dict)
    tools = tmp / "gpu-tools"
    tools.mkdir()
    smi = tools / "nvidia-smi"
    smi.write_text(NVIDIA_SMI)
    smi.chmod(0o755)
    config = _daemon_config(loop, policy, relaunch)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "logwatch", "daemon", "--config", str(config), *extra],
        env={**env, "PATH": f"{tools}:{env['PATH']}", "PYTHONDONTWRITEBYTECODE": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sock = tmp / "control.sock"
    try:
        asyncio.run(client.wait_ready(sock, 60, alive=lambda: daemon.poll() is None))
    except (client.DaemonUnavailable, TimeoutError):
        pytest.fail(f"the daemon did not start: {_stop_daemon(daemon)[-4000:]}")
    return daemon, sock


def _stop_daemon(daemon: subprocess.Popen[str]) -> str:
    daemon.terminate()
    out, _ = daemon.communicate(timeout=60)
    return out


async def _actions_until(sock: Path, final: set[str], timeout: float) -> list[ActionEvent]:
    """The action events up to one whose state is in `final`."""
    seen: list[ActionEvent] = []
    async with client.subscribe(sock, ["action"]) as events:
        try:
            await until_state(events, final, seen, timeout)
        except TimeoutError:
            pytest.fail(f"no action reached {sorted(final)} in {timeout:g} s: "
                        f"{[(e.state, e.reason) for e in seen]}")
    return seen


def _metrics(port: int) -> dict[str, float]:
    """The daemon's Prometheus samples, `name{labels}` -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def _rows(sock: Path, query: str) -> list[list[object]]:
    answer = asyncio.run(client.request(sock, "sql", query=query))
    assert answer["ok"], answer
    return [list(r) for r in answer["rows"]]


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["journal"], indirect=True)
def test_the_daemon_relaunches_a_failed_unit_on_its_own(loop: dict[str, object]) -> None:
    """Policy auto: the stand-in fails on the MTP ignore-list gap; the daemon, following the
    unit's output, diagnoses it, plans the overlay, and carries it out through its runtime
    drop-in; the relaunch verifies on what the daemon reads and what the server answers."""
    env, name = loop["env"], str(loop["name"])
    models = Path(str(loop["models"]))
    assert isinstance(env, dict)
    metrics = free_port()
    pwned = Path(str(loop["tmp"])) / "pwned"
    Path(str(loop["hostile"])).write_text(
        "\n".join(line.format(pwned=pwned) for line in HOSTILE_LINES) + "\n")
    daemon, sock = _start_daemon(loop, "auto", "", "--metrics", f"127.0.0.1:{metrics}")
    try:
        _systemctl(env, "start", name)
        try:
            events = asyncio.run(_actions_until(sock, {"succeeded", "escalated"}, 150))
        except BaseException:
            print(_stop_daemon(daemon)[-6000:])
            raise
        events = [e for e in events if e.id == events[-1].id]
        states = [e.state for e in events]
        assert states[-1] == "succeeded", [(e.state, e.reason) for e in events]
        assert states[:2] == ["proposed", "approved"]
        assert {"applying", "restarting", "verifying"} <= set(states)
        unit = SystemdUnit(name, user=True, dropin_root=UNIT_DIR, runtime_root=UNIT_DIR)
        assert unit.dropin.exists() and not unit.hold.exists()
        assert unit.dropin.stat().st_mode & 0o777 == 0o600  # its command line may hold a key
        assert unit.restart_policy() == "on-failure"  # held while it ran, given back after
        assert Path(str(loop["operator"])).read_text() == loop["text"]
        operator = unit.current().spec.argv()
        assert operator[2] == str(models / MODEL)  # the operator's launch, untouched
        launched = exec_start_from_unit(unit.dropin.read_text())
        overlay = Path(str(loop["tmp"])) / "state" / "overlays"
        assert launched is not None and Path(launched[2]).parent == overlay
        # exactly the operator's words, the model swapped for the overlay and its name kept:
        # nothing read from the log is in what was launched
        assert launched == [*operator[:2], launched[2], *operator[3:],
                            "--served-model-name", str(models / MODEL)]
        assert not pwned.exists()
        written = "".join(line for line in unit.dropin.read_text().splitlines(True)
                          if not line.startswith("#")) + "".join(
            p.read_text() for p in Path(launched[2]).glob("*.json") if not p.is_symlink())
        found = [bad for bad in ("$(", "`", "rm -rf", "..", "\x1b", "AAAA") if bad in written]
        assert found == [], written
        rows = _rows(sock, "SELECT a.id, a.state, t.to_state, t.actor, t.reason FROM actions "
                           "a JOIN action_transitions t ON t.action_id = a.id "
                           "ORDER BY a.created, t.seq")
        # the hostile lines may end a launch of their own with an unrecognised fatal error:
        # its action is refused (no signature knows the cause), and the stand-in's launch,
        # failing meanwhile, is proposed once that one is over, and relaunched
        moves: dict[str, list[str]] = {}
        for row in rows:
            moves.setdefault(str(row[0]), []).append(str(row[2]))
        relaunched = str(rows[-1][0])
        assert moves.pop(relaunched)[-1] == "succeeded"
        assert all(m == ["proposed", "rejected"] for m in moves.values()), moves
        assert all("no signature recognised" in str(r[4]) for r in rows
                   if r[0] in moves and r[2] == "rejected")
        assert {r[3] for r in rows} <= {"policy", "executor"}
        # the relaunch is recorded against what it runs (the overlay, its ignore list
        # covering the MTP modules), not the configuration that failed
        ((outcome, body),) = _rows(sock, "SELECT l.outcome, s.body FROM launches l JOIN "
                                         "snapshots s ON s.hash = l.snapshot_hash "
                                         "ORDER BY l.number DESC LIMIT 1")
        ran = json.loads(body) if isinstance(body, str) else body
        assert outcome in ("starting", "serving") and "/state/overlays/" in json.dumps(
            ran["argv"]), (outcome, ran.get("argv"))
        said = subprocess.run([sys.executable, "-m", "logwatch", "status", "--socket",
                               str(sock)], capture_output=True, text=True, check=False).stdout
        assert "latent problems" not in said, said
        samples = _metrics(metrics)
        assert samples['logwatch_action_moves_total{state="succeeded"}'] == 1
        assert samples['logwatch_action_moves_total{state="proposed"}'] == 1 + len(moves)
        assert samples['logwatch_breaker_open{target="vllm"}'] == 0
        assert not [k for k in samples if k.startswith("logwatch_actions_open")]
    finally:
        out = _stop_daemon(daemon)
    assert "relaunch_failed" not in out, out[-4000:]


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["journal"], indirect=True)
def test_the_daemon_asks_then_rolls_back_escalates_and_keeps_the_breaker(
        loop: dict[str, object]) -> None:
    """Policy ask: the action waits for `logwatch approve`; the approved relaunch cannot bind
    its port (held here), fails verification, is rolled back to the operator's launch and
    escalated. The operator's launch fails again: its action is refused (the plan's
    configuration already failed) and the breaker is open until `logwatch reset-breaker`."""
    env, name, port = loop["env"], str(loop["name"]), int(str(loop["port"]))
    assert isinstance(env, dict)
    metrics = free_port()
    daemon, sock = _start_daemon(loop, "ask", "breaker_failures = 1\nbackoff_seconds = 1\n",
                                 "--metrics", f"127.0.0.1:{metrics}")
    seen: list[ActionEvent] = []

    async def scenario() -> dict[str, object]:
        async with client.subscribe(sock, ["action"]) as events:
            def until(states: set[str]) -> Awaitable[ActionEvent]:
                return until_state(events, states, seen)

            await asyncio.to_thread(_systemctl, env, "start", name)
            asked = await until({"awaiting_approval"})
            assert "logwatch approve" in asked.reason
            code, said = await logwatch_cli("status", "--socket", str(sock))
            assert f"action {asked.id} on vllm: awaiting approval: `logwatch approve " \
                   f"{asked.id} --socket {sock}`" in said, said  # as it reaches this daemon
            waiting = await asyncio.to_thread(_metrics, metrics)
            assert waiting['logwatch_actions_open{state="awaiting_approval",target="vllm"}'] == 1
            with socket.socket() as held:  # the relaunch will find its port taken
                held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                held.bind(("127.0.0.1", port))
                held.listen(1)
                code, said = await logwatch_cli("approve", asked.id, "--socket", str(sock),
                                        "--reason", "the overlay looks right")
                assert code == 0 and f"action {asked.id}: approved" in said, said
                approved = await until({"approved"})
                assert approved.actor == "operator:root"
                assert approved.reason == "the overlay looks right"
                ended = await until({"escalated", "succeeded"})
                assert ended.id == asked.id and ended.state == "escalated", seen
            refused = await until({"rejected", "awaiting_approval", "blocked"})
            assert refused.id != asked.id and refused.state == "rejected", seen
            assert "already failed" in refused.reason
            status = await client.Client(sock).status()
            code, said = await logwatch_cli("status", "--socket", str(sock))
            assert "breaker of vllm OPEN: relaunches stop until `logwatch reset-breaker " \
                   f"vllm --socket {sock}`" in said, said
            assert f"action {asked.id} on vllm: escalated (stopped after a rollback: a " \
                   "person must look)" in said, said  # what ended stays in sight
            tripped = await asyncio.to_thread(_metrics, metrics)
            assert tripped['logwatch_breaker_open{target="vllm"}'] == 1
            assert tripped['logwatch_action_moves_total{state="escalated"}'] == 1
            code, said = await logwatch_cli("approve", asked.id, "--socket", str(sock))
            assert code == 1 and "escalated" in said, said
            reset = await logwatch_cli("reset-breaker", "vllm", "--socket", str(sock), "--json")
            again = await client.Client(sock).status()
            return {"status": status, "reset": reset, "again": again}

    try:
        got = asyncio.run(scenario())
        states = [e.state for e in seen if e.id == seen[0].id]
        assert states == ["proposed", "awaiting_approval", "approved", "applying", "restarting",
                          "verifying", "verify_failed", "rolling_back", "rolled_back",
                          "escalated"], [(e.state, e.reason) for e in seen]
        unit = SystemdUnit(name, user=True, dropin_root=UNIT_DIR, runtime_root=UNIT_DIR)
        assert not unit.dropin.exists() and not unit.hold.exists()
        assert Path(str(loop["operator"])).read_text() == loop["text"]
        status, again = got["status"], got["again"]
        assert isinstance(status, dict) and isinstance(again, dict)
        assert status["relaunch"]["breakers"] == {"vllm": True}
        code, said = got["reset"]  # type: ignore[misc]
        assert code == 0 and json.loads(said)["was_open"] is True, said
        assert again["relaunch"]["breakers"] == {"vllm": False}
        rows = _rows(sock, "SELECT kind, target, actor FROM operator_events")
        assert rows == [["breaker_reset", "vllm", "operator:root"]]
    finally:
        out = _stop_daemon(daemon)
    assert "relaunch_failed" not in out, out[-4000:]


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["journal"], indirect=True)
def test_an_unanswered_action_expires_and_a_rejected_one_never_runs(
        loop: dict[str, object]) -> None:
    """Policy ask: nobody answers within approval_seconds, so the action expires; the next
    failure's action is rejected by the operator. Neither touches the unit."""
    env, name = loop["env"], str(loop["name"])
    assert isinstance(env, dict)
    daemon, sock = _start_daemon(loop, "ask", "approval_seconds = 1\n")
    seen: list[ActionEvent] = []

    async def scenario() -> None:
        async with client.subscribe(sock, ["action"]) as events:
            def until(states: set[str]) -> Awaitable[ActionEvent]:
                return until_state(events, states, seen, 60)

            await asyncio.to_thread(_systemctl, env, "start", name)
            expired = await until({"expired"})
            assert expired.actor == "policy" and "no approval within 1 s" in expired.reason
            code, said = await logwatch_cli("approve", expired.id, "--socket", str(sock))
            assert code == 1 and "is expired" in said, said
            await asyncio.to_thread(_systemctl, env, "restart", name)  # fails the same way
            asked = await until({"awaiting_approval"})
            assert asked.id != expired.id
            code, said = await logwatch_cli("reject", asked.id, "--socket", str(sock), "--reason",
                                    "not during the demo")
            assert code == 0 and f"action {asked.id}: rejected" in said, said
            rejected = await until({"rejected"})
            assert (rejected.id, rejected.actor, rejected.reason) == (
                asked.id, "operator:root", "not during the demo")

    try:
        asyncio.run(scenario())
        assert not [e for e in seen if e.state in ("applying", "restarting")]
        unit = SystemdUnit(name, user=True, dropin_root=UNIT_DIR, runtime_root=UNIT_DIR)
        assert not unit.dropin.exists() and not unit.hold.exists()
    finally:
        out = _stop_daemon(daemon)
    assert "relaunch_failed" not in out, out[-4000:]


@pytest.mark.slow
def test_the_demo_through_systemd_and_the_daemon(systemd_user: dict[str, str],
                                                 tmp_path: Path) -> None:
    """`logwatch demo --executor systemd`: the stand-in as a unit of the user's manager,
    relaunched by the real daemon; healthy, and nothing of it is left in the manager."""
    done = subprocess.run(
        [sys.executable, "-m", "logwatch", "demo", "--executor", "systemd", "--json",
         "--keep", str(tmp_path / "keep")], capture_output=True, text=True, timeout=180,
        env={**systemd_user, "PYTHONDONTWRITEBYTECODE": "1"}, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["healthy"] and summary["executor"] == "systemd"
    assert [a["state"] for a in summary["actions"]] == ["succeeded"]
    assert [row[1] for row in summary["history"]] == [
        "proposed", "approved", "applying", "restarting", "verifying", "succeeded"]
    said = [line["text"] for line in summary["timeline"]]
    assert any("root cause weights.tensor_size_mismatch" in t for t in said), said
    assert not [p for p in UNIT_DIR.glob("logwatch-demo-*")]  # unit and drop-ins removed

    def shown(text: str) -> str:  # ids, hashes, the unit's pid and the seconds aside
        text = re.sub(r"\[\s*[\d.]+ s\] ", "", text)
        return re.sub(r"\b[0-9a-f]{8}\b", "H", re.sub(r"logwatch-demo-\d+", "UNIT", text))
    readme = (ROOT / "README.md").read_text().split("--executor systemd` runs the loop")[1]
    block = readme.split("```text\n")[1].split("```")[0]
    printed = {shown(t) for t in said}
    for line in block.splitlines():
        if "..." not in line:
            assert shown(line) in printed, line
