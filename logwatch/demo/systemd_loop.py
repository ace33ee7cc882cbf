"""`logwatch demo --executor systemd`: the same loop as the default demo, but the way it runs on
a GPU host: the vLLM stand-in is a unit of the user's own `systemd --user` manager, and the real
`logwatch daemon` follows the unit's output, diagnoses the failure, plans, decides (policy
auto) and relaunches it through its drop-in, verifying the relaunch before it says healthy.
The demo only watches the daemon's events on its control socket and asks its history.

The unit and its drop-ins live under $XDG_RUNTIME_DIR (they end with the session), and are
removed at the end. A simulated GPU needs a simulated `nvidia-smi`: one in the workspace says
what the stand-in simulates, on the daemon's PATH only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from logwatch.core.remedy.dropin import exec_line
from logwatch.daemon import client
from logwatch.daemon.protocol import ActionEvent, DiagnosisEvent, LaunchEvent
from logwatch.demo.standin_outcome import GPUS
from logwatch.host.capture import run_systemctl
from logwatch.relaunch.systemd import runtime_dropin_root

DEADLINE_S = 90.0  # the whole loop, from the unit's start to a verified relaunch
FINAL = {"succeeded", "escalated", "rolled_back", "rollback_failed", "expired", "rejected"}
HISTORY_SQL = ("SELECT action_id, to_state, actor FROM action_transitions "
               "ORDER BY time, seq")


class SystemdUnavailable(Exception):
    """No `systemd --user` manager answers here; the message says what was tried."""


def user_manager() -> None:
    """SystemdUnavailable unless `systemctl --user` reaches a manager."""
    if shutil.which("systemctl") is None:
        raise SystemdUnavailable("systemctl is not installed")
    try:
        run_systemctl(["show-environment"], user=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SystemdUnavailable(f"no systemd --user manager answers ({str(exc)[:300]})") \
            from exc


def _cleaned(*args: str) -> None:
    """A clean-up step: what it cannot do is left (the unit is gone with the session)."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        run_systemctl(list(args), user=True)


def _unit_text(ws: dict[str, Path], gpu: str, argv: list[str]) -> str:
    return ("[Unit]\nDescription=vLLM stand-in for logwatch demo\n[Service]\n"
            f"{exec_line(argv)}\n"
            f"Environment=LOGWATCH_STANDIN_GPU={gpu} LOGWATCH_STANDIN_GPU_COUNT=4 "
            "LOGWATCH_STANDIN_PACE=0.05 VLLM_LOG_STATS_INTERVAL=1 PYTHONUNBUFFERED=1\n"
            f"StandardOutput=append:{ws['logs'] / 'vllm.log'}\nStandardError=inherit\n"
            "Restart=on-failure\nRestartSec=30\n")


def _config(ws: dict[str, Path], unit: str) -> Path:
    path = ws["root"] / "logwatch.toml"
    path.write_text(
        f'[database]\npath = "{ws["db"]}"\n[socket]\npath = "{ws["root"] / "control.sock"}"\n'
        f'[relaunch]\nstate_dir = "{ws["state"]}"\ndropin = "runtime"\n'
        "start_seconds = 30\nsoak_seconds = 15\n"
        f'[[targets]]\nname = "demo"\nmodel_dir = "{ws["model"]}"\n'
        f'[targets.source]\nkind = "file"\npath = "{ws["logs"] / "vllm.log"}"\n'
        f'[targets.launch]\nunit = "{unit}"\nuser = true\n'
        '[targets.relaunch]\npolicy = "auto"\n')
    return path


def _nvidia_smi(ws: dict[str, Path], gpu: str) -> Path:
    """What nvidia-smi prints on a host of four of the simulated GPU."""
    tools = ws["root"] / "gpu-tools"
    tools.mkdir(parents=True, exist_ok=True)
    simulated = GPUS[gpu]
    row = f"{simulated.name}, 580.65.06, {simulated.capability / 10:.1f}"
    smi = tools / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + f"echo '{row}'\n" * 4)
    smi.chmod(0o755)
    return tools


def systemd_loop(ws: dict[str, Path], gpu: str, timeline: Any,
                 summary: dict[str, Any]) -> bool:
    """The loop through the user's manager and the daemon; whether it ended healthy."""
    user_manager()
    ws["logs"].mkdir(parents=True, exist_ok=True)
    unit = f"logwatch-demo-{os.getpid()}.service"
    units = runtime_dropin_root(user=True)
    argv = [str(ws["vllm"]), "serve", str(ws["model"]), "-tp", "4", "--speculative-config",
            '{"method": "mtp", "num_speculative_tokens": 1}', "--port", str(_free_port())]
    units.mkdir(parents=True, exist_ok=True)
    tools = _nvidia_smi(ws, gpu)
    sock = ws["root"] / "control.sock"
    daemon: subprocess.Popen[bytes] | None = None
    try:
        (units / unit).write_text(_unit_text(ws, gpu, argv))
        run_systemctl(["daemon-reload"], user=True)
        daemon = subprocess.Popen(
            [sys.executable, "-m", "logwatch", "daemon", "--config", str(_config(ws, unit))],
            env={**os.environ, "PATH": f"{tools}:{os.environ.get('PATH', '')}"},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        running = daemon
        asyncio.run(client.wait_ready(sock, 60, alive=lambda: running.poll() is None))
        timeline.say(f"logwatch daemon follows {unit} (policy auto, drop-ins under "
                     f"{units})")
        timeline.say(f"{unit} starts on a simulated {GPUS[gpu].name}: "
                     f"{shlex.join(argv[1:])}")
        healthy = asyncio.run(_watch(sock, unit, timeline, summary))
        answer = asyncio.run(client.request(sock, "sql", query=HISTORY_SQL))
        if answer.get("ok"):
            rows = answer["rows"]
            summary["history"] = [list(map(str, row)) for row in rows]
            timeline.say("the history, asked with SQL through the daemon (" + HISTORY_SQL
                         + "):\n" + "\n".join("  " + " | ".join(map(str, r)) for r in rows))
        return healthy
    except (OSError, TimeoutError, subprocess.TimeoutExpired) as exc:  # the daemon, systemctl
        err = daemon.stderr.read().decode(errors="replace")[-2000:] \
            if daemon is not None and daemon.poll() is not None and daemon.stderr else ""
        timeline.say(f"the loop stopped: {exc} {err}")
        return False
    finally:
        if daemon is not None:
            daemon.terminate()
            try:
                daemon.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.communicate()
        _cleaned("stop", unit)
        shutil.rmtree(units / f"{unit}.d", ignore_errors=True)
        (units / unit).unlink(missing_ok=True)
        _cleaned("daemon-reload")
        _cleaned("reset-failed", unit)


async def _watch(sock: Path, unit: str, timeline: Any, summary: dict[str, Any]) -> bool:
    """The daemon's events, told as they come, until the action ends."""
    async def follow() -> bool:
        async with client.subscribe(sock, ["launch", "diagnosis", "action"]) as events:
            run_systemctl(["start", unit], user=True)
            async for event in events:
                if isinstance(event, LaunchEvent) and event.outcome == "failed":
                    timeline.say(f"launch {event.id[:8]} failed: root cause "
                                 f"{event.root_cause or 'not recognised'}")
                elif isinstance(event, DiagnosisEvent) and event.incident is not None:
                    timeline.say(f"diagnosis: {event.title}")
                elif isinstance(event, ActionEvent):
                    timeline.say(f"action {event.id}: {event.state.replace('_', ' ')} by "
                                 f"{event.actor} ({event.reason})")
                    summary["actions"] = [a for a in summary["actions"]
                                          if a["id"] != event.id] + [
                        {"id": event.id, "state": event.state}]
                    if event.state in FINAL:
                        return event.state == "succeeded"
            return False
    try:
        return await asyncio.wait_for(follow(), DEADLINE_S)
    except TimeoutError:
        timeline.say(f"no action ended within {DEADLINE_S:g} s")
        return False


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
