"""`[[notify]]` against real receivers: a daemon follows a log where vLLM fails twice; a
webhook on a loopback HTTP server and a hook script (run without a shell) each hear one
message per new fatal problem and one for the crash loop, however many launches repeat it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

from logwatch.core.settings.config import parse_config
from logwatch.daemon.client import wait_ready
from tests.conftest import ROOT, SAMPLES


class Receiver(BaseHTTPRequestHandler):
    got: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:  # (the http.server API's name)
        length = int(self.headers["Content-Length"])
        Receiver.got.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


HOOK = """#!/bin/sh
# what a hook is given: the event as LOGWATCH_* variables, and its JSON on stdin
# (one write per call: hooks run at once, and appends of one write do not interleave)
line="$(printf '%s\\t%s\\t' "$LOGWATCH_EVENT" "$LOGWATCH_SIGNATURE")$(cat)"
printf '%s\\n' "$line" >> "$0.calls"
"""


def receivers(tmp: Path) -> tuple[HTTPServer, str]:
    """A webhook receiver on loopback (what it got: Receiver.got) and a hook script (its
    calls: `hook.sh.calls` in `tmp`), and the [[notify]] entries naming both for fatal
    incidents and a crash loop of 2 launches."""
    Receiver.got = []
    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook = tmp / "hook.sh"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    return server, (
        "[[notify]]\nkind = \"webhook\"\n"
        f"url = \"http://127.0.0.1:{server.server_port}/logwatch\"\n"
        "on = [\"fatal_incident\", \"crash_loop\"]\ncrash_loop_launches = 2\n\n"
        f"[[notify]]\nkind = \"hook\"\nargv = [\"{hook}\"]\n"
        "on = [\"fatal_incident\", \"crash_loop\"]\ncrash_loop_launches = 2\n")


def test_a_webhook_and_a_hook_hear_each_fatal_problem_and_the_crash_loop_once(
        tmp_path: Path) -> None:
    server, notify = receivers(tmp_path)
    config = tmp_path / "lw.toml"
    config.write_text(notify)
    assert parse_config(str(config), config.read_text()).problems == []
    log, sock = tmp_path / "vllm.log", tmp_path / "lw.sock"
    log.write_bytes((SAMPLES / "demo_marlin_and_mtp.log").read_bytes())  # two failed launches
    proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--file", str(log),
                             "--db", str(tmp_path / "h.duckdb"), "--socket", str(sock),
                             "--config", str(config)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    calls = tmp_path / "hook.sh.calls"
    try:
        asyncio.run(wait_ready(sock, 30, alive=lambda: proc.poll() is None))
        deadline = time.monotonic() + 60
        while not (any(g["event"] == "crash_loop" for g in Receiver.got) and calls.exists()
                   and "crash_loop" in calls.read_text()):
            assert time.monotonic() < deadline, (Receiver.got, proc.poll())
            time.sleep(0.1)  # polling what the receivers got; the condition decides
        time.sleep(1.0)  # anything more (a duplicate) would come now
    finally:
        proc.terminate()
        proc.wait(30)
        server.shutdown()
    fatal = [g["signature"] for g in Receiver.got if g["event"] == "fatal_incident"]
    assert len(fatal) == len(set(fatal)) >= 3  # one per problem, though both launches hit some
    assert {"marlin.repack_tile_n", "weights.tensor_size_mismatch"} <= set(fatal)
    loops = [g for g in Receiver.got if g["event"] == "crash_loop"]
    assert len(loops) == 1 and loops[0]["source"] == f"file:{log.resolve()}"
    hooked = [line.split("\t") for line in calls.read_text().splitlines()]
    assert sorted(s for e, s, _ in hooked if e == "fatal_incident") == sorted(fatal)
    assert [e for e, _, _ in hooked].count("crash_loop") == 1
    assert all(json.loads(body)["event"] == e for e, _, body in hooked)


def test_the_readmes_notify_example_is_what_the_configuration_accepts() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [block.split("```", 1)[0] for block in text.split("```toml\n")[1:]]
    example = next(block for block in blocks if "[[notify]]" in block)
    config = parse_config("README.md", example)
    assert config.problems == []
    assert [n.kind for n in config.notify] == ["webhook", "hook"]
    assert config.notify[1].argv[0] == "/usr/local/bin/page-oncall"
    bad = parse_config("x.toml", '[[notify]]\nkind = "hook"\nargv = ["sh -c"]\n')
    assert "absolute path (no shell runs it)" in bad.problems[0].message


def test_logwatch_run_tells_the_configurations_hook_of_its_childs_failure(tmp_path: Path
                                                                          ) -> None:
    """`logwatch run` reads [[notify]] as the daemon does (before, only the daemon did)."""
    hook = tmp_path / "hook.sh"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    config = tmp_path / "lw.toml"
    config.write_text(f"[[notify]]\nkind = \"hook\"\nargv = [\"{hook}\"]\n"
                      "on = [\"fatal_incident\"]\n")
    sample = SAMPLES / "mtp_tensor_mismatch_glm_033.log"
    done = subprocess.run(
        [sys.executable, "-m", "logwatch", "run", "--quiet", "--config", str(config),
         "--db", str(tmp_path / "h.duckdb"), "--", "/bin/sh", "-c",
         f'cat "{sample}"; exit 1'], cwd=ROOT, capture_output=True, text=True, timeout=120,
        check=False)
    assert done.returncode == 1, done.stderr  # the child's status
    hooked = [line.split("\t") for line in (tmp_path / "hook.sh.calls").read_text()
              .splitlines()]
    assert ("fatal_incident", "weights.tensor_size_mismatch") in [(e, s) for e, s, _ in hooked]
    assert len({json.loads(body)["launch"] for _, _, body in hooked}) == 1  # the one run
    assert {json.loads(body)["source"] for _, _, body in hooked} == {"run:vllm"}
