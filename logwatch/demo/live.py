"""`logwatch demo` in a terminal: the loop run live under `logwatch run --relaunch auto`
with its control socket, and the TUI on that socket. The operator watches the launch fail,
the diagnosis, the plan being applied and the target turning healthy; `q` ends the TUI and
the run. The same workspace as the printed demo (scenario.workspace)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from logwatch.demo.scenario import SPEC, workspace
from logwatch.demo.standin_outcome import GPUS
from logwatch.sources.dies_with_parent import wrapped


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_run(ws: dict[str, Path], gpu: str, policy: str = "auto"
              ) -> tuple[subprocess.Popen[bytes], Path]:
    """`logwatch run --relaunch POLICY` of the stand-in in the workspace; its socket."""
    root = ws["root"]
    config = root / "logwatch.toml"
    # a TOML basic string is a JSON string: any directory name stays one value
    config.write_text(f"[relaunch]\nstate_dir = {json.dumps(str(ws['state']))}\n"
                      "start_seconds = 30\nsoak_seconds = 5\n")
    sock = root / "control.sock"
    env = {**os.environ, "LOGWATCH_STANDIN_GPU": gpu, "LOGWATCH_STANDIN_GPU_COUNT": "4",
           "LOGWATCH_STANDIN_PACE": "0.15", "VLLM_LOG_STATS_INTERVAL": "1"}
    capability = f"{GPUS[gpu].capability / 10:.1f}"
    log = (root / "run.log").open("wb")
    run = subprocess.Popen(wrapped(  # the terminal closed on the demo: the run ends too
        [sys.executable, "-m", "logwatch", "run", "--relaunch", policy, "--quiet",
         "--config", str(config), "--db", str(ws["db"]), "--socket", str(sock),
         "--gpu-capability", capability, "--target", "demo", "--",
         str(ws["vllm"]), "serve", str(ws["model"]), "-tp", "4", "--speculative-config",
         SPEC, "--port", str(_free_port())], env, signal.SIGTERM),
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    return run, sock


def run_live(root: Path, gpu: str, policy: str = "auto") -> tuple[bool, dict[str, Any]]:
    """The live loop with the TUI; (healthy, a summary) once the operator quits."""
    import asyncio

    from logwatch.daemon.client import DaemonUnavailable, wait_ready
    from logwatch.tui.app import LogwatchApp

    ws = workspace(root)
    run, sock = start_run(ws, gpu, policy)
    try:
        with contextlib.suppress(DaemonUnavailable, TimeoutError):  # the TUI says so
            asyncio.run(wait_ready(sock, 30, alive=lambda: run.poll() is None))
        LogwatchApp(sock, ws["db"]).run()
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
            try:
                run.wait(30)
            except subprocess.TimeoutExpired:
                run.kill()
                run.wait()
    from logwatch.store.operator_sql import read_only_query

    states = [r[0] for r in read_only_query(ws["db"], "SELECT state FROM actions").rows] \
        if ws["db"].exists() else []
    return "succeeded" in states, {"workspace": str(root), "actions": states,
                                   "log": str(root / "run.log")}
