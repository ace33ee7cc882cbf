"""The real-vLLM tier's two loops beyond one `logwatch run` per case.

relaunch_loop: `logwatch run --relaunch auto` on a checkpoint whose BF16 MTP layers its ignore
list does not cover (the sample model of the demo, on a stated compute capability 10.0). The
real vLLM 0.32.0 cannot serve that architecture on a CPU, so the launch fails; its plan (an
overlay whose ignore list covers the MTP layers) is applied through the run's child executor,
the next real `vllm serve` starts on the overlay, fails verification, is rolled back and the
action escalated. The relaunch's command line is then put to the release's own parser. The
guardrail on the diagnosis's confidence is lowered for it (`[relaunch] min_confidence`): the
root cause here, an architecture this build lacks, is a 0.5 guess, which rightly starts
nothing by default.

daemon_loop: `logwatch daemon --file` following a log file that two real `vllm serve` runs
append to, as a unit's `StandardOutput=append:` does: a healthy start stopped with Ctrl-C,
then a start that fails on a weight of the wrong shape.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from logwatch.host.vllm_parser import release_parser
from tools.real_vllm.cases import BASE_ARGS
from tools.real_vllm.common import (
    LOGWATCH,
    RELEASE,
    ROOT,
    Outcome,
    free_port,
    history_rows,
    wait_healthy,
)

MTP_MODEL = ROOT / "samples" / "models" / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered"
SPEC = '{"method": "mtp", "num_speculative_tokens": 1}'


def parsed_by_release(venv: Path, argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """The release's own parser on `argv` (from `serve` on) and its known variables."""
    verdict = release_parser(venv / "bin" / "python", argv, env)
    return {"accepted": bool(verdict.accepted), "error": verdict.error,
            "unknown_env": list(verdict.unknown_env)}


def relaunch_loop(venv: Path, work: Path) -> Outcome:
    models = work / "relaunch-models"
    shutil.rmtree(models, ignore_errors=True)
    shutil.copytree(MTP_MODEL, models / MTP_MODEL.name)
    state = work / "relaunch-state"
    shutil.rmtree(state, ignore_errors=True)
    config = work / "relaunch.toml"
    config.write_text(f'[relaunch]\nstate_dir = "{state}"\nmin_confidence = 0.4\n'
                      "start_seconds = 180\n")
    db = work / "relaunch.duckdb"
    db.unlink(missing_ok=True)
    vllm = [str(venv / "bin" / "vllm"), "serve", str(models / MTP_MODEL.name), *BASE_ARGS,
            "--port", str(free_port()), "--speculative-config", SPEC]
    argv = [str(LOGWATCH), "--no-pager", "run", "--db", str(db), "--target", "relaunch",
            "--config", str(config), "--relaunch", "auto", "--gpu-capability", "10.0",
            "--stop-seconds", "20", "--", *vllm]
    started = time.monotonic()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "NO_COLOR": "1"}
    with open(work / "relaunch.log", "wb") as out:
        try:
            code: int | None = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT,
                                              env=env, stdin=subprocess.DEVNULL,
                                              timeout=600, check=False).returncode
        except subprocess.TimeoutExpired:
            code = None
    seconds = time.monotonic() - started
    expected = ("2 launches (the relaunch on the overlay); the release's parser accepts its "
                "command line; rolled back, escalated; exit 1")
    if not db.exists():
        return Outcome("relaunch", "no history written", expected, False, seconds, code)
    launches = history_rows(db, "SELECT l.outcome, s.body FROM launches l LEFT JOIN snapshots s "
                         "ON s.hash = l.snapshot_hash ORDER BY l.seq")
    moves = [r[0] for r in history_rows(db, "SELECT to_state FROM action_transitions "
                                     "ORDER BY time, seq")]
    said = f"{len(launches)} launches ({', '.join(str(r[0]) for r in launches)})"
    said += f"; action: {' > '.join(moves) or 'none'}"
    ok = len(launches) == 2 and "restarting" in moves and code == 1
    if len(launches) == 2 and launches[1][1]:
        body = json.loads(launches[1][1])
        relaunched = body["argv"]
        on_overlay = str(state) in relaunched[2]
        verdict = parsed_by_release(venv, relaunched[1:], body.get("env") or {})
        said += (f"; relaunch on {'the overlay' if on_overlay else relaunched[2]}; "
                 f"vLLM {RELEASE}'s parser: "
                 + ("accepts it" if verdict.get("accepted") else
                    f"refuses it ({verdict.get('error')})"))
        if verdict.get("unknown_env"):
            said += f"; unknown variables {verdict['unknown_env']}"
        ok = ok and on_overlay and bool(verdict.get("accepted")) \
            and not verdict.get("unknown_env")
    else:
        ok = False
    return Outcome("relaunch", said + f"; exit {code}", expected, ok, seconds, code)


def _serve_into(log: Path, venv: Path, model: Path, extra: tuple[str, ...],
                serve: bool) -> int | None:
    """One real `vllm serve` appending to `log`; with `serve`, stopped with Ctrl-C once it
    answers /health. Its exit status (None: it had to be killed)."""
    port = free_port()
    argv = [str(venv / "bin" / "vllm"), "serve", str(model), *BASE_ARGS, "--port", str(port),
            *extra]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "NO_COLOR": "1"}
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        if serve:
            wait_healthy(port, lambda: proc.poll() is None, 240)
            os.killpg(proc.pid, signal.SIGINT)
        try:
            return proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None


def daemon_loop(venv: Path, models: Path, work: Path) -> Outcome:
    log = work / "daemon-vllm.log"
    log.unlink(missing_ok=True)
    log.touch()
    db = work / "daemon.duckdb"
    db.unlink(missing_ok=True)
    started = time.monotonic()
    daemon = subprocess.Popen(
        [str(LOGWATCH), "daemon", "--file", str(log), "--db", str(db), "--no-socket",
         "--until-idle", "20", "--log-format", "text"],
        stdout=subprocess.DEVNULL, stderr=open(work / "daemon.err", "wb"),  # noqa: SIM115
        stdin=subprocess.DEVNULL)
    first = _serve_into(log, venv, models / "healthy", ("--enforce-eager",), serve=True)
    second = _serve_into(log, venv, models / "wrong-shape", (), serve=False)
    try:
        code: int | None = daemon.wait(timeout=180)
    except subprocess.TimeoutExpired:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=30)
    expected = "stopped, then failed: weight_shape_mismatch"
    seconds = time.monotonic() - started
    if not db.exists():
        return Outcome("daemon-file", "no history written", expected, False, seconds, code)
    rows = history_rows(db, "SELECT l.outcome, i.category FROM launches l LEFT JOIN incidents i "
                     "ON i.id = l.root_cause ORDER BY l.seq")
    said = ", then ".join(o if o != "failed" else f"failed: {c}" for o, c in rows)
    ok = [tuple(r) for r in rows] == [("stopped", None), ("failed", "weight_shape_mismatch")]
    return Outcome("daemon-file", said, expected, ok, seconds, code,
                   f"vLLM exits {first}, {second}")


HARNESS = ROOT.parent / "shared" / "tools" / "systemd-user-harness.sh"
UNIT = "vllm-tier.service"


def _systemctl(env: dict[str, str], *words: str) -> int:
    return subprocess.run(["systemctl", "--user", *words], env=env, capture_output=True,
                          timeout=120, check=False).returncode


def _unit(env: dict[str, str], venv: Path, model: Path, port: int,
          extra: tuple[str, ...]) -> None:
    argv = " ".join([str(venv / "bin" / "vllm"), "serve", str(model), *BASE_ARGS,
                     "--port", str(port), *extra])
    units = Path(env["XDG_RUNTIME_DIR"]) / "systemd" / "user"
    units.mkdir(parents=True, exist_ok=True)
    (units / UNIT).write_text(
        "[Unit]\nDescription=a real vLLM for the logwatch tier\n[Service]\n"
        f"ExecStart={argv}\nEnvironment=VLLM_CPU_KVCACHE_SPACE=1 NO_COLOR=1\n"
        "KillSignal=SIGINT\nTimeoutStopSec=60\n")
    _systemctl(env, "daemon-reload")


def systemd_loop(venv: Path, models: Path, work: Path) -> Outcome:
    """A user unit running the real vLLM, followed through journald by `logwatch daemon
    --journal-user-unit`: a healthy start stopped with `systemctl --user stop` (SIGINT, as
    KillSignal says), then the unit started on a checkpoint with a weight of the wrong shape.
    Skipped (said, counted as not run) where the harness cannot run: not root, no
    ../shared/tools, no cgroup2."""
    expected = "stopped, then failed: weight_shape_mismatch"
    started = time.monotonic()
    if os.geteuid() != 0 or not HARNESS.exists():
        return Outcome("systemd-user", "not run: the systemd --user harness needs root and "
                       "../shared/tools", expected, True, 0.0, None, "skipped")
    with open(Path(tempfile.gettempdir()) / "systemd-user-harness.lock", "a") as lock:
        # one /run/user/0 on the machine: the test suite's harness takes the same lock
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _systemd_loop(venv, models, work, expected, started)


def _systemd_loop(venv: Path, models: Path, work: Path, expected: str,
                  started: float) -> Outcome:
    state = work / "harness"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RUNTIME_DIRECTORY", "STATE_DIRECTORY")}
    env.update(XDG_RUNTIME_DIR="/run/user/0", STATE=str(state))
    up = subprocess.run(["bash", str(HARNESS), "start"], capture_output=True, text=True,
                        env=env, timeout=60, check=False)
    if up.stdout.strip().splitlines()[-1:] != ["running"]:
        subprocess.run(["bash", str(HARNESS), "stop"], env=env, capture_output=True,
                       timeout=60, check=False)
        return Outcome("systemd-user", f"not run: the harness did not start "
                       f"({up.stdout.strip()[-80:]})", expected, True, 0.0, None, "skipped")
    db = work / "systemd.duckdb"
    db.unlink(missing_ok=True)
    try:
        daemon = subprocess.Popen(
            [str(LOGWATCH), "daemon", "--journal-user-unit", UNIT, "--db", str(db),
             "--no-socket", "--until-idle", "25", "--log-format", "text"], env=env,
            stdout=subprocess.DEVNULL, stderr=open(work / "systemd-daemon.err", "wb"),  # noqa: SIM115
            stdin=subprocess.DEVNULL)
        port = free_port()
        _unit(env, venv, models / "healthy", port, ("--enforce-eager",))
        _systemctl(env, "start", UNIT)
        wait_healthy(port, lambda: True, 240)
        _systemctl(env, "stop", UNIT)
        _unit(env, venv, models / "wrong-shape", free_port(), ())
        _systemctl(env, "start", UNIT)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and _systemctl(env, "is-active", "--quiet",
                                                         UNIT) == 0:
            time.sleep(1)
        try:
            code: int | None = daemon.wait(timeout=180)
        except subprocess.TimeoutExpired:
            daemon.send_signal(signal.SIGTERM)
            code = daemon.wait(timeout=30)
    finally:
        _systemctl(env, "stop", UNIT)
        subprocess.run(["bash", str(HARNESS), "stop"], env=env, capture_output=True,
                       timeout=60, check=False)
    seconds = time.monotonic() - started
    if not db.exists():
        return Outcome("systemd-user", "no history written", expected, False, seconds, code)
    rows = history_rows(db, "SELECT l.outcome, i.category, l.exit_code FROM launches l LEFT JOIN "
                     "incidents i ON i.id = l.root_cause ORDER BY l.seq")
    said = ", then ".join((o if o != "failed" else f"failed: {c}")
                          + (f" (exit {x})" if x is not None else "") for o, c, x in rows)
    ok = [(o, c) for o, c, _ in rows] == [("stopped", None),
                                           ("failed", "weight_shape_mismatch")]
    return Outcome("systemd-user", said, expected, ok, seconds, code)
