"""The pre-flight's launch checks (core/diagnosis/launch_checks.py), each on a model directory
written here, as `logwatch preflight` runs them: the failure vLLM 0.32.0 meets, and the
launch next to it that starts."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.diagnosis.launch_checks import LengthError, derived_length, requested_length
from tests.inprocess import logwatch_text
from tests.model_dirs import TINY_LLAMA, model_dir


def check(model: Path, flags: str, env: str = "", version: str = "0.32.0") -> dict[str, Any]:
    cmdline = f"{env} vllm serve {shlex.quote(str(model))} {flags}".strip()
    done = logwatch_text("preflight", "--model-dir", str(model), "--cmdline", cmdline,
                         "--vllm-version", version, "--json")
    assert done.returncode in (0, 1), done.stderr
    body: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == (1 if body["problems"] else 0)
    return body


def kinds(body: dict[str, Any], key: str = "problems") -> list[str]:
    return [p["kind"] for p in body[key]]


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_dir(tmp_path_factory.mktemp("m") / "llama")


def test_the_tiers_healthy_launch_predicts_nothing(llama: Path) -> None:
    body = check(llama, "--host 127.0.0.1 --max-model-len 256 --dtype float32 --enforce-eager")
    assert body["problems"] == [] and body["uncertain"] == []


@pytest.mark.parametrize(("flags", "clean"), [
    ("--max-model-len 100000", False), ("--max-model-len 512", True),
    ("--max-model-len 1k", False), ("--max-model-len 0.5k", True),
    ("--max-model-len auto", True), ("--max-model-len -1", True)])
def test_max_model_len_against_max_position_embeddings(llama: Path, flags: str,
                                                       clean: bool) -> None:
    body = check(llama, flags)
    assert kinds(body) == ([] if clean else ["max_model_len"])
    if not clean:
        assert "config.json (max_position_embeddings)" in body["problems"][0]["reason"]


def test_the_long_length_variable_allows_it(llama: Path) -> None:
    assert check(llama, "--max-model-len 100000",
                 env="VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")["problems"] == []


def test_the_derived_length_as_vllm_derives_it() -> None:
    assert derived_length({"max_position_embeddings": 4096, "seq_length": 2048}) == \
        (2048, "seq_length")  # the smallest key
    assert derived_length({"max_position_embeddings": 4096, "model_max_length": 8192}) == \
        (8192, "model_max_length")  # which overrides the rest
    assert derived_length({"max_position_embeddings": 4096, "rope_scaling": {
        "rope_type": "linear", "factor": 4.0}}) == (16384, "max_position_embeddings x rope "
                                                           "factor 4.0")
    assert derived_length({"max_position_embeddings": 131072, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0}})[0] == 131072  # folded in already
    assert derived_length({"hidden_size": 8}) is None
    assert requested_length("32k") == 32000 and requested_length("32K") == 32768
    assert requested_length("25.6k") == 25600 and requested_length(" AUTO ") is None
    for refused in ("0.5K", "lots", "1.5"):  # vLLM 0.32.0's parser: exit 2
        with pytest.raises(LengthError):
            requested_length(refused)


def test_a_length_the_parser_refuses(llama: Path) -> None:
    """Found by running the real vLLM 0.32.0 on held-out cases: `0.5K` is refused by its
    parser (a binary suffix takes no decimals), which preflight called clean."""
    (problem,) = check(llama, "--max-model-len 0.5K")["problems"]
    assert problem["stage"] == "arguments"
    assert "Decimals are not allowed with binary suffixes like K" in problem["message"]


@pytest.mark.parametrize(("value", "clean"), [("1.5", False), ("0", False), ("-0.2", False),
                                              ("nan", False), ("1", True), ("0.95", True)])
def test_gpu_memory_utilization_is_a_fraction(llama: Path, value: str, clean: bool) -> None:
    assert kinds(check(llama, f"--gpu-memory-utilization {value}")) == \
        ([] if clean else ["invalid_argument"])


def test_a_dtype_the_parser_does_not_take(llama: Path) -> None:
    (problem,) = check(llama, "--dtype float8")["problems"]
    assert problem["stage"] == "arguments" and "invalid choice: 'float8'" in problem["message"]


@pytest.mark.parametrize(("quant", "dtype", "clean"), [
    ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "float32", False),
    ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "bfloat16", True),
    ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "auto", True),
    ({"quant_method": "gptq", "bits": 4, "group_size": 32}, "float", False),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {
        "targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel",
                                           "symmetric": True}}}, "format": "int-quantized"},
     "float32", True),
])
def test_float32_with_a_method_whose_kernels_take_16_bit(tmp_path: Path, quant: dict[str, Any],
                                                         dtype: str, clean: bool) -> None:
    path = model_dir(tmp_path / "q", {**TINY_LLAMA, "quantization_config": quant}, tensors={})
    body = check(path, f"--dtype {dtype}")
    assert ("dtype_unsupported" not in kinds(body)) is clean


def test_float16_on_a_model_type_vllm_refuses_it_for(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "g", {**TINY_LLAMA, "model_type": "gemma2",
                                      "architectures": ["Gemma2ForCausalLM"]})
    assert kinds(check(path, "--dtype half")) == ["dtype_unsupported"]
    assert check(path, "--dtype bfloat16")["problems"] == []


def test_mtp_on_a_llama(llama: Path) -> None:
    spec = "'{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'"
    (problem,) = check(llama, f"--speculative-config {spec}")["problems"]
    assert problem["kind"] == "mtp_unsupported"
    assert problem["message"] == "NotImplementedError: Unsupported speculative method: 'mtp'"


def test_the_tokenizer_files(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "t", tokenizer=False)
    assert kinds(check(path, "")) == ["tokenizer_missing"]
    assert check(path, "--skip-tokenizer-init")["problems"] == []
    (path / "tokenizer.model").write_bytes(b"\0")
    assert check(path, "")["problems"] == []


def test_a_tokenizer_class_transformers_builds_empty_is_a_maybe(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "t", tokenizer=False)
    (path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "Qwen2Tokenizer"}))
    body = check(path, "")
    assert body["problems"] == [] and kinds(body, "uncertain") == ["tokenizer_missing"]
    assert "empty vocabulary" in body["uncertain"][0]["reason"]


def test_on_a_cpu_build_nvfp4_has_no_kernel_and_4_bit_widths_need_32(tmp_path: Path) -> None:
    nvfp4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}
    path = model_dir(tmp_path / "fp4", {**TINY_LLAMA, "quantization_config": nvfp4},
                     tensors={})
    assert kinds(check(path, "--dtype bfloat16", version="0.32.0+cpu")) == ["quant_no_kernel"]
    assert "quant_no_kernel" not in kinds(check(path, "--dtype bfloat16"))  # a GPU build
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 16, "desc_act": False,
            "sym": True}
    narrow = model_dir(tmp_path / "w48", {**TINY_LLAMA, "intermediate_size": 48,
                                          "quantization_config": gptq}, tensors={})
    (problem,) = check(narrow, "--dtype bfloat16", version="0.32.0+cpu")["problems"]
    assert "down_proj's input size is 48 per rank, not a multiple of 32" in problem["reason"]
    wide = model_dir(tmp_path / "w64", {**TINY_LLAMA, "quantization_config": gptq},
                     tensors={})
    assert check(wide, "--dtype bfloat16", version="0.32.0+cpu")["problems"] == []


def with_architecture(tmp_path: Path, name: str, *names: str) -> Path:
    architectures = [name, *names] if name else []
    return model_dir(tmp_path / (name or "none"), {**TINY_LLAMA, "architectures": architectures})


@pytest.mark.parametrize(("architecture", "kind"), [
    ("LlamaForCausalLM", None),
    ("NoSuchModelForCausalLM", "problems"),  # in no registry: the tier's unknown architecture
    ("BartForCausalLM", "uncertain"),  # transformers has it: vLLM's Transformers backend
    ("AquilaForCausalLM", "problems"),  # served up to 0.24.0 (the registry per release)
    ("", "problems"),  # config.json names none
])
def test_the_architecture_against_the_releases_registry(tmp_path: Path, architecture: str,
                                                       kind: str | None) -> None:
    body = check(with_architecture(tmp_path, architecture), "")
    for key in ("problems", "uncertain"):
        assert kinds(body, key) == (["architecture_unsupported"] if key == kind else [])
    if architecture == "AquilaForCausalLM":
        assert "served in 0.8.5-0.24.0" in body["problems"][0]["reason"]
        assert check(with_architecture(tmp_path / "old", architecture), "",
                     version="0.24.0")["problems"] == []


def test_the_transformers_backend_refused_by_model_impl_vllm(tmp_path: Path) -> None:
    path = with_architecture(tmp_path, "BartForCausalLM")
    assert kinds(check(path, "--model-impl vllm")) == ["architecture_unsupported"]


def test_an_unextracted_release_does_not_judge_the_architecture(tmp_path: Path) -> None:
    body = check(with_architecture(tmp_path, "NoSuchModelForCausalLM"), "", version="0.5.0")
    assert body["problems"] == [] and any("architecture not checked" in n
                                          for n in body["notes"])


@pytest.mark.parametrize(("tp", "clean"), [(2, True), (4, True), (3, False), (8, False)])
def test_tensor_parallel_size_must_divide_the_attention_heads(llama: Path, tp: int,
                                                              clean: bool) -> None:
    body = check(llama, f"--tensor-parallel-size {tp}")  # 4 heads
    assert kinds(body) == ([] if clean else ["tensor_parallel_heads"])
    if not clean:
        assert body["problems"][0]["message"] == (
            f"ValueError: Total number of attention heads (4) must be divisible by tensor "
            f"parallel size ({tp}).")


def test_a_chat_template_file_that_is_not_there(llama: Path, tmp_path: Path) -> None:
    template = tmp_path / "chat.jinja"
    assert kinds(check(llama, f"--chat-template {template}")) == ["chat_template_missing"]
    template.write_text("{{ messages }}")
    assert check(llama, f"--chat-template {template}")["problems"] == []
    # a template given inline, or a bare name vLLM may ship, is not judged
    assert check(llama, "--chat-template '{{ messages }}'")["problems"] == []
    assert check(llama, "--chat-template tool_chat_template.jinja")["problems"] == []


@pytest.mark.parametrize(("method", "version", "kind"), [
    ("ngram", "0.32.0", None), ("eagle3", "0.32.0", None),
    ("eagle4", "0.32.0", "problems"),  # no release has it
    ("dflash", "0.10.0", "problems"),  # a later release's: named
    ("eagle3", "0.8.5", "uncertain"),  # before SpeculativeConfig was validated
])
def test_the_speculative_method_against_the_releases(llama: Path, method: str, version: str,
                                                     kind: str | None) -> None:
    spec = json.dumps({"method": method, "num_speculative_tokens": 1})
    body = check(llama, f"--speculative-config {shlex.quote(spec)}", version=version)
    for key in ("problems", "uncertain"):
        assert ("speculative_method_unknown" in kinds(body, key)) is (key == kind)
    if method == "dflash":
        assert "(it is a method of 0." in body["problems"][0]["reason"]


@pytest.mark.parametrize("flags", ["--max_model_len 1k", "--max-model 1k",
                                   "--max-model-len=1k", "--gpu_memory_utilization 0",
                                   "--gpu-memory 0"])
def test_a_flag_is_read_as_the_releases_parser_reads_its_spelling(llama: Path,
                                                                  flags: str) -> None:
    """Found by running the real vLLM 0.32.0 on held-out cases: it takes `--max_model_len`
    and the unique prefix `--max-model` for `--max-model-len` and fails on the value, which
    preflight let pass."""
    assert kinds(check(llama, flags)) in (["max_model_len"], ["invalid_argument"])
    assert check(llama, flags.replace("1k", "256").replace(" 0", " 0.5"))["problems"] == []


def test_tensor_parallel_joined_to_its_short_flag(llama: Path) -> None:
    assert kinds(check(llama, "-tp=3")) == ["tensor_parallel_heads"]
