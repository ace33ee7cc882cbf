"""`logwatch run --relaunch`: the loop through the child logwatch supervises. The vLLM stand-in
fails on the MTP ignore-list gap; the corrected launch is started as the run's next child from
the child's real argv and environment (a token the history masks reaches it intact), verified,
and the run goes on with it; a relaunch that cannot verify is stopped and escalated, and the
run ends with the failure's status."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from logwatch.daemon import client
from logwatch.daemon.protocol import ActionEvent
from logwatch.demo.scenario import standin_entry
from tests.conftest import ROOT, free_port, run_children
from tests.live_actions import logwatch_cli, until_state
from tests.test_plan import MODELS, SPEC, W4A4_UNCOVERED

TOKEN = "hf_" + "Q7xv2LrT9pWm4ZkB8sNc1YdF6gHj3KaE0u"  # a Hugging Face token's shape
API_KEY = "sk-live-" + "4f8Jq2Lm9Xz7Rb1Tc6Vn3Hd5"  # vLLM's own --api-key


def _start(tmp: Path, mode: str, port: int, *extra: str, stats_interval: str = "1"
           ) -> tuple[subprocess.Popen[bytes], Path]:
    shutil.copytree(MODELS / W4A4_UNCOVERED, tmp / "model")
    vllm = standin_entry(tmp / "bin")
    (tmp / "logwatch.toml").write_text(
        f'[relaunch]\nstate_dir = "{tmp / "state"}"\nstart_seconds = 30\nsoak_seconds = 10\n')
    sock = tmp / "control.sock"
    env = {**os.environ, "LOGWATCH_STANDIN_GPU": "b200", "LOGWATCH_STANDIN_GPU_COUNT": "4",
           "LOGWATCH_STANDIN_PACE": "0", "VLLM_LOG_STATS_INTERVAL": stats_interval,
           "HF_TOKEN": TOKEN,
           "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.Popen(
        [sys.executable, "-m", "logwatch", "run", "--relaunch", mode, "--quiet", *extra,
         "--config", str(tmp / "logwatch.toml"), "--db", str(tmp / "h.duckdb"),
         "--socket", str(sock), "--gpu-capability", "10.0", "--",
         str(vllm), "serve", str(tmp / "model"), "-tp", "4", "--speculative-config", SPEC,
         "--port", str(port), "--api-key", API_KEY],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        asyncio.run(client.wait_ready(sock, 60, alive=lambda: run.poll() is None))
    except client.DaemonUnavailable:
        pass  # it ended already (a dry run can): the caller reads what it left
    except TimeoutError:
        run.kill()
        pytest.fail(f"logwatch run did not start: {run.communicate()[0].decode()[-4000:]}")
    return run, sock


def _ended(run: subprocess.Popen[bytes], timeout: float = 120) -> str:
    """Its output once it ends by itself; killed (and the test failed) when it does not."""
    try:
        return run.communicate(timeout=timeout)[0].decode()
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()


def _history(tmp: Path, *queries: str) -> list[list[Any]]:
    """Each query's rows from the run's history (read once it has ended)."""
    con = duckdb.connect(str(tmp / "h.duckdb"), read_only=True)
    try:
        return [con.execute(query).fetchall() for query in queries]
    finally:
        con.close()


def _children(run: subprocess.Popen[bytes]) -> list[int]:
    return run_children(run.pid)


@pytest.mark.slow
def test_an_approved_relaunch_becomes_the_runs_child(tmp_path: Path) -> None:
    port = free_port()
    run, sock = _start(tmp_path, "ask", port)
    seen: list[ActionEvent] = []

    async def scenario() -> None:
        async with client.subscribe(sock, ["action"]) as events:
            # subscribed: from now on no move is missed; one made before is in the status
            status = await client.Client(sock).status()
            waiting = [a["id"] for a in status.get("relaunch", {}).get("actions", [])
                       if a["state"] == "awaiting_approval"]
            asked_id = waiting[0] if waiting else (
                await until_state(events, {"awaiting_approval"}, seen)).id
            code, said = await logwatch_cli("approve", asked_id, "--socket", str(sock))
            assert code == 0, said
            await until_state(events, {"succeeded", "escalated"}, seen)

    try:
        asyncio.run(scenario())
        assert [e.state for e in seen][-1] == "succeeded", [(e.state, e.reason) for e in seen]
        assert [e.actor for e in seen if e.state == "approved"] == ["operator:root"]
        (child,) = _children(run)  # the relaunch, supervised by the run
        argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        assert Path(argv[3].decode()).parent == tmp_path / "state" / "overlays"
        environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        assert f"HF_TOKEN={TOKEN}".encode() in environ  # the real one, not the masked one
        assert API_KEY.encode() in argv
    finally:
        run.send_signal(signal.SIGINT)  # the operator's Ctrl-C ends the run and its child
        out = _ended(run, 60)
    assert run.returncode == 0, out[-4000:]
    launches, states, snapshots = _history(
        tmp_path, "SELECT l.outcome, s.body FROM launches l JOIN snapshots s "
                  "ON s.hash = l.snapshot_hash ORDER BY l.started",
        "SELECT state FROM actions", "SELECT * FROM snapshots")
    everything = json.dumps(snapshots, default=str)
    assert [o for o, _ in launches] == ["failed", "stopped"], launches
    relaunched = json.loads(launches[1][1]) if isinstance(launches[1][1], str) else launches[1][1]
    assert "/state/overlays/" in json.dumps(relaunched["argv"])  # its own snapshot
    assert states == [("succeeded",)]
    assert TOKEN not in everything and TOKEN[:12] not in out
    assert API_KEY not in everything and API_KEY[:12] not in out  # named, never shown


@pytest.mark.slow
def test_a_relaunch_that_cannot_verify_is_stopped_and_the_run_ends(tmp_path: Path) -> None:
    """The port is held from the start: the first launch fails on the MTP gap before it
    binds, the relaunch on the port. Nothing verified ever ran, so nothing is put back and
    the run ends with the relaunch's status once the action is escalated."""
    port = free_port()
    with socket.socket() as held:
        held.bind(("127.0.0.1", port))
        held.listen(1)
        run, _ = _start(tmp_path, "auto", port)
        out = _ended(run)
    transitions, outcomes = _history(
        tmp_path, "SELECT to_state FROM action_transitions ORDER BY time, seq",
        "SELECT outcome, root_title FROM launch_history ORDER BY seq")
    moves = [r[0] for r in transitions]
    assert moves == ["proposed", "approved", "applying", "restarting", "verifying",
                     "verify_failed", "rolling_back", "rolled_back", "escalated"], out[-4000:]
    assert run.returncode == 1, out[-4000:]  # the relaunch's status: nothing healthy to run
    assert [o for o, _ in outcomes] == ["failed", "failed"], outcomes
    assert "port" in str(outcomes[1][1]).lower(), outcomes
    assert list((tmp_path / "state" / "overlays").iterdir()) == []  # its overlay went with it


def _until_ended(sock: Path) -> list[str]:
    """The states the run's first action went through, until it succeeded or escalated."""
    seen: list[ActionEvent] = []

    async def scenario() -> list[str]:
        async with client.subscribe(sock, ["action"]) as events:
            status = await client.Client(sock).status()
            ended = [a["state"] for a in status.get("relaunch", {}).get("ended", [])]
            if ended:
                return ended
            await until_state(events, {"succeeded", "escalated"}, seen)
            return [e.state for e in seen]

    return asyncio.run(scenario())


@pytest.mark.slow
def test_a_relaunch_on_port_0_is_verified_where_vllm_said_it_serves(tmp_path: Path) -> None:
    """`--port 0`: vLLM binds a free port and names it in `Starting vLLM server on
    http://HOST:PORT`; verification asks that port, not 8000 (it used to fail there, roll the
    relaunch back and let the run exit 0)."""
    run, sock = _start(tmp_path, "auto", 0)
    try:
        states = _until_ended(sock)
    finally:
        run.send_signal(signal.SIGINT)  # the operator stops a launch that verified
        out = _ended(run, 60)
    assert states[-1] == "succeeded", out[-4000:]
    assert run.returncode == 0, out[-4000:]
    (moves,) = _history(tmp_path, "SELECT to_state FROM action_transitions "
                                  "ORDER BY time, seq")
    assert moves[-1] == ("succeeded",), moves


@pytest.mark.slow
def test_a_relaunch_that_fails_verification_ends_the_run_failed(tmp_path: Path) -> None:
    """The relaunch serves but never logs a draft-acceptance reading (stats every 600 s):
    verification fails, the rollback stops it cleanly (exit 0), and nothing verified is left
    to run: the run's status is the failure's, not the stopped relaunch's 0."""
    run, _ = _start(tmp_path, "auto", free_port(), stats_interval="600")
    out = _ended(run)
    (moves,) = _history(tmp_path, "SELECT to_state FROM action_transitions "
                                  "ORDER BY time, seq")
    assert [m[0] for m in moves][-4:] == ["verify_failed", "rolling_back", "rolled_back",
                                          "escalated"], moves
    assert run.returncode == 1, out[-4000:]  # the first launch's failure
    assert "the relaunch did not verify and was stopped" in out, out[-4000:]


@pytest.mark.slow
def test_a_dry_run_decides_and_changes_nothing(tmp_path: Path) -> None:
    """`--dry-run`: the action is proposed, decided and approved, then dropped; no child is
    started again, no overlay is made, and the run ends with the failure's status."""
    run, _ = _start(tmp_path, "auto", free_port(), "--dry-run")
    out = _ended(run)
    assert run.returncode == 1, out[-4000:]
    moves, (launches,) = _history(
        tmp_path, "SELECT to_state, reason FROM action_transitions ORDER BY time, seq",
        "SELECT count(*) FROM launches")
    assert [m[0] for m in moves] == ["proposed", "approved", "rejected"], moves
    assert moves[-1][1].startswith("dry run: approved, not applied (`logwatch plan --launch ")
    assert launches == (1,) and not (tmp_path / "state").exists()
    assert out.count("logwatch run: started pid") == 1, out[-4000:]
    # each move in words on stderr, among vLLM's lines; no JSON unless asked for
    said = [line for line in out.splitlines() if line.startswith("logwatch run: relaunch ")]
    assert said[0].startswith("logwatch run: relaunch vllm-1-") and " proposed for vllm: " \
        in said[0], said
    assert said[-1].startswith("logwatch run: relaunch refused: dry run: approved, not "
                               "applied (`logwatch plan --launch "), said
    assert len(said) == 3, said
    assert not [line for line in out.splitlines() if line.lstrip().startswith("{")], out


def test_ask_with_a_socket_that_cannot_serve_refuses_to_start(tmp_path: Path) -> None:
    """Approvals reach `--relaunch ask` only through its socket: one refused (a directory
    anyone may write) stops the run before vLLM starts, instead of an hour's wait."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    done = subprocess.run(
        [sys.executable, "-m", "logwatch", "run", "--relaunch", "ask", "--socket",
         str(shared / "x.sock"), "--db", str(tmp_path / "h.duckdb"), "--",
         str(standin_entry(tmp_path / "bin")), "serve", str(tmp_path / "model")],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "not starting: --relaunch ask waits for `logwatch approve`" in done.stderr
    assert "started pid" not in done.stderr
