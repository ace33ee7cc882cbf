"""What an adversarial review of the pre-flight broke, each a regression test: model
directories that hung it or gave a traceback (which reads as exit 1, "failures predicted"),
launches vLLM starts that it refused, and what it showed that it should not have."""

from __future__ import annotations

import json
import os
import shlex
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.model_dirs import TINY_LLAMA, llama_tensors, model_dir


def preflight(model: Path, flags: str = "", *extra: str, served: str | None = None
              ) -> subprocess.CompletedProcess[str]:
    """The real command in a process of its own, with a deadline (a hang fails the test)."""
    cmdline = f"vllm serve {shlex.quote(served or str(model))} {flags}"
    return subprocess.run([sys.executable, "-m", "logwatch", "preflight", "--model-dir",
                           str(model), "--cmdline", cmdline, "--vllm-version", "0.32.0",
                           "--json", *extra], capture_output=True, text=True, cwd=ROOT,
                          timeout=60, check=False)


def judged(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
    body: dict[str, Any] = json.loads(done.stdout)
    return body


def fails(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [p["kind"] for p in judged(done)["problems"]]


@pytest.mark.parametrize("where", ["model.safetensors", "config.json",
                                   "model.safetensors.index.json"])
def test_a_fifo_where_a_file_should_be_does_not_hang_it(tmp_path: Path, where: str) -> None:
    path = model_dir(tmp_path / "m")
    (path / where).unlink(missing_ok=True)
    os.mkfifo(path / where)
    body = judged(preflight(path))
    if where == "model.safetensors":
        assert [p["kind"] for p in body["problems"]] == ["shard_damaged"]
        assert "not a regular file" in body["problems"][0]["reason"]


def test_a_directory_where_a_shard_should_be_is_damage(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "m")
    (path / "model.safetensors").unlink()
    (path / "model.safetensors").mkdir()
    assert fails(preflight(path)) == ["shard_damaged"]


@pytest.mark.parametrize("shape", [[2**63] * 5000, [10**300] * 3, [True, 4]])
def test_shapes_no_tensor_has_are_damage_said_briefly(tmp_path: Path, shape: list[Any]) -> None:
    path = model_dir(tmp_path / "m")
    header = json.dumps({"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 4]}})
    (path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header.encode()
                                             + b"\0" * 4)
    done = preflight(path)
    (problem,) = judged(done)["problems"]
    assert problem["kind"] == "shard_damaged" and len(problem["reason"]) < 400


@pytest.mark.parametrize("where", ["model.safetensors", "config.json",
                                   "model.safetensors.index.json", "tokenizer_config.json"])
def test_json_nested_beyond_the_parser_is_said_not_a_traceback(tmp_path: Path,
                                                               where: str) -> None:
    path = model_dir(tmp_path / "m")
    deep = "[" * 100_000 + "]" * 100_000
    if where == "model.safetensors":
        (path / where).write_bytes(struct.pack("<Q", len(deep)) + deep.encode())
    else:
        (path / where).write_text(deep)
    judged(preflight(path))


@pytest.mark.parametrize("config", [
    {**TINY_LLAMA, "model_type": "qwen2_moe", "mlp_only_layers": 5, "num_experts": 4,
     "moe_intermediate_size": 32},
    {**TINY_LLAMA, "rope_scaling": {"type": "linear", "factor": 1e308}},
    {**TINY_LLAMA, "rope_scaling": {"type": "linear", "factor": "x"}},
])
def test_config_values_no_rule_foresaw_are_not_a_traceback(tmp_path: Path,
                                                           config: dict[str, Any]) -> None:
    path = model_dir(tmp_path / "m", tensors=llama_tensors())
    (path / "config.json").write_text(json.dumps(config))
    judged(preflight(path, "--max-model-len 1024"))


def test_a_config_number_of_more_digits_than_python_converts(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "m")
    (path / "config.json").write_text('{"model_type": "llama", "hidden_size": ' + "9" * 5000
                                      + "}")
    assert fails(preflight(path)) == ["config_unreadable"]


def test_a_max_model_len_of_thousands_of_digits(tmp_path: Path) -> None:
    judged(preflight(model_dir(tmp_path / "m"), "--max-model-len " + "9" * 5000))


GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False, "sym": True}


def gptq_partial(config: dict[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Layer 1 packed; layer 0 left in F16 (a float layer vLLM builds unquantized)."""
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name, (_, shape) in llama_tensors(config, "F16").items():
        if ".layers.1." in name and len(shape) == 2:
            o, i = shape
            m = name.removesuffix(".weight")
            out |= {f"{m}.qweight": ("I32", (i // 8, o)), f"{m}.qzeros": ("I32", (i // 32, o // 8)),
                    f"{m}.scales": ("F16", (i // 32, o))}
        else:
            out[name] = ("F16", shape)
    return out


CPU = ("--vllm-version", "0.32.0+cpu")  # no GPU Marlin tiles for these tiny widths


def test_a_gptq_checkpoint_with_float_layers_is_not_refused(tmp_path: Path) -> None:
    """vLLM 0.32.0 takes the quantized layers from the headers when the config lists none:
    the float layers are built unquantized and load. Only a checkpoint with no packed layer
    at all fails (the tier's gptq-unpacked); an AWQ config over plain weights starts."""
    config = {**TINY_LLAMA, "quantization_config": GPTQ, "torch_dtype": "float16"}
    assert fails(preflight(model_dir(tmp_path / "partial", config, gptq_partial(config)),
                           "--dtype float16", *CPU)) == []
    assert fails(preflight(model_dir(tmp_path / "plain", config, llama_tensors(config, "F16")),
                           "--dtype float16", *CPU)) == ["weight_not_quantized"]
    awq = {**TINY_LLAMA, "quantization_config": {"quant_method": "awq", "bits": 4,
                                                 "group_size": 32, "version": "gemm"}}
    assert fails(preflight(model_dir(tmp_path / "awq", awq, llama_tensors(awq, "F16")),
                           "--dtype float16", *CPU)) == []


def test_gptq_with_per_layer_bits_is_not_unpacked_with_one_width(tmp_path: Path) -> None:
    config = {**TINY_LLAMA, "quantization_config": {
        **GPTQ, "dynamic": {r"+:.*\.mlp\..*": {"bits": 8}}}}
    tensors = gptq_partial(config)
    tensors["model.layers.1.mlp.down_proj.qweight"] = ("I32", (128 // 4, 64))  # 8-bit
    assert fails(preflight(model_dir(tmp_path / "m", config, tensors), "--dtype float16",
                           *CPU)) == []


def test_hf_overrides_are_merged_before_the_shapes_are_judged(tmp_path: Path) -> None:
    tensors = llama_tensors()
    path = model_dir(tmp_path / "m", {**TINY_LLAMA, "num_hidden_layers": 1}, tensors)
    assert fails(preflight(path)) == ["weight_unexpected"]
    assert fails(preflight(path, "--hf-overrides '{\"num_hidden_layers\": 2}'")) == []


def test_a_tokenizer_of_custom_code_is_not_judged_by_its_files(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "m", tokenizer=False)
    (path / "tiktoken.model").write_text("x")
    assert fails(preflight(path)) == []
    (path / "tiktoken.model").unlink()
    (path / "tokenizer_config.json").write_text(json.dumps(
        {"auto_map": {"AutoTokenizer": ["tokenization_x.XTokenizer", None]}}))
    assert fails(preflight(path, "--trust-remote-code")) == []


def test_a_relative_chat_template_is_vllms_working_directorys(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "m")
    assert fails(preflight(path, "--chat-template templates/chat.jinja")) == []
    assert fails(preflight(path, "--chat-template ./template_chatml.jinja")) == []
    assert fails(preflight(path, f"--chat-template {tmp_path}/none.jinja")) == \
        ["chat_template_missing"]


def test_a_gguf_file_as_the_model_is_not_judged(tmp_path: Path) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 60)
    assert fails(preflight(gguf)) == []


def test_a_length_up_to_model_max_length_passes_whatever_the_rope_factor(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "m", {**TINY_LLAMA, "model_max_length": 512,
                                      "rope_scaling": {"type": "linear", "factor": 0.5}})
    assert fails(preflight(path, "--max-model-len 512")) == []


def test_architectures_given_as_a_name_not_a_list(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "m", {**TINY_LLAMA, "architectures": "LlamaForCausalLM"})
    assert fails(preflight(path)) == []


def test_a_symlinked_shard_does_not_show_the_bytes_of_what_it_points_at(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "m")
    secret = tmp_path / "token"
    secret.write_text("hf_abcdefghijklmnopqrstuvwxyz0123456789\n")
    (path / "model.safetensors").unlink()
    (path / "model.safetensors").symlink_to(secret)
    done = preflight(path)
    shown = done.stdout + done.stderr
    value = struct.unpack("<Q", secret.read_bytes()[:8])[0]
    assert str(value) not in shown and "hf_abcde" not in shown
    assert fails(done) == ["shard_damaged"]


def test_the_releases_parser_refusal_does_not_show_a_secret(tmp_path: Path) -> None:
    model = model_dir(tmp_path / "m")
    python = tmp_path / "python"
    said = "vllm: error: unrecognized arguments: --api-keys sk-SECRETVALUE123456"
    python.write_text("#!/bin/sh\necho " + shlex.quote(json.dumps(
        {"accepted": False, "error": said, "release": "0.32.0"})) + "\n")
    python.chmod(0o755)
    done = preflight(model, "--api-keys sk-SECRETVALUE123456", "--vllm-python", str(python))
    assert "SECRETVALUE" not in done.stdout + done.stderr
    assert "unrecognized arguments: --api-keys ***" in done.stdout
