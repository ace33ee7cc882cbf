"""`vllm serve` command lines: every form parses, renders back verbatim, and edits cleanly."""

from __future__ import annotations

import pytest

from logwatch.core.snapshot.argv import ArgvError, parse_launch

MTP = '{"method": "mtp", "num_speculative_tokens": 2}'


@pytest.mark.parametrize(
    "argv",
    [
        ["vllm", "serve", "/models/q", "-tp", "4", "--speculative-config", MTP],
        ["/opt/venv/bin/vllm", "serve", "--model", "/models/q", "--tensor-parallel-size=4",
         "--enforce-eager", "--max-model-len", "32768"],
        ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/q",
         "--quantization", "compressed-tensors", "--port", "8000"],
        ["python", "-m", "vllm.entrypoints.cli.main", "serve", "/models/q", "-sc", MTP],
        ["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "/models/q"],  # /proc, shebang
        ["vllm", "serve", "/models/q", "--hf-overrides",
         '{"quantization_config": {"ignore": ["lm_head"]}}', "--trust-remote-code"],
    ],
)
def test_parse_and_render_back_verbatim(argv: list[str]) -> None:
    spec = parse_launch(argv)
    assert spec.argv() == argv
    assert spec.model == "/models/q"
    assert not spec.problems


def test_typed_fields_and_short_flags() -> None:
    spec = parse_launch(["vllm", "serve", "/m", "-tp", "4", "-pp", "2", "-dp", "2", "-q",
                         "modelopt_fp4", "--gpu-memory-utilization", "0.85", "--kv-cache-dtype",
                         "fp8", "--linear-backend", "marlin", "--moe-backend=flashinfer_cutlass",
                         "-sc", MTP])
    assert (spec.tensor_parallel_size, spec.pipeline_parallel_size,
            spec.data_parallel_size) == (4, 2, 2)
    assert spec.quantization == "modelopt_fp4"
    assert spec.gpu_memory_utilization == 0.85
    assert (spec.kv_cache_dtype, spec.linear_backend, spec.moe_backend) == (
        "fp8", "marlin", "flashinfer_cutlass")
    assert spec.speculative_config == {"method": "mtp", "num_speculative_tokens": 2}
    assert spec.uses_mtp


def test_spec_shorthands_merge_into_the_speculative_config() -> None:
    spec = parse_launch("vllm serve /m --spec-method qwen3_next_mtp --spec-tokens 3")
    assert spec.speculative_config == {"method": "qwen3_next_mtp", "num_speculative_tokens": 3}
    assert spec.uses_mtp
    assert not parse_launch("vllm serve /m").uses_mtp


def test_editing_keeps_spelling_and_order() -> None:
    spec = parse_launch("vllm serve /m -tp 4 --port 8000")
    assert spec.with_option("--tensor-parallel-size", "2").argv() == [
        "vllm", "serve", "/m", "-tp", "2", "--port", "8000"]
    assert spec.with_option("--linear-backend", "flashinfer_cutlass").argv()[-2:] == [
        "--linear-backend", "flashinfer_cutlass"]
    assert "-tp" not in spec.without_option("--tensor-parallel-size").argv()


def test_last_occurrence_wins_like_argparse() -> None:
    assert parse_launch("vllm serve /m -tp 2 --tensor-parallel-size 8").tensor_parallel_size == 8


@pytest.mark.parametrize("argv", ["python train.py --lr 3", "bash -c 'vllm serve x'", ""])
def test_not_a_vllm_command_line(argv: str) -> None:
    with pytest.raises(ArgvError):
        parse_launch(argv)


def test_malformed_values_are_problems_not_crashes() -> None:
    spec = parse_launch(["vllm", "serve", "--speculative-config", "{not json", "-tp", "x"])
    assert spec.speculative_config is None
    assert spec.tensor_parallel_size == 1
    assert any("--speculative-config is not a JSON object" in p for p in spec.problems)
    assert any("no model given" in p for p in spec.problems)
    with pytest.raises(ArgvError, match="cannot split"):
        parse_launch("vllm serve '/m")


def test_a_short_flag_joined_to_its_value() -> None:
    """argparse takes `-tp=4` as `-tp 4` (a registered option string before `=`): read as
    tensor-parallel 1 before (found by an adversarial review of preflight), and written back
    as it was given."""
    spec = parse_launch(["vllm", "serve", "/m", "-tp=4", "-q=fp8"])
    assert spec.tensor_parallel_size == 4 and spec.quantization == "fp8"
    assert spec.argv() == ["vllm", "serve", "/m", "-tp=4", "-q=fp8"]
