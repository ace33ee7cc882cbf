"""The seed's own condition, which was reported healthy: an NVFP4 checkpoint whose start-up
says it runs on Marlin (`Using MarlinNvFp4LinearKernel for NVFP4 GEMM`, `Using 'MARLIN' NvFp4
MoE backend`) serves weight-only through Marlin. That is a latent problem with the runbook's
remedy: the W4A4 variant through CUTLASS/FlashInfer where the GPU has native FP4 (10.0+), and
that remedy refused, with the reason, where it has not."""

from __future__ import annotations

import json

import pytest

from tests.inprocess import logwatch_text

HEAD = "(EngineCore_DP0 pid=88) INFO 12-01 02:10:14 [__init__.py:1259] "
UP = "INFO:     Application startup complete.\n"


def latent(log: str, capability: str) -> list[dict[str, object]]:
    done = logwatch_text("scan", "--json", "--gpu-capability", capability, "-",
                         stdin=log.encode())
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["verdict"] == "healthy"
    return [d for d in report["diagnoses"] if d["cause"] == "fp4_on_marlin"]


@pytest.mark.parametrize(("line", "capability", "applicable"), [
    (HEAD + "Using MarlinNvFp4LinearKernel for NVFP4 GEMM\n", "10.0", True),
    (HEAD + "Using MarlinNvFp4LinearKernel for NVFP4 GEMM\n", "9.0", False),
    (HEAD + "Using MarlinMxfp4LinearKernel for MXFP4 GEMM\n", "10.0", True),
    ("(EngineCore_DP0 pid=88) INFO 12-01 02:10:14 [nvfp4.py:88] Using 'MARLIN' NvFp4 MoE "
     "backend out of potential backends: ['FLASHINFER_CUTLASS', 'MARLIN']\n", "12.0", True),
])
def test_an_fp4_start_up_on_marlin_is_a_latent_problem_with_the_w4a4_remedy(
        line: str, capability: str, applicable: bool) -> None:
    (diagnosis,) = latent(line + UP, capability)
    assert diagnosis["latent"] is True
    (remedy,) = diagnosis["remedies"]
    assert (remedy["kind"], remedy["applicable"]) == ("switch_to_w4a4", applicable)
    if not applicable:
        assert "no native FP4" in remedy["why"]


def test_a_native_fp4_kernel_is_no_problem() -> None:
    line = HEAD + "Using FlashInferCutlassNvFp4LinearKernel for NVFP4 GEMM\n"
    assert latent(line + UP, "10.0") == []


@pytest.mark.parametrize(("capability", "applicable"), [("8.0", True), ("9.0", False)])
def test_fp8_on_marlin_is_a_latent_problem_too(capability: str, applicable: bool) -> None:
    """`Selected MarlinFP8ScaledMMLinearKernel for Fp8LinearMethod`: FP8 weight-only. On 8.0
    a GPU with native FP8 is the way out; on 9.0, which has it, something forces Marlin."""
    line = HEAD + "Selected MarlinFP8ScaledMMLinearKernel for Fp8LinearMethod\n"
    done = logwatch_text("scan", "--json", "--gpu-capability", capability, "-",
                         stdin=(line + UP).encode())
    (diagnosis,) = [d for d in json.loads(done.stdout)["diagnoses"]
                    if d["cause"] == "fp8_on_marlin"]
    assert diagnosis["latent"] and diagnosis["remedies"][0]["applicable"] is applicable
    cpu = HEAD + "Selected CPUFp8PerTensorScaledMMLinearKernel for Fp8LinearMethod\n"
    assert latent(cpu + UP, capability) == []


@pytest.mark.parametrize(("model", "capability", "path", "says"), [
    ("qwen3.6-35b-a3b-nvfp4a16", "9.0", "marlin", "W4A4 is refused here"),
    ("qwen3.6-35b-a3b-nvfp4a16", "10.0", "native", ""),
    ("qwen3.6-35b-a3b-nvfp4-mtp-covered", "9.0", "marlin", "W4A4 is refused here"),
    ("qwen3.6-35b-a3b-nvfp4-mtp-covered", "10.0", "native", ""),
    ("qwen2.5-72b-gptq-int4", "10.0", "marlin", ""),
])
def test_preflight_predicts_the_kernel_path(model: str, capability: str, path: str,
                                            says: str) -> None:
    """Before any weight loads: the checkpoint's scheme and the GPU decide Marlin or a native
    kernel, and an FP4 checkpoint on Marlin gets the runbook's advice (or its refusal)."""
    from tests.conftest import ROOT

    directory = ROOT / "samples" / "models" / model
    done = logwatch_text("preflight", "--json", "--model-dir", str(directory), "--cmdline",
                         f"vllm serve {directory}", "--gpu-capability", capability,
                         "--vllm-version", "0.33.0")
    kernel = json.loads(done.stdout)["kernel_path"]
    assert kernel["path"] == path
    assert says in kernel["advice"]
    text = logwatch_text("--no-pager", "preflight", "--model-dir", str(directory), "--cmdline",
                         f"vllm serve {directory}", "--gpu-capability", capability,
                         "--vllm-version", "0.33.0").stdout
    assert "kernel path: " + kernel["summary"].split(":")[0] in text


def test_a_forcing_flag_puts_a_w4a4_checkpoint_on_marlin_even_on_native_fp4() -> None:
    from tests.conftest import ROOT

    directory = ROOT / "samples" / "models" / "qwen3.6-35b-a3b-nvfp4-mtp-covered"
    done = logwatch_text("preflight", "--json", "--model-dir", str(directory), "--cmdline",
                         f"vllm serve {directory} --linear-backend marlin",
                         "--gpu-capability", "10.0", "--vllm-version", "0.33.0")
    kernel = json.loads(done.stdout)["kernel_path"]
    assert kernel["path"] == "marlin" and "--linear-backend marlin" in kernel["summary"]
    assert kernel["advice"].startswith("remove --linear-backend marlin")


@pytest.mark.slow
def test_the_daemon_says_it_live_and_keeps_it_in_the_history(tmp_path: object,
                                                             library: object) -> None:
    """A daemon following the real 0.33 start-up that picks Marlin for its NVFP4 layers: the
    status lists the latent problem, the history's diagnoses hold it (latent), and the TUI's
    incident table shows it (an info incident with a diagnosis: `latent`)."""
    from pathlib import Path

    from logwatch.store.operator_sql import read_only_query
    from tests.conftest import SAMPLES
    from tests.following import wait_for
    from tests.test_live_model import InProcessDaemon, settled

    tmp = Path(str(tmp_path))
    log = tmp / "vllm.log"
    log.write_bytes((SAMPLES / "healthy_033_startup.log").read_bytes())
    running = InProcessDaemon(tmp, log, library)  # type: ignore[arg-type]
    try:
        settled(running, launches=1, failed=0)
        status = wait_for(lambda: (st := running.status())["launches"][0]["latent"] and st,
                          30, "the launch's latent problems in the status")
    finally:
        running.stop()
    assert status["launches"][0]["latent"] == [
        "FP4 checkpoint served through weight-only Marlin"] * 2
    rows = read_only_query(tmp / "h.duckdb",
                           "SELECT cause, body FROM diagnoses ORDER BY ALL").rows
    assert [(cause, json.loads(body)["latent"]) for cause, body in rows] == [
        ("fp4_on_marlin", True), ("fp4_on_marlin", True)]
    from logwatch.tui import queries
    from logwatch.tui.board import as_dicts, incident_rows

    shown = read_only_query(tmp / "h.duckdb", queries.OPEN_INCIDENTS)
    # the kernel-selection lines are info incidents: shown for their diagnosis alone
    assert sorted((r.signature, r.diagnosis) for r in incident_rows(as_dicts(
        shown.columns, shown.rows)) if r.severity == "info") == [
        ("nvfp4.gemm_backend", "FP4 checkpoint served through weight-only Marlin"),
        ("nvfp4.moe_backend", "FP4 checkpoint served through weight-only Marlin")]


def test_the_launch_holds_its_kernel_path_one_record_per_scheme_and_layers() -> None:
    """The real 0.33 start-up names its NVFP4 linear kernel, its MoE backend and, in a
    warning, the Marlin fallback: one record per scheme and layers, the selection lines'
    kernels kept, the warning folded into them; the report's first lines say it."""
    from tests.conftest import SAMPLES

    log = (SAMPLES / "healthy_033_startup.log").read_bytes()
    done = logwatch_text("scan", "--json", "-", stdin=log)
    kernels = json.loads(done.stdout)["launches"][0]["kernels"]
    assert [(k["scheme"], k["layers"], k["kernel"], k["path"]) for k in kernels] == [
        ("NVFP4", "linear", "MarlinNvFp4LinearKernel", "marlin"),
        ("NVFP4", "MoE", "MARLIN", "marlin")]
    text = logwatch_text("scan", "-", stdin=log).stdout
    assert "kernel path: NVFP4 linear: MarlinNvFp4LinearKernel (Marlin, weight-only); " \
           "NVFP4\n  MoE: Marlin, weight-only" in text
    # the warning alone (no selection line): FP4 on Marlin, said as the warning says it
    warning = next(line for line in log.decode().splitlines() if "native support" in line)
    alone = json.loads(logwatch_text("scan", "--json", "-",
                                     stdin=(warning + "\n").encode()).stdout)
    assert [(k["scheme"], k["layers"], k["path"]) for k in alone["launches"][0]["kernels"]] \
        == [("FP4", "linear", "marlin")]
    native = HEAD + "Using NvFp4LinearBackend.FLASHINFER_CUTLASS for NVFP4 GEMM\n"
    report = json.loads(logwatch_text("scan", "--json", "-", stdin=native.encode()).stdout)
    assert [(k["kernel"], k["path"]) for k in report["launches"][0]["kernels"]] == [
        ("NvFp4LinearBackend.FLASHINFER_CUTLASS", "native")]
