"""`[[notify]]` against real receivers: a daemon follows a log where vLLM fails twice; a
webhook on a loopback HTTP server and a hook script (run without a shell) each hear one page
for the first failed launch, naming its root cause (never a consequence), and one for the
crash loop, however many launches repeat it; a loop that ended and began again pages again."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from logwatch.core.settings.config import parse_config
from logwatch.daemon.client import request, wait_ready
from tests.conftest import ROOT, SAMPLES
from tests.following import daemon_process, wait_for
from tests.hostile_log import marlin_failure


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
line="$(printf '%s\\t%s\\t' "$LOGWATCH_EVENT" "$LOGWATCH_ROOT_CAUSE")$(cat)"
printf '%s\\n' "$line" >> "$0.calls"
"""


def receivers(tmp: Path, extra: str = "") -> tuple[HTTPServer, str]:
    """A webhook receiver on loopback (what it got: Receiver.got) and a hook script (its
    calls: `hook.sh.calls` in `tmp`), and the [[notify]] entries naming both for failed
    launches and a crash loop of 2 launches (`extra`: more keys for both)."""
    Receiver.got = []
    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook = tmp / "hook.sh"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    return server, (
        "[[notify]]\nkind = \"webhook\"\n"
        f"url = \"http://127.0.0.1:{server.server_port}/logwatch\"\n"
        "on = [\"launch_failed\", \"crash_loop\"]\ncrash_loop_launches = 2\n" + extra + "\n"
        f"[[notify]]\nkind = \"hook\"\nargv = [\"{hook}\"]\n"
        "on = [\"launch_failed\", \"crash_loop\"]\ncrash_loop_launches = 2\n" + extra)


CONSEQUENCES = {"engine.worker_failed", "engine.init_failed", "engine.core_failed_to_start"}


def _paged(calls: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(event, root cause, JSON) of each hook call."""
    if not calls.exists():
        return []
    return [(e, cause, json.loads(body)) for e, cause, body in
            (line.split("\t") for line in calls.read_text().splitlines())]


@pytest.mark.slow
def test_one_page_per_failed_launch_naming_its_root_cause_and_one_per_crash_loop(
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
        while not (any(g["event"] == "crash_loop" for g in Receiver.got)
                   and any(e == "crash_loop" for e, _, _ in _paged(calls))):
            assert time.monotonic() < deadline, (Receiver.got, proc.poll())
            time.sleep(0.1)  # polling what the receivers got; the condition decides
        time.sleep(1.0)  # anything more (a duplicate) would come now
    finally:
        proc.terminate()
        proc.wait(30)
        server.shutdown()
    # (each page is delivered on its own: they may land in any order)
    assert sorted(g["event"] for g in Receiver.got) == ["crash_loop", "launch_failed"], \
        Receiver.got
    page, loop = sorted(Receiver.got, key=lambda g: g["event"] == "crash_loop")
    assert page["root_cause"] == "marlin.repack_tile_n" and page["number"] == 1
    assert page["title"] and page["category"] == "marlin_tile"
    assert " " in page["remedy"] and "\n" not in page["remedy"], page  # words, one line
    assert page["source"] == loop["source"] == f"file:{log.resolve()}"
    assert page["launch"] in page["command"] and page["command"].startswith("logwatch ")
    assert loop["root_cause"] == "weights.tensor_size_mismatch" and loop["launches"] == 2
    assert not {g.get("root_cause") for g in Receiver.got} & CONSEQUENCES
    hooked = _paged(calls)
    assert sorted((e, c) for e, c, _ in hooked) == [
        ("crash_loop", "weights.tensor_size_mismatch"), ("launch_failed", "marlin.repack_tile_n")]
    assert all(body["event"] == e for e, _, body in hooked)
    # the command the page names shows the launch's incidents, root cause first
    shown = subprocess.run([sys.executable, "-m", "logwatch", *shlex.split(page["command"])[1:],
                            "--db", str(tmp_path / "h.duckdb")], cwd=ROOT, capture_output=True,
                           text=True, timeout=120, check=True).stdout
    assert "marlin.repack_tile_n" in shown


@pytest.mark.slow
def test_a_crash_loop_pages_once_per_loop_and_again_after_a_launch_served(
        tmp_path: Path) -> None:
    """Three failed launches, a launch that served and stopped, two failed launches: with no
    rate limit to hide a repeat, the first failure pages, the loop pages once, the launches
    in it do not; after the healthy launch, the next failure and the next loop page again."""
    server, notify = receivers(tmp_path, extra="every_seconds = 0.001\n")
    config = tmp_path / "lw.toml"
    config.write_text(notify)
    fails = (SAMPLES / "mtp_tensor_mismatch_glm_033.log").read_bytes()
    healthy = (SAMPLES / "healthy_033_startup.log").read_bytes()
    log, sock, db = tmp_path / "vllm.log", tmp_path / "lw.sock", tmp_path / "h.duckdb"
    log.write_bytes(fails * 3)
    calls = tmp_path / "hook.sh.calls"

    def failed_launches() -> int:
        return int(asyncio.run(request(sock, "status"))["status"]["failed_launches"])

    with daemon_process("--file", str(log), "--db", str(db), "--socket", str(sock),
                        "--config", str(config), sock=sock):
        wait_for(lambda: failed_launches() == 3 and len(_paged(calls)) == 2, 60,
                 lambda: f"3 failed launches told, 2 pages: {_paged(calls)}")
        with open(log, "ab") as out:
            out.write(healthy + fails * 2)
        wait_for(lambda: failed_launches() == 5 and len(_paged(calls)) == 4, 60,
                 lambda: f"5 failed launches told, 4 pages: {_paged(calls)}")
        time.sleep(1.0)  # anything more (a page for a launch in a loop) would come now
    server.shutdown()
    # (each page is delivered on its own: they may land in any order)
    pages = sorted((e, body["number"]) for e, _, body in _paged(calls))
    assert pages == [("crash_loop", 2), ("crash_loop", 6), ("launch_failed", 1),
                     ("launch_failed", 5)], pages
    assert sorted((g["event"], g["number"]) for g in Receiver.got) == pages


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
                      "on = [\"fatal_incident\"]\n")  # the older name of launch_failed
    sample = SAMPLES / "mtp_tensor_mismatch_glm_033.log"
    done = subprocess.run(
        [sys.executable, "-m", "logwatch", "run", "--quiet", "--config", str(config),
         "--db", str(tmp_path / "h.duckdb"), "--", "/bin/sh", "-c",
         f'cat "{sample}"; exit 1'], cwd=ROOT, capture_output=True, text=True, timeout=120,
        check=False)
    assert done.returncode == 1, done.stderr  # the child's status
    hooked = [line.split("\t") for line in (tmp_path / "hook.sh.calls").read_text()
              .splitlines()]
    assert [(e, s) for e, s, _ in hooked] == [("launch_failed", "weights.tensor_size_mismatch")]
    assert len({json.loads(body)["launch"] for _, _, body in hooked}) == 1  # the one run
    assert {json.loads(body)["source"] for _, _, body in hooked} == {"run:vllm"}


@pytest.mark.slow
def test_a_failure_recorded_but_never_paged_is_paged_at_the_next_start_once(
        tmp_path: Path) -> None:
    """A failed launch the history holds but no page was decided for (the daemon stopped,
    or was killed, between recording the failure and paging it: here, it ran with no
    [[notify]] at all) is paged when a daemon with [[notify]] starts, marked late; the start
    after that pages nothing again. Before, such a failure was never paged."""
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes(b"\n".join(
        [b"INFO 12-04 10:00:00 [__init__.py:239] Automatically detected platform cuda.",
         *marlin_failure()]) + b"\n")
    first = subprocess.run([sys.executable, "-m", "logwatch", "daemon", "--file", str(log),
                            "--db", str(db), "--no-socket", "--config", os.devnull,
                            "--until-idle", "1"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120, check=False)
    assert first.returncode == 0, first.stderr
    server, notify = receivers(tmp_path)
    config = tmp_path / "lw.toml"
    config.write_text(notify)
    calls = tmp_path / "hook.sh.calls"
    try:
        for _ in range(2):
            again = subprocess.run([sys.executable, "-m", "logwatch", "daemon", "--file",
                                    str(log), "--db", str(db), "--no-socket", "--config",
                                    str(config), "--until-idle", "1"], cwd=ROOT,
                                   capture_output=True, text=True, timeout=120, check=False)
            assert again.returncode == 0, again.stderr
    finally:
        server.shutdown()
    hooked = _paged(calls)
    assert [(e, c) for e, c, _ in hooked] == [("launch_failed", "marlin.repack_tile_n")], hooked
    page = hooked[0][2]
    assert page["late"] is True and page["number"] == 1 and page["title"], page
    assert [g["event"] for g in Receiver.got] == ["launch_failed"], Receiver.got
