"""Diagnosis: sample logs paired with sample model directories and command lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from logwatch.core.signatures.library import Library
from logwatch.scan.offline import resolve_inputs, scan_inputs
from logwatch.scan.triage import SnapshotOptions
from tests.conftest import ROOT, SAMPLES

MODELS = ROOT / "samples" / "models"
UNCOVERED = str(MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered")
COVERED = str(MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-covered")


def triage(log: str | Path, library: Library, **options: Any) -> dict[str, Any]:
    return scan_inputs(resolve_inputs([str(SAMPLES / log)]), library,
                       snapshot_options=SnapshotOptions(**options))


def causes(report: dict[str, Any]) -> list[str]:
    return [d["cause"] for d in report["diagnoses"]]


def remedy(diagnosis: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(r for r in diagnosis["remedies"] if r["kind"] == kind)


def test_both_root_causes_in_order_on_hopper(library: Library) -> None:
    report = triage("demo_marlin_and_mtp.log", library, model_dir=UNCOVERED, gpu_capability=90)
    # newest launch first: the TP=2 restart's MTP mismatch, then the TP=4 start's Marlin error
    assert causes(report)[:2] == ["mtp_ignore_list_gap", "marlin_weight_only_tile"]
    assert [d["launch"] for d in report["diagnoses"][:2]] == [0, 1]
    mtp, marlin = report["diagnoses"][:2]
    assert marlin["config"]["failing_width"] == 640 and marlin["config"]["per_rank"] == 160
    assert any("experts w13 (gate_up) (moe_intermediate_size 320 x 2)" in d
               for d in marlin["details"])
    assert any("Do not edit the model definition" in d for d in marlin["details"])
    assert remedy(marlin, "switch_to_w4a4")["applicable"] is False  # Hopper: no native FP4
    assert "--tensor-parallel-size 1 or 2" in remedy(marlin, "align_tensor_parallel")["summary"]
    # the failing layer is an MoE expert projection: no release pads those (dense FP4 layers
    # are padded from 0.24.0), so upgrading does not help
    upgrade = remedy(marlin, "upgrade_vllm")
    assert upgrade["applicable"] is False and "MoE expert" in upgrade["why"]
    missing = mtp["details"][0]
    for module in ("mtp.fc", "mtp.layers.0.mlp.experts.*.down_proj",
                   "mtp.layers.0.self_attn.q_proj"):
        assert module in missing
    assert remedy(mtp, "fix_mtp_ignore_list")["summary"].startswith("Add re:^mtp\\. to the "
                                                                     "ignore list")
    assert mtp["config"]["suggested_ignore"][-1] == "re:^mtp\\."
    assert mtp["config"]["suggested_ignore"][0] == "lm_head"  # merged, not replaced


def test_on_blackwell_the_w4a4_path_applies(library: Library) -> None:
    report = triage("demo_marlin_and_mtp.log", library, model_dir=UNCOVERED, gpu_capability=100)
    marlin = next(d for d in report["diagnoses"] if d["cause"] == "marlin_weight_only_tile")
    w4a4 = remedy(marlin, "switch_to_w4a4")
    assert w4a4["applicable"] is True and "already W4A4" in w4a4["why"]


def test_each_launch_in_the_log_gets_its_own_snapshot(library: Library) -> None:
    report = triage("demo_marlin_and_mtp.log", library)
    by_signature = {i["signature"]: i["snapshot"] for i in report["incidents"]}
    first, second = by_signature["marlin.repack_tile_n"], \
        by_signature["weights.tensor_size_mismatch"]
    assert first != second
    assert report["snapshots"][first]["launch"]["tensor_parallel_size"] == 4
    assert report["snapshots"][second]["launch"]["tensor_parallel_size"] == 2
    assert report["snapshots"][first]["vllm_version"] == "0.11.2"
    # without the model directory the MTP cause cannot be proven, and says so
    assert "mtp_draft_mismatch_unproven" in causes(report)


def test_a_covered_ignore_list_is_not_blamed(library: Library) -> None:
    report = triage("demo_marlin_and_mtp.log", library, model_dir=COVERED, gpu_capability=90)
    assert "mtp_ignore_list_gap" not in causes(report)
    assert "mtp_draft_mismatch_unproven" in causes(report)


def test_an_override_that_replaced_the_ignore_list(library: Library) -> None:
    cmdline = (f"vllm serve {UNCOVERED} -tp 2 --speculative-config "
               "'{\"method\": \"mtp\", \"num_speculative_tokens\": 2}' --hf-overrides "
               "'{\"quantization_config\": {\"ignore\": [\"lm_head\", \"re:^mtp\\\\.\"]}}'")
    report = triage("mtp_tensor_mismatch_glm_033.log", library, cmdline=cmdline,
                    gpu_capability=90)
    replaced = next(d for d in report["diagnoses"] if d["cause"] == "ignore_list_replaced")
    assert "re:.*mlp.gate$" in replaced["config"]["dropped"]
    assert replaced["signature"] is None


def test_garbage_draft_at_run_time(library: Library) -> None:
    report = triage("mtp_garbage_acceptance.log", library, model_dir=UNCOVERED,
                    gpu_capability=90)
    diag = next(d for d in report["diagnoses"] if d["signature"] == "spec_decode.low_acceptance")
    assert diag["cause"] == "mtp_ignore_list_gap"
    assert diag["title"].startswith("Near-zero acceptance")


def test_marlin_forced_on_a_gpu_with_native_fp4(library: Library) -> None:
    cmdline = f"vllm serve {COVERED} --linear-backend marlin"
    report = triage("healthy_033_startup.log", library, cmdline=cmdline, gpu_capability=100)
    diag = next(d for d in report["diagnoses"] if d["cause"] == "marlin_on_native_fp4")
    assert diag["config"]["forced_by"] == ["--linear-backend marlin"]
    # on Hopper the same warning is expected and explains nothing
    report = triage("healthy_033_startup.log", library, cmdline=cmdline, gpu_capability=90)
    assert "marlin_on_native_fp4" not in causes(report)


def test_implausibly_high_acceptance(library: Library, tmp_path: Path) -> None:
    log = tmp_path / "high.log"
    log.write_text(
        "(APIServer pid=1) INFO 11-29 22:41:10 [metrics.py:101] SpecDecoding metrics: Mean "
        "acceptance length: 2.97, Accepted throughput: 300.00 tokens/s, Drafted throughput: "
        "305.00 tokens/s, Accepted: 2950 tokens, Drafted: 3000 tokens, Per-position acceptance "
        "rate: 0.990, 0.975, Avg Draft acceptance rate: 98.3%\n")
    report = scan_inputs(resolve_inputs([str(log)]), library)
    assert causes(report) == ["implausible_acceptance"]


def test_a_healthy_log_needs_no_diagnosis_but_its_marlin_fp4_path(library: Library) -> None:
    """The 0.33 start-up serves, and picks Marlin for its NVFP4 linear and MoE layers: the
    latent FP4-on-Marlin problem is all there is to say (it was reported healthy, nothing
    more)."""
    diagnoses = triage("healthy_033_startup.log", library)["diagnoses"]
    assert [(d["cause"], d["latent"], d["signature"]) for d in diagnoses] == [
        ("fp4_on_marlin", True, "nvfp4.gemm_backend"), ("fp4_on_marlin", True, "nvfp4.moe_backend")]


def test_unexplained_fatal_incidents_keep_their_signature_explanation(library: Library) -> None:
    report = triage("journald_kv_cache.log", library)
    (diag,) = report["diagnoses"]
    assert diag["cause"] == "memory.kv_cache_too_small"
    assert "max_model_len = 262144" in diag["summary"]


def test_modelopt_nan_scale_is_the_mtp_ignore_list_gap(library: Library) -> None:
    # 0.30+ reports a BF16-stored MTP layer built NVFP4 as a never-loaded (NaN) block scale
    report = triage("modelopt_nan_scale_mtp.log", library,
                    model_dir=str(MODELS / "deepseek-v3-modelopt-nvfp4-legacy"),
                    gpu_capability=100)
    diag = report["diagnoses"][0]
    assert diag["signature"] == "nvfp4.weight_scale_not_loaded"
    assert diag["cause"] == "mtp_ignore_list_gap"
    assert "model.layers.61.mlp.experts.*.down_proj" in diag["details"][0]
    assert remedy(diag, "fix_mtp_ignore_list")["applicable"] is True
