"""`logwatch preflight` on the sample model directories: the seed's two failures predicted on its
configuration (Marlin at TP 4 on a 9.0 GPU, BF16 MTP modules not ignored), the corrected launch
passing, W4A4 refused below 10.0, unknown flags and variables named per release, and the README's
examples run as written."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from logwatch.core.diagnosis.preflight import predict
from logwatch.core.snapshot.model import GpuFacts
from logwatch.core.snapshot.vllm_cli import flag_accepted, normalised_flag
from logwatch.host.capture import take_snapshot
from logwatch.host.vllm_cli_data import DATA_FILE
from tests.conftest import ROOT
from tests.inprocess import logwatch_text

MODELS = ROOT / "samples" / "models"
UNCOVERED = MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered"
COVERED = MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-covered"
MTP = "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'"


def preflight(model: Path, flags: str, *extra: str, env: str = ""):  # type: ignore[no-untyped-def]
    cmdline = f"{env} vllm serve {shlex.quote(str(model))} {flags}".strip()
    return logwatch_text("preflight", "--model-dir", str(model), "--cmdline", cmdline, *extra)


def kinds(done) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(p["kind"] for p in json.loads(done.stdout)["problems"])


def test_the_seed_configuration_fails_on_marlin_and_the_mtp_ignore_list() -> None:
    done = preflight(UNCOVERED, f"-tp 4 {MTP}", "--gpu-capability", "9.0",
                     "--vllm-version", "0.26.0")
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "N = 160 per rank is not a multiple of tile_n_size 64" in out  # moe 320 / 4
    assert "Use --tensor-parallel-size 1 or 2" in out
    for module in ("mtp.fc", "mtp.layers.0.self_attn.q_proj",
                   "mtp.layers.0.mlp.experts.*.down_proj"):
        assert module in out
    assert "re:^mtp\\." in out  # the entry checked to cover them under 0.26.0's rules
    assert "3 failure(s) predicted" in out
    as_json = preflight(UNCOVERED, f"-tp 4 {MTP}", "--gpu-capability", "90",
                        "--vllm-version", "0.26.0", "--json")
    assert as_json.returncode == 1
    assert kinds(as_json) == ["fp4_without_native_kernels", "marlin_tile", "mtp_ignore_list_gap"]
    marlin = next(p for p in json.loads(as_json.stdout)["problems"]
                  if p["kind"] == "marlin_tile")
    assert marlin["config"]["tensor_parallel_size"] == 4
    assert marlin["config"]["marlin_path"] is True


def test_the_corrected_launch_passes_w4a4_on_a_10_0_gpu() -> None:
    done = preflight(COVERED, f"-tp 4 {MTP}", "--gpu-capability", "10.0", "--gpu-name", "B200",
                     "--vllm-version", "0.26.0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "a clean start predicted" in done.stdout
    assert "FAIL" not in done.stdout
    assert "B200 10.0" in done.stdout


def test_w4a4_on_a_9_0_gpu_fails_even_where_every_layer_tiles() -> None:
    done = preflight(COVERED, f"-tp 2 {MTP}", "--gpu-capability", "9.0", "--gpu-name", "H200",
                     "--vllm-version", "0.26.0", "--json")
    assert done.returncode == 1
    assert kinds(done) == ["fp4_without_native_kernels"]
    body = json.loads(done.stdout)
    assert body["gpu"]["name"] == "H200" and body["gpu"]["capability"] == 90


def test_mtp_is_only_a_problem_when_the_launch_uses_it() -> None:
    done = preflight(UNCOVERED, "-tp 2", "--gpu-capability", "10.0", "--vllm-version", "0.26.0")
    assert done.returncode == 0, done.stdout


def test_an_unknown_flag_on_a_known_release_is_named_with_a_suggestion() -> None:
    done = preflight(COVERED, "--tensor-paralel-size 2", "--gpu-capability", "10.0",
                     "--vllm-version", "0.26.0")
    assert done.returncode == 1
    assert "--tensor-paralel-size: not a flag of vLLM 0.26.0 (in no extracted release)" \
        in done.stdout
    assert "did you mean '--tensor-parallel-size'?" in done.stdout


def test_a_flag_of_later_releases_names_where_it_exists() -> None:
    done = preflight(COVERED, "--linear-backend cutlass", "--gpu-capability", "10.0",
                     "--vllm-version", "0.17.1", "--json")
    assert done.returncode == 1
    [problem] = json.loads(done.stdout)["problems"]
    assert problem["kind"] == "unknown_flag"
    assert problem["config"] == {"name": "--linear-backend", "vllm_version": "0.17.1",
                                 "known_in": ["0.22.1-0.33.0"]}
    assert problem["fixes"] == []  # where it exists says more than a near spelling would
    assert preflight(COVERED, "--linear-backend cutlass", "--gpu-capability", "10.0",
                     "--vllm-version", "0.33.0").returncode == 0


def test_the_spellings_vllms_parser_accepts_pass() -> None:
    flags = ("--tensor_parallel_size=2 --no-enable-prefix-caching --enable_chunked_prefill "
             "--max-num-seq 4 --compilation-config.mode 3 -q compressed-tensors -O3 "
             f"--gpu-memory-utilization=0.9 {MTP}")
    done = preflight(COVERED, flags, "--gpu-capability", "10.0", "--vllm-version", "0.26.0")
    assert done.returncode == 0, done.stdout


def test_disable_for_enable_only_from_the_release_that_pairs_them() -> None:
    # --disable-log-requests left the parser after 0.16.0; 0.33.0's EnableDisableAction
    # accepts it again as the inverse of --enable-log-requests
    old = preflight(COVERED, "--disable-log-requests", "--gpu-capability", "10.0",
                    "--vllm-version", "0.16.0")
    gone = preflight(COVERED, "--disable-log-requests", "--gpu-capability", "10.0",
                     "--vllm-version", "0.26.0")
    paired = preflight(COVERED, "--disable-log-requests", "--gpu-capability", "10.0",
                       "--vllm-version", "0.33.0")
    assert (old.returncode, gone.returncode, paired.returncode) == (0, 1, 0)


def test_environment_variables_per_release() -> None:
    env = "VLLM_NVFP4_GEMM_BACKEND=cutlass VLLM_LOGGING_LEVEL=DEBUG"
    known = preflight(COVERED, "", "--gpu-capability", "10.0", "--vllm-version", "0.23.0",
                      env=env)
    assert known.returncode == 0, known.stdout
    gone = preflight(COVERED, "", "--gpu-capability", "10.0", "--vllm-version", "0.26.0",
                     "--json", env="env " + env)
    assert gone.returncode == 0  # vLLM starts: the variable is only not read
    [problem] = [p for p in json.loads(gone.stdout)["uncertain"] if p["kind"] == "unknown_env"]
    assert problem["config"]["name"] == "VLLM_NVFP4_GEMM_BACKEND"
    assert problem["config"]["known_in"] == ["0.11.1-0.23.0"]


def test_a_release_outside_the_extracted_ones_is_a_note_never_a_failure() -> None:
    done = preflight(COVERED, "--no-such-flag", "--gpu-capability", "10.0",
                     "--vllm-version", "0.15.0", "--json")
    assert done.returncode == 0
    body = json.loads(done.stdout)
    assert body["clean"] is True
    assert any("0.15.0 is not among the releases" in n for n in body["notes"])


def test_an_unknown_release_makes_release_dependent_predictions_possible_not_certain() -> None:
    snapshot = take_snapshot(argv=f"vllm serve {UNCOVERED} -tp 4 {MTP}",
                             model_dir=str(UNCOVERED), gpu=GpuFacts(capability=90))
    prediction = predict(replace(snapshot, vllm_version=None), None)
    assert [p.kind for p in prediction.uncertain] == ["marlin_tile"]  # 0.33 pads tiles
    # uncovered on every release that runs Qwen3.6, and FP4 needs 10.0 on any release
    assert sorted(p.kind for p in prediction.problems) == ["fp4_without_native_kernels",
                                                           "mtp_ignore_list_gap"]
    assert any("release unknown" in n for n in prediction.notes) or \
        any("no vocabulary" in n for n in prediction.notes)


def test_json_shape() -> None:
    done = preflight(UNCOVERED, f"-tp 8 {MTP}", "--gpu-capability", "12.0",
                     "--vllm-version", "0.33.0", "--json")
    body = json.loads(done.stdout)
    assert set(body) == {"snapshot", "vllm_version", "gpu", "clean", "problems", "uncertain",
                         "notes", "kernel_path"}
    assert set(body["kernel_path"]) == {"scheme", "path", "summary", "advice"}
    assert body["gpu"]["capability"] == 120 and body["vllm_version"] == "0.33.0"
    for problem in body["problems"] + body["uncertain"]:
        assert set(problem) == {"kind", "title", "reason", "details", "config", "fixes",
                                "stage", "message", "signature", "evidence"}
    assert done.returncode == (1 if body["problems"] else 0)


@pytest.mark.parametrize(("args", "message"), [
    (["--model-dir", "/nonexistent/model", "--cmdline", "vllm serve x"],
     "--model-dir /nonexistent/model: not a directory"),
    (["--model-dir", str(COVERED), "--cmdline", "python train.py"], "not a vLLM server"),
    (["--model-dir", str(COVERED), "--cmdline", "vllm serve 'x"], "cannot split"),
    (["--model-dir", str(COVERED), "--cmdline", "vllm serve x", "--vllm-version", "latest"],
     "--vllm-version 'latest'"),
    (["--model-dir", str(COVERED), "--cmdline", "vllm serve x", "--gpu-capability", "hopper"],
     "--gpu-capability 'hopper'"),
    (["--model-dir", str(COVERED)], "one of the arguments --cmdline --unit --user-unit"),
])
def test_bad_input_is_a_clear_error(args: list[str], message: str) -> None:
    done = logwatch_text("preflight", *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_flag_spelling_rules() -> None:
    known = frozenset({"--enable-prefix-caching", "--compilation-config", "-tp",
                       "--max-num-seqs", "--max-num-batched-tokens"})
    assert normalised_flag("--enable_prefix_caching=1") == "--enable-prefix-caching"
    assert normalised_flag("--compilation_config.cudagraph_mode") == \
        "--compilation-config.cudagraph_mode"  # past the first `.`: a key, kept as written
    assert flag_accepted("--no-enable-prefix-caching", known)
    assert flag_accepted("--compilation-config.level", known)
    assert flag_accepted("--max-num", known)  # an abbreviation (argparse allow_abbrev)
    assert not flag_accepted("--disable-prefix-caching", known)
    assert flag_accepted("--disable-prefix-caching", known, enable_disable=True)
    assert not flag_accepted("-sc", known) and flag_accepted("-tp", known)
    assert not flag_accepted("--prefix-caching", known)


def test_the_data_file_is_shipped_inside_the_package() -> None:
    assert DATA_FILE.is_relative_to(ROOT / "logwatch")


def test_readme_examples_run_as_written() -> None:
    lines = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
             if line.startswith("logwatch preflight ")]
    assert len(lines) >= 3
    for line in lines:
        command, _, comment = line.partition("   # exit ")
        expected = int(comment.split(":")[0])
        done = subprocess.run([sys.executable, "-m", "logwatch", *shlex.split(command)[1:]],
                              cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == expected, (line, done.stdout, done.stderr)


def test_a_damaged_data_file_is_named(tmp_path: Path) -> None:
    from logwatch.cli.preflight import InputError, load_vocabulary

    bad = tmp_path / "vllm_cli.json"
    bad.write_text('{"releases": ["0.26.0"], "flags": {"--x": ["zero"]}, "env": {}}')
    with pytest.raises(InputError, match="unreadable release range 'zero'"):
        load_vocabulary(bad)
    bad.write_text("[1]")
    with pytest.raises(InputError, match=str(bad)):
        load_vocabulary(bad)
