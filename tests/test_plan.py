"""Plans: the corrected launch for the seed's two failures, checked by reading the result back.

A plan is built from the sample model directories (samples/models/), applied to a real parsed
argv, and the configuration it leads to is read again the way a launch reads it: the W4A4
variant on a GPU with native FP4, an ignore list that covers the MTP draft under the
release's rules, the release's own backend switches, and no latent problem left.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from logwatch.core.diagnosis.latent import latent_problems
from logwatch.core.diagnosis.model import Diagnosis
from logwatch.core.quant.ignore_rules import parse_release
from logwatch.core.remedy.fp4_backend import fp4_switches
from logwatch.core.remedy.plan import Launch, Overlay, apply_plan, merge_ignore_list, plan_relaunch
from logwatch.core.snapshot.argv import parse_launch
from logwatch.core.snapshot.model import GpuFacts, Snapshot
from logwatch.host.capture import take_snapshot
from logwatch.host.overlay import OverlayError, make_overlay, remove_overlay
from logwatch.host.variants import variant_candidates
from logwatch.host.vllm_cli_data import shipped_vocabulary
from tests.conftest import SAMPLES

MODELS = SAMPLES.parent / "models"
A16 = "qwen3.6-35b-a3b-nvfp4a16"  # weight-only NVFP4, the seed's checkpoint
W4A4_COVERED = "qwen3.6-35b-a3b-nvfp4-mtp-covered"
W4A4_UNCOVERED = "qwen3.6-35b-a3b-nvfp4-mtp-uncovered"
SPEC = '{"method": "mtp", "num_speculative_tokens": 2}'
ROOT = Path(__file__).resolve().parent.parent


def snapshot(model: Path, capability: int | None, version: str | None = "0.33.0",
             tp: int = 4) -> Snapshot:
    argv = ["vllm", "serve", str(model), "-tp", str(tp), "--speculative-config", SPEC]
    snap = take_snapshot(argv=argv, model_dir=str(model),
                         gpu=GpuFacts("GPU", tp, capability=capability, source="given"))
    return replace(snap, vllm_version=version)


def marlin_failure() -> Diagnosis:
    """What diagnose() says of the seed's Marlin tile error (the cause is what plans read)."""
    return Diagnosis("marlin_weight_only_tile", "Weight-only Marlin cannot tile this layer "
                     "split", "marlin.repack_tile_n", "640 split 4 ways gives 160 per rank.")


def models_dir(tmp_path: Path, *names: str) -> Path:
    """A models/ folder holding copies of these sample directories (and nothing else)."""
    root = tmp_path / "models"
    for name in names:
        shutil.copytree(MODELS / name, root / name)
    return root


def relaunched(plan_dir: Path, launch: Launch, overlay_dir: str | None,
               capability: int, version: str) -> Snapshot:
    """The configuration the corrected argv runs, read as a launch reads it."""
    model = launch.spec.model
    assert model is not None
    snap = take_snapshot(argv=launch.spec.argv(), env=launch.env, model_dir=model,
                         gpu=GpuFacts("GPU", 4, capability=capability, source="given"))
    return replace(snap, vllm_version=version)


def test_the_seed_on_a_b200_switches_to_the_w4a4_variant_in_one_relaunch(
        tmp_path: Path) -> None:
    """NVFP4A16 failing on Marlin, MTP on: the plan serves the W4A4 variant beside it through
    FlashInfer CUTLASS flags (0.33.0 has them), keeps the served name, and the configuration
    it leads to has no problem left."""
    root = models_dir(tmp_path, A16, W4A4_COVERED, "deepseek-v3-modelopt-nvfp4-legacy")
    snap = snapshot(root / A16, 100)
    plan = plan_relaunch([marlin_failure(), *latent_problems(snap)], snap,
                         variant_candidates(str(root / A16)), vocab=shipped_vocabulary())
    assert plan is not None and plan.startable, plan
    kinds = {(c.kind, c.name): c.value for c in plan.changes}
    assert kinds[("model", "model")] == str(root / W4A4_COVERED)
    assert kinds[("flag", "--linear-backend")] == "flashinfer_cutlass"
    assert kinds[("flag", "--moe-backend")] == "flashinfer_cutlass"  # an MoE model
    assert plan.overlay is None  # the variant's ignore list covers its MTP draft already
    operator = parse_launch(["vllm", "serve", "/srv/models/current", "-tp", "4",
                           "--speculative-config", SPEC])
    after = apply_plan(plan, Launch(operator))
    argv = after.spec.argv()
    assert argv[:3] == ["vllm", "serve", str(root / W4A4_COVERED)]
    assert argv[argv.index("--served-model-name") + 1] == "/srv/models/current"
    assert after.spec.tensor_parallel_size == 4 and after.spec.uses_mtp
    new = relaunched(tmp_path, after, None, 100, "0.33.0")
    assert new.model is not None and new.model.quant.scheme == "W4A4_NVFP4"
    assert latent_problems(new) == []


def test_without_a_covered_variant_the_ignore_list_is_merged_in_an_overlay(
        tmp_path: Path) -> None:
    """Only a W4A4 variant whose MTP draft is not covered: the plan serves it through an
    overlay whose ignore list keeps every existing entry and adds the checked ones."""
    root = models_dir(tmp_path, A16, W4A4_UNCOVERED)
    snap = snapshot(root / A16, 100)
    plan = plan_relaunch([marlin_failure()], snap, variant_candidates(str(root / A16)))
    assert plan is not None and plan.startable, plan
    overlay = plan.overlay
    assert overlay is not None and overlay.model_dir == str(root / W4A4_UNCOVERED)
    config = json.loads((root / W4A4_UNCOVERED / overlay.file).read_text())
    before = config["quantization_config"][overlay.key]
    assert list(overlay.merged[:len(before)]) == before and overlay.entries
    source_files = {e.name: e.read_bytes() for e in (root / W4A4_UNCOVERED).iterdir()}
    laid = make_overlay(tmp_path / "state", plan)
    assert make_overlay(tmp_path / "state", plan) == laid  # made once
    assert {e.name: e.read_bytes() for e in (root / W4A4_UNCOVERED).iterdir()} == source_files
    assert all((laid / name).is_symlink() for name in source_files if name != overlay.file)
    after = apply_plan(plan, Launch(parse_launch(["vllm", "serve", str(root / A16), "-tp", "4",
                                                "--speculative-config", SPEC])), str(laid))
    assert after.spec.model == str(laid)
    new = relaunched(tmp_path, after, str(laid), 100, "0.33.0")
    assert new.model is not None and new.model.mtp is not None
    assert new.model.mtp.uncovered_at(parse_release("0.33.0")) == ()
    assert latent_problems(new) == []
    assert remove_overlay(tmp_path / "state", plan) and not laid.exists()
    assert {e.name: e.read_bytes() for e in (root / W4A4_UNCOVERED).iterdir()} == source_files


def test_below_compute_capability_10_there_is_no_w4a4_plan(tmp_path: Path) -> None:
    """On a 9.0 GPU a W4A4 checkpoint falls back to Marlin too: refused, with what else may
    work (an aligned tensor-parallel size), never startable."""
    root = models_dir(tmp_path, A16, W4A4_COVERED)
    snap = snapshot(root / A16, 90)
    plan = plan_relaunch([*latent_problems(snap), marlin_failure()], snap,
                         variant_candidates(str(root / A16)))
    assert plan is not None and not plan.startable
    assert any("9.0 has no native FP4" in r for r in plan.refused)
    assert all(c.kind != "model" or c.value != str(root / W4A4_COVERED) for c in plan.changes)


def test_no_variant_of_the_same_model_is_refused_with_the_reasons(tmp_path: Path) -> None:
    root = models_dir(tmp_path, A16, "deepseek-v3-modelopt-nvfp4-legacy", "qwen3-32b-w4a16")
    snap = snapshot(root / A16, 100)
    plan = plan_relaunch([marlin_failure()], snap, variant_candidates(str(root / A16)))
    assert plan is not None and not plan.startable
    (reason,) = [r for r in plan.refused if "no W4A4 NVFP4 variant" in r]
    assert "deepseek-v3-modelopt-nvfp4-legacy: another model" in reason
    assert "qwen3-32b-w4a16: W4A16, not W4A4 NVFP4" in reason


@pytest.mark.parametrize(("version", "moe", "expected"), [
    ("0.11.2", True, [("env", "VLLM_NVFP4_GEMM_BACKEND"), ("env", "VLLM_USE_FLASHINFER_MOE_FP4")]),
    ("0.14.1", True, [("env", "VLLM_NVFP4_GEMM_BACKEND"), ("env", "VLLM_USE_FLASHINFER_MOE_FP4")]),
    ("0.20.2", True, [("env", "VLLM_NVFP4_GEMM_BACKEND"), ("flag", "--moe-backend")]),
    ("0.22.1", True, [("flag", "--linear-backend"), ("flag", "--moe-backend")]),
    ("0.33.0", False, [("flag", "--linear-backend")]),
])
def test_backend_switches_are_the_releases_own(version: str, moe: bool,
                                               expected: list[tuple[str, str]]) -> None:
    """Chosen from the flags and variables extracted from each release's sources: a flag
    where the release has it, else its variable (0.17.1-0.20.2 have --moe-backend but not
    --linear-backend; 0.25.1 on have no variables)."""
    switches, notes = fp4_switches(parse_release(version), moe, shipped_vocabulary())
    assert [(s.kind, s.name) for s in switches] == expected
    assert notes == []
    vocab = shipped_vocabulary()
    assert vocab is not None
    for switch in switches:  # never a switch the release does not know
        known = vocab.flags_at if switch.kind == "flag" else vocab.env_at
        assert switch.name in known(parse_release(version))  # type: ignore[arg-type]


def test_an_unknown_release_sets_no_backend_switch_and_says_so() -> None:
    switches, notes = fp4_switches(None, True, shipped_vocabulary())
    assert switches == [] and "release unknown" in notes[0]
    switches, notes = fp4_switches(parse_release("0.40.0"), True, shipped_vocabulary())
    assert [s.kind for s in switches] == ["flag", "flag"] and "0.33.0 are assumed" in notes[0]
    switches, notes = fp4_switches(parse_release("0.33.0"), True, None)
    assert switches == [] and "could not be read" in notes[0]


def test_modelopt_and_gptq_lists_are_merged_where_each_method_reads_them() -> None:
    """ModelOpt nests its list under `quantization` in hf_quant_config.json; GPTQ excludes
    with `-:` keys of `dynamic`, put first so no positive key shadows them."""
    modelopt = {"producer": {"name": "modelopt"},
                "quantization": {"quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}}
    merged = merge_ignore_list(modelopt, Overlay("/m", "hf_quant_config.json",
                                                 "exclude_modules", ("mtp*",), ()))
    assert merged["quantization"]["exclude_modules"] == ["lm_head", "mtp*"]
    assert modelopt["quantization"]["exclude_modules"] == ["lm_head"]  # not edited in place
    gptq = {"quantization_config": {"quant_method": "gptq", "dynamic": {"+:x": {"bits": 8}}}}
    merged = merge_ignore_list(gptq, Overlay("/m", "config.json", "dynamic",
                                             (r"-:^mtp\.",), ()))
    assert list(merged["quantization_config"]["dynamic"]) == [r"-:^mtp\.", "+:x"]


def test_scan_prints_the_plan_beside_the_report(tmp_path: Path) -> None:
    """`logwatch scan LOG --model-dir DIR --plan`: the report, then the plan; `--json` has
    it under "plan"; nothing is started."""
    root = models_dir(tmp_path, A16, W4A4_COVERED)
    log = SAMPLES / "demo_marlin_and_mtp.log"
    base = [sys.executable, "-m", "logwatch", "scan", str(log), "--model-dir", str(root / A16),
            "--gpu-capability", "10.0", "--plan"]
    text = subprocess.run(base, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert text.returncode == 1, text.stderr  # the log's failures are fatal
    assert "PLAN " in text.stdout and str(root / W4A4_COVERED) in text.stdout
    assert "startable" in text.stdout
    out = subprocess.run([*base, "--json"], capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    plan = json.loads(out.stdout)["plan"]
    assert plan["startable"] and plan["changes"][0]["value"] == str(root / W4A4_COVERED)
    assert {c["name"] for c in plan["changes"]} >= {"VLLM_NVFP4_GEMM_BACKEND",
                                                     "--served-model-name"}  # vLLM 0.11.2


def test_the_readme_plan_example_runs(tmp_path: Path) -> None:
    """The README's `scan ... --plan` line, on the seed's demo log and a copy of the sample
    NVFP4A16 model with its W4A4 variant beside it."""
    import shlex

    root = models_dir(tmp_path, A16, W4A4_COVERED)
    db = tmp_path / "history.duckdb"
    names = {"vllm.log": str(SAMPLES / "demo_marlin_and_mtp.log"),
             "/models/Qwen3.6-NVFP4A16": str(root / A16), "history.duckdb": str(db)}
    readme = (ROOT / "README.md").read_text()
    (scan,) = [line for line in readme.splitlines()
               if line.startswith("logwatch scan") and "--plan" in line]
    (plan,) = [line for line in readme.splitlines() if line.startswith("logwatch plan")]
    argv = [names.get(word, word) for word in shlex.split(scan)[1:]]
    done = subprocess.run([sys.executable, "-m", "logwatch", *argv, "--db", str(db)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "PLAN " in done.stdout and "startable" in done.stdout
    argv = [names.get(word, word) for word in shlex.split(plan.split("#")[0])[1:]]
    done = subprocess.run([sys.executable, "-m", "logwatch", *argv], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0 and "startable" in done.stdout, done.stderr


def test_a_plan_passes_preflight_only_when_its_configuration_read_back_is_clean(
        tmp_path: Path) -> None:
    """The planned configuration is read back as a launch reads it (the variant, or the
    overlay made in a scratch directory) and judged by the same prediction: the real plan
    passes; one that serves the variant without merging the ignore list does not."""
    from logwatch.core.remedy.plan import Change, Plan
    from logwatch.relaunch.planned import with_preflight

    root = models_dir(tmp_path, A16, W4A4_UNCOVERED)
    snap = snapshot(root / A16, 100)
    plan = plan_relaunch([marlin_failure()], snap, variant_candidates(str(root / A16)))
    assert plan is not None
    checked = with_preflight(plan, snap)
    assert checked.checks[-1].name == "preflight" and checked.startable, checked.checks
    assert not list((tmp_path / "models").glob("*/.making-*"))
    half = Plan(plan.causes, changes=(Change("model", "model", str(root / W4A4_UNCOVERED),
                                             "the variant alone"),))
    refused = with_preflight(half, snap)
    assert refused.checks[-1].holds is False and not refused.startable
    assert "MTP" in refused.checks[-1].why


def test_a_plan_whose_checkpoint_lacks_a_shard_is_not_started(tmp_path: Path) -> None:
    """The planned model directory's files are judged too, read while the overlay (made in a
    scratch directory and removed after) links them: a variant one of whose two shards is
    missing fails at its load, so the plan that serves it is refused."""
    from logwatch.relaunch.planned import with_preflight
    from tests.model_dirs import write_safetensors

    root = models_dir(tmp_path, A16, W4A4_UNCOVERED)
    snap = snapshot(root / A16, 100)
    plan = plan_relaunch([marlin_failure()], snap, variant_candidates(str(root / A16)))
    assert plan is not None and with_preflight(plan, snap).startable
    write_safetensors(root / W4A4_UNCOVERED / "model-00001-of-00002.safetensors",
                      {"model.norm.weight": ("BF16", (8,))})  # shard 2 still absent
    refused = with_preflight(plan, snap)
    assert refused.checks[-1].holds is False and not refused.startable
    assert "weight files the index names are not there" in refused.checks[-1].why


def test_plan_from_the_history(tmp_path: Path) -> None:
    """`logwatch plan --db H`: the newest failed launch recorded by a scan, its diagnoses as
    recorded and its model directory read again; `--launch` picks another; a history without
    such a launch says so."""
    root = models_dir(tmp_path, A16, W4A4_COVERED)
    db = tmp_path / "history.duckdb"

    def logwatch(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "logwatch", *argv], capture_output=True,
                              text=True, cwd=ROOT, timeout=60)

    scanned = logwatch("scan", str(SAMPLES / "demo_marlin_and_mtp.log"), "--model-dir",
                       str(root / A16), "--gpu-capability", "10.0", "--db", str(db))
    assert scanned.returncode == 1, scanned.stderr
    text = logwatch("plan", "--db", str(db))
    assert text.returncode == 0, text.stderr
    assert "launch #2 of" in text.stdout and str(root / W4A4_COVERED) in text.stdout
    assert "[ok] preflight" in text.stdout
    answer = json.loads(logwatch("plan", "--db", str(db), "--json").stdout)
    assert answer["number"] == 2 and answer["plan"]["startable"]
    assert logwatch("plan", "--db", str(db), "--dry-run").stdout == text.stdout  # only shown
    none = logwatch("plan", "--db", str(db), "--launch", "no-such-launch")
    assert none.returncode == 1 and "no failed launch no-such-launch" in none.stderr
    missing = logwatch("plan", "--db", str(tmp_path / "none.duckdb"))
    assert missing.returncode == 2 and "no database yet" in missing.stderr


NOBODY = 65534


@pytest.mark.skipif(os.geteuid() != 0, reason="placing another user's link needs root")
@pytest.mark.parametrize("planted", ["link", "writable"])
def test_an_overlay_is_never_made_where_someone_else_could_choose_it(
        tmp_path: Path, planted: str) -> None:
    """The relaunch state directory's `overlays` as another user's link (to a directory of
    theirs), or a state directory anyone may write in: the overlay is refused with what and
    where, and nothing is written there (before, the overlay went wherever the link pointed,
    and vLLM would have been relaunched on a model directory that user laid out)."""
    root = models_dir(tmp_path, A16, W4A4_UNCOVERED)
    plan = plan_relaunch([marlin_failure()], snapshot(root / A16, 100),
                         variant_candidates(str(root / A16)))
    assert plan is not None and plan.overlay is not None
    state, theirs = tmp_path / "state", tmp_path / "theirs"
    state.mkdir(mode=0o700)
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    if planted == "link":
        (state / "overlays").symlink_to(theirs)
        os.lchown(state / "overlays", NOBODY, NOBODY)
        why = "symbolic link owned by uid 65534"
    else:
        state.chmod(0o777)
        why = "writable by others"
    with pytest.raises(OverlayError, match=f"relaunch state directory: .*{why}"):
        make_overlay(state, plan)
    assert list(theirs.iterdir()) == []
    with pytest.raises(OverlayError, match=why):
        remove_overlay(state, plan)
