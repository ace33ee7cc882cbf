"""Latent problems: what the snapshot shows will fail that the log has not reached yet, in the
scan's report (JSON and text), `snapshot show`, and the root cause's diagnosis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from logwatch.cli.main import main
from logwatch.core.diagnosis.latent import LATENT_FP4, LATENT_MARLIN, LATENT_MTP, latent_problems
from logwatch.core.quant.marlin_split import aligned_sizes, split_layers, untileable
from logwatch.core.report.text import render_text
from logwatch.core.signatures.library import Library
from logwatch.core.snapshot.model import GpuFacts
from logwatch.host.capture import take_snapshot
from logwatch.scan.offline import resolve_inputs, scan_inputs
from logwatch.scan.triage import SnapshotOptions
from tests.conftest import ROOT, SAMPLES

MODELS = ROOT / "samples" / "models"
UNCOVERED = str(MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered")
COVERED = str(MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-covered")
# by "\n" only: the sample's progress bars carry carriage returns within a line
DEMO_LINES = [line + "\n" for line in
              (SAMPLES / "demo_marlin_and_mtp.log").read_text().split("\n")[:-1]]
MARLIN_LAUNCH = DEMO_LINES[:98]  # the TP=4 start that fails on the Marlin repack
TP2_START = DEMO_LINES[98:101]  # the TP=2 restart's start lines, before it loads anything
TP4_START = DEMO_LINES[:6]  # the TP=4 start's lines, before it loads anything
# The BF16 MTP module groups of the uncovered checkpoint (experts collapsed).
UNCOVERED_MTP = (
    "mtp.fc", "mtp.layers.0.mlp.experts.*.down_proj", "mtp.layers.0.mlp.experts.*.gate_proj",
    "mtp.layers.0.mlp.experts.*.up_proj", "mtp.layers.0.mlp.shared_expert.down_proj",
    "mtp.layers.0.mlp.shared_expert.gate_proj", "mtp.layers.0.mlp.shared_expert.up_proj",
    "mtp.layers.0.self_attn.k_proj", "mtp.layers.0.self_attn.o_proj",
    "mtp.layers.0.self_attn.q_proj", "mtp.layers.0.self_attn.v_proj")
SEED_DIMS = {"hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 2,
             "head_dim": 256, "moe_intermediate_size": 320,
             "shared_expert_intermediate_size": 512}


def scan(tmp_path: Path, lines: list[str], library: Library, **options: Any
         ) -> dict[str, Any]:
    log = tmp_path / "vllm.log"
    log.write_text("".join(lines))
    return scan_inputs(resolve_inputs([str(log)]), library,
                       snapshot_options=SnapshotOptions(**options))


def latent(report: dict[str, Any], launch: int = 0) -> dict[str, dict[str, Any]]:
    return {d["cause"]: d for d in report["diagnoses"]
            if d["latent"] and d["launch"] == launch}


def test_the_marlin_failure_names_the_mtp_modules_that_fail_next(
        tmp_path: Path, library: Library) -> None:
    report = scan(tmp_path, MARLIN_LAUNCH, library, model_dir=UNCOVERED, gpu_capability=90)
    root = next(d for d in report["diagnoses"] if d["cause"] == "marlin_weight_only_tile")
    assert root["config"]["latent"] == [LATENT_MTP]
    assert "11 BF16 MTP module group(s) missing from the ignore list" in root["summary"]
    ahead = next(d for d in root["details"] if d.startswith("Next failure after this one"))
    assert all(name in ahead for name in UNCOVERED_MTP)
    kinds = [r["kind"] for r in root["remedies"]]
    assert kinds[0] == "switch_to_w4a4" and "fix_mtp_ignore_list" in kinds  # both, together
    fix = next(r for r in root["remedies"] if r["kind"] == "fix_mtp_ignore_list")
    assert "re:^mtp\\." in fix["summary"] and fix["applicable"] is True
    align = next(r for r in root["remedies"] if r["kind"] == "align_tensor_parallel")
    assert "1 or 2" in align["summary"] and "every layer" in align["why"]  # all layers checked

    problems = latent(report)
    assert set(problems) == {LATENT_MTP}  # Marlin and FP4: the log has reached them
    assert tuple(problems[LATENT_MTP]["config"]["uncovered_bf16"]) == UNCOVERED_MTP
    assert report["launches"][0]["latent_problems"] == [
        report["diagnoses"].index(problems[LATENT_MTP])]

    text = render_text(report)
    assert "1 latent problem(s) in the configuration, after this failure is fixed" in text
    section = text[text.index("LATENT PROBLEMS"):]
    assert all(name in section for name in UNCOVERED_MTP)
    assert text.index("\nDIAGNOSIS") < text.index("\nLATENT PROBLEMS")


def test_the_whole_demo_keeps_the_mtp_modules_on_the_marlin_launch(library: Library) -> None:
    report = scan_inputs(resolve_inputs([str(SAMPLES / "demo_marlin_and_mtp.log")]), library,
                         snapshot_options=SnapshotOptions(model_dir=UNCOVERED,
                                                          gpu_capability=90))
    marlin = next(d for d in report["diagnoses"] if d["cause"] == "marlin_weight_only_tile")
    assert marlin["launch"] == 1 and marlin["config"]["latent"] == [LATENT_MTP]
    assert tuple(latent(report, 1)[LATENT_MTP]["config"]["uncovered_bf16"]) == UNCOVERED_MTP
    assert LATENT_MTP not in latent(report, 0)  # the TP=2 restart met it: no longer latent
    earlier = render_text(report).split("EARLIER LAUNCHES WERE DIAGNOSED")[1]
    assert "(launch 1): A 640-wide layer split 4 ways gives 160 per rank, not a multiple of " \
        "Marlin's 64. Also ahead: 11 BF16 MTP module group(s) missing from the ignore list" \
        in " ".join(earlier.split())


def test_a_healthy_so_far_launch_with_an_uncovered_model_is_not_an_all_clear(
        tmp_path: Path, library: Library) -> None:
    report = scan(tmp_path, TP2_START, library, model_dir=UNCOVERED, gpu_capability=90)
    assert report["root_cause"] is None
    problems = latent(report)
    assert set(problems) == {LATENT_MTP, LATENT_FP4}  # TP=2 tiles
    assert problems[LATENT_MTP]["config"]["mtp_in_use"] is True
    assert tuple(problems[LATENT_MTP]["config"]["uncovered_bf16"]) == UNCOVERED_MTP
    text = " ".join(render_text(report).split())  # wrapped at 80 columns
    assert "Not an all-clear: 2 latent problem(s), which have not failed in this log yet" \
        in text
    assert "LATENT PROBLEMS" in text and "mtp.layers.0.self_attn.q_proj" in text


def test_a_tp4_start_on_hopper_has_the_marlin_split_ahead(tmp_path: Path,
                                                          library: Library) -> None:
    report = scan(tmp_path, TP4_START, library, model_dir=UNCOVERED, gpu_capability=90)
    marlin = latent(report)[LATENT_MARLIN]
    assert marlin["config"]["layers"] == ["experts w13 (gate_up)"]
    assert marlin["config"]["aligned_tensor_parallel"] == [1, 2]
    assert "weight repack fails at start-up" in marlin["summary"]
    on_blackwell = scan(tmp_path, TP4_START, library, model_dir=UNCOVERED, gpu_capability=100)
    assert set(latent(on_blackwell)) == {LATENT_MTP}  # native FP4: no Marlin at all


@pytest.mark.parametrize("lines", [TP2_START, TP4_START, MARLIN_LAUNCH])
def test_a_covered_model_on_blackwell_has_no_latent_problem(
        tmp_path: Path, library: Library, lines: list[str]) -> None:
    report = scan(tmp_path, lines, library, model_dir=COVERED, gpu_capability=100)
    assert latent(report) == {}
    assert "LATENT" not in render_text(report)


def test_a_covered_model_has_no_mtp_problem_on_hopper(tmp_path: Path,
                                                      library: Library) -> None:
    report = scan(tmp_path, TP2_START, library, model_dir=COVERED, gpu_capability=90)
    assert set(latent(report)) == {LATENT_FP4}  # only the missing native FP4


def test_a_launch_without_mtp_never_builds_the_draft(tmp_path: Path,
                                                     library: Library) -> None:
    lines = [line.replace(", 'speculative_config': {'method': 'mtp', "
                          "'num_speculative_tokens': 2}", "") for line in TP2_START[:2]]
    assert "speculative_config" not in lines[1]
    report = scan(tmp_path, lines, library, model_dir=UNCOVERED, gpu_capability=100)
    assert latent(report) == {}


def test_snapshot_show_lists_latent_problems(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "show", "--model-dir", UNCOVERED, "--gpu-capability", "9.0"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # unwrapped
    assert "LATENT: MTP draft modules the ignore list does not cover: If this checkpoint " \
        "is served with MTP speculative decoding" in text
    assert all(name in text for name in UNCOVERED_MTP)
    assert "LATENT: FP4 checkpoint on a GPU without native FP4" in text
    assert main(["snapshot", "show", "--model-dir", UNCOVERED, "--gpu-capability", "9.0",
                 "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    mtp = next(d for d in body["latent_problems"] if d["cause"] == LATENT_MTP)
    assert tuple(mtp["config"]["uncovered_bf16"]) == UNCOVERED_MTP
    assert mtp["config"]["mtp_in_use"] is None  # no launch given: it depends on the launch
    assert main(["snapshot", "show", "--model-dir", COVERED, "--gpu-capability", "10.0",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["latent_problems"] == []


def test_marlin_splits_follow_vllms_rules() -> None:
    at4 = {layer.name: (layer.n, layer.k) for layer in split_layers(SEED_DIMS, 4)}
    assert at4["experts w13 (gate_up)"] == (160, 2048)
    assert at4["experts w2 (down)"] == (2048, 80)
    assert at4["qkv_proj"] == ((4 + 2 * 1) * 256, 2048)  # 2 KV heads over 4 ranks: replicated
    bad = untileable(SEED_DIMS, 4, "W4A4_NVFP4", 16, "0.33.0")
    assert [b.layer.name for b in bad] == ["experts w13 (gate_up)"]  # experts: never padded
    assert aligned_sizes(SEED_DIMS, "W4A4_NVFP4", 16, "0.11.2") == [1, 2]
    dense = {"hidden_size": 8192, "intermediate_size": 29568}  # Qwen2.5-72B
    assert [b.layer.name for b in untileable(dense, 8, "W8A16_FP8", None, "0.23.0")] == [
        "mlp gate_up_proj"]  # 7392 per rank
    assert untileable(dense, 8, "W8A16_FP8", None, "0.24.0") == []  # padded from 0.24.0
    refused = untileable(dense, 8, "GPTQ", 128, None)
    assert {b.layer.name for b in refused} == {"mlp gate_up_proj", "mlp down_proj"}
    assert untileable(dense, 1, "GPTQ", 128, None) == []


def test_latent_problems_do_not_change_the_exit_status(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "vllm.log"
    log.write_text("".join(TP2_START))
    assert main(["scan", str(log), "--model-dir", UNCOVERED, "--gpu-capability", "9.0"]) == 0
    assert "\nLATENT PROBLEMS" in capsys.readouterr().out


def test_quark_mxfp4_is_emulated_not_sent_through_marlin() -> None:
    """On NVIDIA GPUs vLLM emulates Quark's OCP MX layers whatever the compute capability
    (`supports_mx` is ROCm-only): no Marlin split or missing-native-FP4 problem is claimed."""
    snapshot = take_snapshot(argv=f"vllm serve {MODELS / 'glm-5.2-quark-mxfp4'} -tp 8",
                             gpu=GpuFacts(capability=90))
    assert snapshot.model is not None and snapshot.model.quant.method == "quark"
    assert {d.cause for d in latent_problems(snapshot)} & {LATENT_FP4, LATENT_MARLIN} == set()


def test_an_unknown_gpu_makes_the_marlin_split_conditional(tmp_path: Path,
                                                           library: Library) -> None:
    marlin = latent(scan(tmp_path, TP4_START, library, model_dir=UNCOVERED))[LATENT_MARLIN]
    assert marlin["config"]["marlin_path"] is None
    assert marlin["summary"].startswith("If this GPU has no native kernel for the scheme")
    assert marlin["confidence"] < 0.9


def test_an_integer_checkpoint_marlin_refuses_falls_back_rather_than_fails() -> None:
    snapshot = take_snapshot(argv=f"vllm serve {MODELS / 'qwen2.5-72b-gptq-int4'} -tp 8",
                             gpu=GpuFacts(capability=90))
    marlin = next(d for d in latent_problems(snapshot) if d.cause == LATENT_MARLIN)
    assert "falls back to a slower kernel" in marlin.summary
    assert marlin.config["layers"] == ["mlp gate_up_proj", "mlp down_proj"]
    assert marlin.config["aligned_tensor_parallel"] == [1]
