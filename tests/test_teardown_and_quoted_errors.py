"""What the teardown rule and the signatures learnt from a real vLLM 0.32.0 must not do: hide a
real crash behind a shutdown line (another service's uvicorn line, a worker killed while the
server drains, a daemon restarted mid-teardown), leave fatal rows in the history for a clean
Ctrl-C, or fail a serving launch on a LoRA request's error or a prompt logged at DEBUG that
quotes an error. Found by an adversarial review of the first cut; each failed on it. Logs are
built from the committed real 0.32.0 samples, so they keep the real server's line formats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from logwatch.core.signatures.library import Library
from logwatch.scan.offline import resolve_inputs, scan_inputs
from tests.conftest import SAMPLES
from tests.following import run_daemon

SIGINT = (SAMPLES / "real_032_sigint_teardown.log").read_text()
KILLED = (SAMPLES / "real_032_worker_killed_serving.log").read_text()


def _up() -> str:
    """The real 0.32.0 server up to `Application startup complete.` (serving)."""
    lines = SIGINT.splitlines(keepends=True)
    end = next(n for n, ln in enumerate(lines) if "Application startup complete" in ln)
    return "".join(lines[:end + 1])


def _crash(exit_code: str = "-9", dump_input: bool = True) -> str:
    """The real 0.32.0 lines of a worker that died while serving, through EngineDeadError."""
    lines = KILLED.splitlines(keepends=True)
    a = next(n for n, ln in enumerate(lines) if "died unexpectedly" in ln)
    b = next(n for n, ln in enumerate(lines) if "EngineDeadError" in ln)
    out = "".join(ln for ln in lines[a:b + 1] if dump_input or "dump_input.py" not in ln)
    return out.replace("exit code: -4", f"exit code: {exit_code}")


UVICORN_DOWN = ("INFO:     Shutting down\nINFO:     Waiting for application shutdown.\n"
                "INFO:     Application shutdown complete.\n"
                "INFO:     Finished server process [4566]\n")


def _scan(tmp_path: Path, library: Library, text: str) -> dict[str, Any]:
    log = tmp_path / "vllm.log"
    log.write_text(text)
    return scan_inputs(resolve_inputs([str(log)]), library)


def _fatal(report: dict[str, Any]) -> list[str]:
    return [i["signature"] for i in report["incidents"] if i["fatal"]]


# -- 1. new model.not_found pattern: a LoRA load request with a bad path fails a healthy server --

def test_a_lora_adapter_path_refused_as_repo_id_does_not_fail_a_serving_launch(
        tmp_path: Path, library: Library) -> None:
    """vllm/lora/utils.py get_adapter_absolute_path (0.32.0) logs HFValidationError with
    logger.exception when a /v1/load_lora_adapter path does not exist; the request gets a 404
    and the server goes on serving. model.not_found v3's `Repo id must be in the form` pattern
    makes the launch failed (before this change: one unrecognised error, launch serving)."""
    h = "(Worker pid=4721) ERROR 12-04 19:07:10 [utils.py:379]"
    text = _up() + "".join(f"{h} {ln}\n" for ln in [
        "Error downloading the HuggingFace model",
        "Traceback (most recent call last):",
        '  File "/opt/vllm/lib/python3.11/site-packages/vllm/lora/utils.py", line 376, in '
        "get_adapter_absolute_path",
        "    local_snapshot_path = download_fn()",
        '  File "/opt/vllm/lib/python3.11/site-packages/huggingface_hub/utils/_validators.py", '
        "line 154, in validate_repo_id",
        "    raise HFValidationError(",
        "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
        "'namespace/repo_name': '/adapters/sql-lora-v2'. Use `repo_type` argument if needed.",
    ]) + ('INFO:     10.0.0.7:51234 - "POST /v1/load_lora_adapter HTTP/1.1" 404 Not Found\n'
          'INFO:     10.0.0.7:51240 - "POST /v1/completions HTTP/1.1" 200 OK\n')
    report = _scan(tmp_path, library, text)
    assert [launch["outcome"] for launch in report["launches"]] == ["serving"]
    assert report["verdict"] != "failed"
    assert "model.not_found" not in _fatal(report)


# -- 2. new unanchored signatures match a prompt vLLM 0.32 logs at DEBUG ---------------------

@pytest.mark.parametrize("quoted", [
    "RuntimeError: start (0) + length (512) exceeds dimension size (256).",
    "FileNotFoundError: Weight files referenced in index but missing: {'/m/x.safetensors'}",
    "OSError: It looks like the config file at '/m/config.json' is not a valid JSON file.",
    "OSError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/models/x'.",
    "Worker proc VllmWorker-0 died unexpectedly (exit code: None), shutting down executor.",
])
def test_a_prompt_logged_at_debug_that_quotes_an_error_is_not_a_failure(
        tmp_path: Path, library: Library, quoted: str) -> None:
    """0.32.0's request logger (entrypoints/serve/utils/request_logger.py) logs the prompt as
    `Request %s details: prompt: %r` and the body as `Request %s JSON body: %s` at DEBUG;
    the matcher skips only messages starting `Received request `/`Generated response `."""
    text = _up() + (
        "(APIServer pid=4566) DEBUG 12-04 19:07:10 [request_logger.py:55] Request cmpl-1 "
        f"details: prompt: 'what does this vLLM error mean: {quoted}', prompt_token_ids: "
        "[1, 2, 3], prompt_embeds shape: None.\n"
        "(APIServer pid=4566) INFO 12-04 19:07:10 [request_logger.py:65] Received request "
        "cmpl-1: params: SamplingParams(n=1), lora_request: None.\n"
        'INFO:     127.0.0.1:36750 - "POST /v1/completions HTTP/1.1" 200 OK\n')
    report = _scan(tmp_path, library, text)
    assert [launch["outcome"] for launch in report["launches"]] == ["serving"]
    assert _fatal(report) == []


# -- 3. teardown rule: another program's uvicorn shutdown line hides vLLM's crash ---------------

def test_another_services_uvicorn_shutdown_does_not_hide_a_vllm_crash(
        tmp_path: Path, library: Library) -> None:
    """`docker compose logs` of vLLM and a FastAPI gateway: the gateway restarts (its uvicorn
    prints `Application shutdown complete.`), later vLLM's worker is OOM-killed while serving.
    The compose prefix is stripped, the gateway's line is vLLM's `lifecycle.shutdown`, the
    launch `stopped`, and every later engine/worker death demoted to info: verdict healthy.
    Before this change the same log was `failed`."""
    def svc(name: str, text: str) -> str:
        return "".join(f"{name}  | 2026-12-04T19:07:00.000000000Z {ln}\n"
                       for ln in text.splitlines())
    text = (svc("vllm-1", _up())
            + svc("gateway-1", "INFO:     Shutting down\nINFO:     Application shutdown "
                               "complete.\nINFO:     Finished server process [1]\n"
                               "INFO:     Started server process [1]")
            + svc("vllm-1", _crash(dump_input=False)))
    report = _scan(tmp_path, library, text)
    assert [launch["outcome"] for launch in report["launches"]] == ["failed"]
    assert report["verdict"] == "failed"


def test_a_worker_killed_while_draining_fails_the_launch(tmp_path: Path,
                                                          library: Library) -> None:
    """0.32.0 with --shutdown-timeout 30: after `shutdown triggered` the API server drains
    (`mode=drain`), the engine goes on running requests; a worker OOM-killed then (exit -9)
    fails the request in flight (500). vLLM's monitor logs `died unexpectedly` only when the
    executor was NOT shutting down (multiproc_executor.py monitor_workers), so this line is
    never a by-product of the shutdown; yet it is demoted to info and the launch `stopped`."""
    text = (_up()
            + "(APIServer pid=4566) INFO 12-04 19:07:53 [launcher.py:254] [shutdown] API "
              "server: shutdown triggered\n"
            + "(APIServer pid=4566) INFO 12-04 19:07:53 [launcher.py:270] [shutdown] API "
              "server: stopping engine client mode=drain timeout=30s\n"
            + _crash("-9")
            + 'INFO:     127.0.0.1:36750 - "POST /v1/completions HTTP/1.1" 500 Internal '
              "Server Error\n" + UVICORN_DOWN)
    report = _scan(tmp_path, library, text)
    assert [launch["outcome"] for launch in report["launches"]] == ["failed"]
    assert "engine.worker_failed" in _fatal(report)


# -- 4. the daemon's history does not get the teardown demotion ------------------------------

def _launches_and_problems(db: Path) -> tuple[list[Any], list[Any]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        launches = con.execute("SELECT number, outcome, root_signature, fatal_incidents "
                               "FROM launches ORDER BY number").fetchall()
        problems = con.execute("SELECT signature FROM problems WHERE fatal "
                               "ORDER BY signature").fetchall()
    finally:
        con.close()
    return launches, problems


def test_a_clean_ctrl_c_leaves_no_fatal_problem_in_the_daemons_history(tmp_path: Path) -> None:
    """The sample the change was made for, followed by the daemon: the launch is stopped, but
    the incidents table keeps engine.dead and engine.output_handler_failed fatal (only generic
    incidents get the settled `fatal` written back: store/live.py), so docs/history.md's
    `problems WHERE fatal` lists them, and the daemon logs `fatal_incident` at error twice."""
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_text(SIGINT)
    done = run_daemon("--file", str(log), "--db", str(db), "--no-socket")
    assert done.returncode == 0, done.stderr
    launches, problems = _launches_and_problems(db)
    assert launches == [(1, "stopped", None, 0)]
    assert problems == []
    assert "fatal_incident" not in done.stderr


def test_a_daemon_restarted_inside_a_teardown_keeps_the_stop_clean(tmp_path: Path) -> None:
    """The daemon stopped (host shutdown, upgrade) after reading `shutdown triggered` and
    started again before the teardown's EngineDeadError: `stop_line` is not stored nor rebuilt
    (live_launches._go_on_with), so the launch is stored `stopped` with root cause
    engine.output_handler_failed and 2 fatal incidents; one uninterrupted run says none."""
    lines = SIGINT.splitlines(keepends=True)
    cut = next(n for n, ln in enumerate(lines) if "shutdown triggered" in ln) + 1
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    args = ("--file", str(log), "--db", str(db), "--no-socket")
    log.write_text("".join(lines[:cut]))
    assert run_daemon(*args).returncode == 0
    with open(log, "a") as out:
        out.write("".join(lines[cut:]))
    assert run_daemon(*args).returncode == 0
    launches, _ = _launches_and_problems(db)
    assert launches == [(1, "stopped", None, 0)]
