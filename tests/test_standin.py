"""The vLLM stand-in as a real child process: its crashes are the ones logwatch's signature
library recognises, its healthy start serves real HTTP on loopback and stops cleanly on
SIGTERM, unknown flags get argparse's exit 2, and hostile argv values are printed inert."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.snapshot.model import model_facts
from logwatch.demo.standin_args import UsageError, parse_serve
from logwatch.demo.standin_format import Writer, style_for
from logwatch.demo.standin_outcome import GPUS, Launch, outcome
from logwatch.demo.standin_script import Scene, stats
from logwatch.host.model_dir import read_model_dir
from tests.conftest import ROOT

MODELS = ROOT / "samples" / "models"
UNCOVERED = MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered"
COVERED = MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-covered"
MTP = '{"method": "mtp", "num_speculative_tokens": 2}'
DEADLINE_S = 10.0
SERVING = re.compile(r"Starting vLLM (?:API )?server (?:0 )?on http://([\d.]+):(\d+)")


def standin_env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "LOGWATCH_"))}
    env.update({"LOGWATCH_STANDIN_PACE": "0", "VLLM_LOG_STATS_INTERVAL": "0.2",
                "PYTHONPATH": str(ROOT)}, **settings)
    return env


def start(args: list[str], log: Path, cwd: Path, **settings: str) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "logwatch.demo.standin", *args],
                                stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                env=standin_env(**settings))


def scan(log: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "logwatch", "scan", str(log), "--json"],
                          capture_output=True, cwd=ROOT, check=False, timeout=60)
    assert done.returncode in (0, 1), done.stderr.decode()
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def signatures(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {i["signature"]: i for i in report["incidents"]}


def wait_for_address(proc: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        found = SERVING.search(log.read_text(errors="replace"))
        if found:
            return f"http://{found.group(1)}:{found.group(2)}"
        assert proc.poll() is None, log.read_text(errors="replace")
        time.sleep(0.02)
    raise AssertionError(f"no serving line within {DEADLINE_S}s:\n{log.read_text()}")


def get(url: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data,
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_healthy(url: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            if get(url + "/health")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.02)
    raise AssertionError("/health never answered 200")


def wait_for_text(log: Path, text: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while text not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"{text!r} never logged:\n{log.read_text()}"
        time.sleep(0.02)


@pytest.fixture
def reaper() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


@pytest.mark.parametrize(("gpu", "tp", "release", "expected", "captures"), [
    ("h200", "4", "0.33.0", "marlin.repack_tile_n", {"size_n": "160", "tile_n_size": "64"}),
    ("h200", "4", "0.25.1", "marlin.repack_tile_n", {"size_n": "160", "tile_n_size": "64"}),
    ("b200", "2", "0.33.0", "weights.tensor_size_mismatch", {"a": "2048", "b": "4096"}),
])
def test_uncovered_model_crashes_as_logwatch_recognises(
        tmp_path: Path, gpu: str, tp: str, release: str, expected: str,
        captures: dict[str, str]) -> None:
    log = tmp_path / "vllm.log"
    proc = start(["serve", str(UNCOVERED), "-tp", tp, "--speculative-config", MTP], log,
                 tmp_path, LOGWATCH_STANDIN_GPU=gpu, LOGWATCH_STANDIN_VLLM=release)
    assert proc.wait(timeout=30) == 1
    report = scan(log)
    found = signatures(report)
    assert report["verdict"] == "failed"
    assert expected in found, sorted(found)
    assert captures.items() <= found[expected]["captures"].items()
    assert found[expected]["ranks"] == [f"TP{r}" for r in range(int(tp))]
    assert {"engine.core_failed_to_start", "engine.init_failed"} <= found.keys()
    assert found["lifecycle.version"]["captures"]["version"] == release
    assert report["unrecognised"] == []


def test_covered_w4a4_on_b200_serves_and_stops_cleanly(
        tmp_path: Path, reaper: list[subprocess.Popen[bytes]]) -> None:
    log = tmp_path / "vllm.log"
    proc = start(["serve", str(COVERED), "--port", "0", "--speculative-config", MTP,
                  "--served-model-name", "qwen", "q2"], log, tmp_path,
                 LOGWATCH_STANDIN_GPU="b200")
    reaper.append(proc)
    url = wait_for_address(proc, log)
    wait_healthy(url)
    status, body = get(url + "/v1/models")
    assert status == 200
    cards = json.loads(body)["data"]
    assert [(c["id"], c["root"], c["owned_by"]) for c in cards] == [
        ("qwen", str(COVERED), "vllm"), ("q2", str(COVERED), "vllm")]
    assert get(url + "/v1/completions", {"model": "q2", "prompt": "x"})[0] == 200
    status, body = get(url + "/v1/completions", {"model": "qwen", "prompt": "Hi", "max_tokens": 4})
    answer = json.loads(body)
    assert status == 200 and answer["object"] == "text_completion"
    assert answer["choices"][0]["text"].strip() and answer["usage"]["completion_tokens"] == 4
    assert get(url + "/v1/completions", {"model": "other", "prompt": "x"})[0] == 404
    assert get(url + "/v1/completions", {"prompt": "x", "max_tokens": "many"})[0] == 400
    wait_for_text(log, "SpecDecoding metrics:")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    text = log.read_text()
    assert "Application startup complete." in text and "Finished server process" in text
    assert '"POST /v1/completions HTTP/1.1" 200 OK' in text
    report = scan(log)
    found = signatures(report)
    assert report["verdict"] == "healthy", report["root_cause"]
    assert {"lifecycle.startup_complete", "spec_decode.acceptance", "lifecycle.shutdown"} \
        <= found.keys()
    assert "nvfp4.marlin_fallback" not in found  # W4A4 on 10.0: no Marlin


def test_unknown_flag_is_argparse_error_exit_2(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    proc = start(["serve", str(COVERED), "--frobnicate", "3"], log, tmp_path)
    assert proc.wait(timeout=30) == 2
    assert log.read_text().splitlines() == [
        "usage: vllm serve [model_tag] [options]",
        "vllm serve: error: unrecognized arguments: --frobnicate 3"]


def test_backend_flags_are_refused_by_releases_without_them() -> None:
    with pytest.raises(UsageError, match="unrecognized arguments: --linear-backend"):
        parse_serve([str(COVERED), "--linear-backend", "flashinfer-cutlass"], (0, 11, 2))
    launch, _ = parse_serve([str(COVERED), "--moe-backend", "marlin"], (0, 33, 0))
    facts, _ = read_model_dir(COVERED)
    assert facts is not None
    # a backend forcing Marlin on a native-FP4 GPU still meets the expert tiles at TP 4
    forced = outcome(facts, Launch(model=str(COVERED), tensor_parallel_size=4,
                                   moe_backend=launch.moe_backend), GPUS["b200"], "0.33.0")
    assert forced.kind == "marlin_tile" and forced.marlin


def test_outcome_follows_release_rules() -> None:
    facts, _ = read_model_dir(UNCOVERED)
    assert facts is not None
    mtp = Launch(model=str(UNCOVERED), tensor_parallel_size=2,
                 speculative_config={"method": "mtp"})
    assert outcome(facts, mtp, GPUS["h200"], "0.11.2").kind == "unsupported_architecture"
    mismatch = outcome(facts, mtp, GPUS["rtx-pro-6000"], "0.33.0")
    assert (mismatch.kind, mismatch.mismatch, mismatch.marlin) == (
        "tensor_mismatch", (2048, 4096), False)
    plain = Launch(model=str(UNCOVERED), tensor_parallel_size=2)
    served = outcome(facts, plain, GPUS["h200"], "0.33.0")
    assert (served.kind, served.marlin) == ("serve", True)  # no MTP: the gap never loads


def test_hostile_argv_is_printed_inert(tmp_path: Path,
                                       reaper: list[subprocess.Popen[bytes]]) -> None:
    marker = tmp_path / "pwned"
    model = tmp_path / "m$(touch pwned)\x1b]0;title\x07"
    shutil.copytree(COVERED, model)
    name = f"$(touch {marker}) `touch {marker}`; rm -rf / \x1b[2J\x1b[31mred"
    log = tmp_path / "vllm.log"
    proc = start(["serve", str(model), "--port", "0", "--served-model-name", name], log,
                 tmp_path, LOGWATCH_STANDIN_GPU="b200")
    reaper.append(proc)
    url = wait_for_address(proc, log)
    wait_healthy(url)
    card = json.loads(get(url + "/v1/models")[1])["data"][0]
    assert (card["id"], card["root"]) == (name, str(model))  # served verbatim, not run
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0
    raw = log.read_bytes()
    assert b"\x1b" not in raw and b"\x07" not in raw
    assert b"$(touch pwned)^[]0;title^G" in raw  # shown, in caret notation
    bad = start(["serve", str(model), f"--x=\x1b[2J$(touch {marker})"], tmp_path / "bad.log",
                tmp_path)
    assert bad.wait(timeout=30) == 2
    assert b"\x1b" not in (tmp_path / "bad.log").read_bytes()
    assert not marker.exists() and not (tmp_path / "pwned").exists()


def test_quark_moe_children_fail_before_0_26_only() -> None:
    """The exclude list names an expert child: before 0.26.0 the experts stay MXFP4 (their
    BF16 weights do not fit); from 0.26.0 only the shared experts, never listed, do."""
    facts, _ = read_model_dir(MODELS / "glm-5.2-quark-mxfp4")
    assert facts is not None
    launch = Launch(model="glm", tensor_parallel_size=8, speculative_config={"method": "mtp"})
    before = outcome(facts, launch, GPUS["b200"], "0.25.1")
    after = outcome(facts, launch, GPUS["b200"], "0.26.0")
    assert before.kind == after.kind == "tensor_mismatch"
    assert before.mismatch_module == "model.layers.78.mlp.experts.*.down_proj"
    assert after.mismatch_module == "model.layers.78.mlp.shared_experts.down_proj"
    assert before.mismatch == (128, 256)  # MXFP4 packs K = 2048 / 8 ranks into bytes


def test_dense_marlin_widths_crash_before_0_24_and_pad_after() -> None:
    weights = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16,
               "symmetric": True, "dynamic": False}
    config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
              "intermediate_size": 12320, "num_hidden_layers": 2, "num_attention_heads": 32,
              "num_key_value_heads": 8, "head_dim": 128,
              "quantization_config": {"quant_method": "compressed-tensors",
                                      "config_groups": {"g": {"targets": ["Linear"],
                                                              "weights": weights}}}}
    facts = model_facts("/m", config, ["model.layers.0.mlp.down_proj.weight_packed"])
    launch = Launch(model="/m", tensor_parallel_size=2)
    old = outcome(facts, launch, GPUS["h200"], "0.11.2")
    assert (old.kind, old.tile_error) == (
        "marlin_tile", "size_n = 12320 is not divisible by tile_n_size = 64")
    new = outcome(facts, launch, GPUS["h200"], "0.25.1")
    assert (new.kind, new.padded) == ("serve", ("mlp gate_up_proj",))
    assert outcome(facts, launch, GPUS["b200"], "0.11.2").kind == "serve"  # no Marlin on 10.0


def test_default_pacing_is_short(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    began = time.monotonic()
    proc = start(["serve", str(UNCOVERED), "-tp", "4"], log, tmp_path,
                 LOGWATCH_STANDIN_PACE="1", LOGWATCH_STANDIN_GPU="h200")
    assert proc.wait(timeout=30) == 1
    assert time.monotonic() - began < 8
    assert "tile_n_size = 64" in log.read_text()


def test_0_11_2_prefixes_every_line_and_scans_healthy(
        tmp_path: Path, reaper: list[subprocess.Popen[bytes]]) -> None:
    """0.11.2 wraps stdout/stderr: uvicorn's lines carry the cyan `(APIServer pid=N)` too."""
    log = tmp_path / "vllm.log"
    proc = start(["serve", str(MODELS / "qwen3-32b-w4a16"), "--port", "0"], log, tmp_path,
                 LOGWATCH_STANDIN_VLLM="0.11.2")
    reaper.append(proc)
    url = wait_for_address(proc, log)
    wait_healthy(url)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    text = log.read_text()
    assert f"\x1b[1;36m(APIServer pid={proc.pid})\x1b[0;0m INFO:     Application startup " \
           "complete." in text
    assert "(EngineCore_DP0 pid=" in text and "vLLM API server version 0.11.2" in text
    report = scan(log)
    assert report["verdict"] == "healthy" and report["unrecognised"] == []
    assert "lifecycle.startup_complete" in signatures(report)


def test_0_32_0_writes_as_the_real_one_and_its_teardown_error_leaves_it_healthy(
        tmp_path: Path, reaper: list[subprocess.Popen[bytes]]) -> None:
    """As a real vLLM 0.32.0 does (docs/real-vllm.md): uvicorn's lines bare, a multi-line
    record's lines ending in a carriage return, and at a clean Ctrl-C the output handler's
    `EngineDeadError` at ERROR after the shutdown line. The launch stopped, the verdict
    healthy (it was `failed: engine.dead`)."""
    log = tmp_path / "vllm.log"
    proc = start(["serve", str(MODELS / "qwen3-32b-w4a16"), "--port", "0"], log, tmp_path,
                 LOGWATCH_STANDIN_VLLM="0.32.0")
    reaper.append(proc)
    url = wait_for_address(proc, log)
    wait_healthy(url)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0
    raw = log.read_bytes()
    assert b"\nINFO:     Application startup complete.\n" in raw
    assert b"version 0.32.0\r\n" in raw  # the logo is one record of several lines
    assert b"ERROR" in raw and b"EngineDeadError" in raw
    report = scan(log)
    assert report["verdict"] == "healthy", report["launches"]
    assert [launch["outcome"] for launch in report["launches"]] == ["stopped"]
    assert signatures(report)["engine.dead"]["severity"] == "info"


@pytest.mark.parametrize("release", ["0.11.2", "0.33.0"])
def test_more_ranks_than_gpus_is_refused_before_the_engine(tmp_path: Path, release: str) -> None:
    log = tmp_path / "vllm.log"
    proc = start(["serve", str(MODELS / "qwen3-32b-w4a16"), "-tp", "4"], log, tmp_path,
                 LOGWATCH_STANDIN_GPU_COUNT="2", LOGWATCH_STANDIN_VLLM=release)
    assert proc.wait(timeout=30) == 1
    assert "Initializing a V1 LLM engine" not in log.read_text()
    found = signatures(scan(log))
    assert found["config.world_size_exceeds_gpus"]["captures"] == {"world_size": "4",
                                                                   "gpus": "2"}


@pytest.mark.parametrize(("args", "settings", "code", "message"), [
    (["serve", "/nonexistent/model"], {}, 1, "/nonexistent/model: model directory not found"),
    (["serve", str(MODELS / "broken-config")], {}, 1, "config.json:2: invalid JSON"),
    (["serve", str(COVERED)], {"LOGWATCH_STANDIN_GPU": "a100"}, 2,
     "LOGWATCH_STANDIN_GPU='a100': expected one of h200, b200, rtx-pro-6000"),
    (["serve", str(COVERED)], {"LOGWATCH_STANDIN_VLLM": "latest"}, 2, "not a vLLM release"),
    (["serve", str(COVERED), "-sc", "{oops"], {}, 2,
     "vllm serve: error: argument --speculative-config/-sc: invalid JSON"),
])
def test_bad_input_is_a_clear_error_not_a_traceback(
        tmp_path: Path, args: list[str], settings: dict[str, str], code: int,
        message: str) -> None:
    log = tmp_path / "vllm.log"
    proc = start(args, log, tmp_path, **settings)
    assert proc.wait(timeout=30) == code
    text = log.read_text()
    assert message in text and "Traceback" not in text


def test_same_shape_draft_serves_with_garbage_acceptance() -> None:
    """An FP8 draft built over BF16 MTP weights loads without a size error (one value an
    element); its scales are never set, so the draft is garbage and acceptance falls to 0."""
    config = json.loads((UNCOVERED / "config.json").read_text())
    groups = config["quantization_config"]["config_groups"]["group_0"]
    groups["weights"] = {"num_bits": 8, "type": "float", "strategy": "channel",
                         "symmetric": True, "dynamic": False}
    groups["input_activations"] = {"num_bits": 8, "type": "float", "strategy": "token",
                                   "symmetric": True, "dynamic": True}
    names = list(json.loads((UNCOVERED / "model.safetensors.index.json").read_text())
                 ["weight_map"])
    facts = model_facts(str(UNCOVERED), config, names)
    launch = Launch(model="m", speculative_config={"method": "mtp", "num_speculative_tokens": 2})
    result = outcome(facts, launch, GPUS["h200"], "0.33.0")
    assert (facts.quant.scheme, result.kind, result.garbage_draft) == ("FP8", "serve", True)
    scene = Scene(Writer(style_for((0, 33, 0), {}), 1), facts, launch, GPUS["h200"], result,
                  2, 4096)
    spec = stats(scene, 3, 30, 10.0, lambda: "12-01 10:00:00")[-1].text
    assert "Mean acceptance length: 1.00" in spec and "Avg Draft acceptance rate: 0.0%" in spec
