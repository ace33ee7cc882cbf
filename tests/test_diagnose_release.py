"""The MTP diagnosis judged under the release the log names: the same checkpoint is a gap on
one release and covered on the next, and the ignore-list remedy is applicable only where its
entries were checked to work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from logwatch.core.signatures.library import Library
from logwatch.scan.offline import resolve_inputs, scan_inputs
from logwatch.scan.triage import SnapshotOptions
from tests.conftest import ROOT, SAMPLES

GLM = ROOT / "samples" / "models" / "glm-5.2-quark-mxfp4"
SHARED = r"re:model\.layers\.78\.mlp\.shared_experts\..*"


def glm_model(tmp_path: Path) -> Path:
    """The GLM-5.2 Quark sample with its shared experts excluded too: only the MoE children
    rule (vLLM 0.26.0 on) stands between it and a covered draft."""
    model = tmp_path / "glm"
    shutil.copytree(GLM, model)
    config = json.loads((model / "config.json").read_text())
    config["quantization_config"]["exclude"].append(SHARED)
    (model / "config.json").write_text(json.dumps(config))
    return model


def run(tmp_path: Path, library: Library, version: str) -> dict[str, Any]:
    log = tmp_path / f"vllm-{version}.log"
    log.write_text((SAMPLES / "demo_marlin_and_mtp.log").read_text().replace("0.11.2", version))
    return scan_inputs(resolve_inputs([str(log)]), library, snapshot_options=SnapshotOptions(
        model_dir=str(glm_model(tmp_path)), gpu_capability=90))


def mtp_diagnosis(report: dict[str, Any]) -> dict[str, Any] | None:
    return next((d for d in report["diagnoses"] if d["cause"] == "mtp_ignore_list_gap"), None)


def test_quark_025_gap_and_no_entry_offered(tmp_path: Path, library: Library) -> None:
    diagnosis = mtp_diagnosis(run(tmp_path, library, "0.25.1"))
    assert diagnosis is not None
    assert "model.layers.78.mlp.experts.*.down_proj" in diagnosis["details"][0]
    assert any("rules of vLLM 0.25.1" in d for d in diagnosis["details"])
    fix = next(r for r in diagnosis["remedies"] if r["kind"] == "fix_mtp_ignore_list")
    assert fix["applicable"] is False
    assert "on 0.25.1; it does on 0.26.0-0.33.0: upgrade vLLM there" in fix["why"]


def test_quark_026_covers_the_same_checkpoint(tmp_path: Path, library: Library) -> None:
    report = run(tmp_path, library, "0.26.0")
    assert mtp_diagnosis(report) is None
    assert "mtp_draft_mismatch_unproven" in [d["cause"] for d in report["diagnoses"]]
