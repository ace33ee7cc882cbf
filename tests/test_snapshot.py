"""Snapshot capture with real parts where they run here: /proc of a live child process, model
directories on disk (including broken ones), parsed nvidia-smi and systemctl output."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from logwatch.core.safe_text.redact import redact_argv, redact_env
from logwatch.core.snapshot.host_facts import (
    launch_from_log,
    parse_env_file,
    parse_nvidia_smi,
    parse_systemctl_show,
)
from logwatch.core.snapshot.model import GpuFacts, diff_snapshots
from logwatch.host.capture import read_process, take_snapshot
from logwatch.host.model_dir import read_model_dir
from tests.conftest import ROOT
from tests.inprocess import logwatch_text

MODELS = ROOT / "samples" / "models"
UNCOVERED = MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered"
H200 = GpuFacts("NVIDIA H200", 8, "570.124.06", 90, "test")


def test_a_running_process_argv_and_environment() -> None:
    """A real child whose argv looks like vLLM's: /proc gives argv and env, secrets masked."""
    script = "import sys, time; sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(30)"
    child = subprocess.Popen(
        [sys.executable, "-c", script, "vllm", "serve", str(UNCOVERED), "-tp", "2",
         "--api-key", "sk-live-secret"],
        env={"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz0123456789", "VLLM_LOGGING_LEVEL": "INFO",
             "PATH": "/usr/bin"}, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        argv, env = read_process(child.pid)
        assert argv[-6:] == ["serve", str(UNCOVERED), "-tp", "2", "--api-key", "sk-live-secret"]
        assert env["VLLM_LOGGING_LEVEL"] == "INFO"
        snap = take_snapshot(argv=argv[3:], env=env, gpu=H200)  # from `vllm serve ...` on
        assert snap.env["HF_TOKEN"] == "***"
        assert "sk-live-secret" not in json.dumps(snap.to_dict())
        assert snap.tensor_parallel_size == 2
        assert snap.model is not None and snap.model.quant.scheme == "W4A4_NVFP4"
        # through --pid, as the CLI does it: `python ... vllm serve` is how /proc shows a
        # shebang-launched vllm, and the launch is found inside it
        by_pid = take_snapshot(pid=child.pid, gpu=H200)
        assert by_pid.tensor_parallel_size == 2 and by_pid.env["HF_TOKEN"] == "***"
        assert "sk-live-secret" not in json.dumps(by_pid.to_dict())
        assert by_pid.sources["argv"] == f"/proc/{child.pid}/cmdline"
    finally:
        child.kill()
        child.wait()


def _snapshot_of_child(cwd: Path, env: dict[str, str], *flags: str) -> dict[str, str]:
    """{"hash", "body"} of a real child read through its /proc, as `--pid` reads vLLM."""
    script = "import sys, time; sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", script, "vllm", "serve", str(UNCOVERED),
                              *flags], cwd=cwd, env=env, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        snap = take_snapshot(pid=child.pid, gpu=H200)
        return {"hash": snap.content_hash(), "body": json.dumps(snap.to_dict())}
    finally:
        child.kill()
        child.wait()


def test_the_same_launch_started_again_has_the_same_hash(tmp_path: Path) -> None:
    """Two starts of one configuration differ in what the starter sets (systemd's
    INVOCATION_ID, JOURNAL_STREAM, ...; a shell's PWD, SHLVL, _, SSH_*): one hash, and none
    of it in the body. A VLLM_ variable or a flag changed is another configuration. Secrets
    never reach the body, whether masked (HF_TOKEN) or dropped with the rest."""
    base = {"VLLM_LOGGING_LEVEL": "INFO", "CUDA_VISIBLE_DEVICES": "0,1", "OMP_NUM_THREADS": "8",
            "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz0123456789", "PATH": "/usr/bin:/bin",
            "DATABASE_URL": "postgres://app:hunter2-db@db:5432/app",
            "APP_OPAQUE_SETTING": "zq9-unlabelled-value"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _snapshot_of_child(tmp_path / "a", {
        **base, "INVOCATION_ID": "0f3c" * 8, "JOURNAL_STREAM": "8:41234", "SHLVL": "1",
        "PWD": str(tmp_path / "a"), "_": "/usr/bin/vllm", "SYSTEMD_EXEC_PID": "4242",
        "MANAGERPID": "1", "NOTIFY_SOCKET": "/run/systemd/notify", "LISTEN_FDS": "1",
        "TERM": "xterm"}, "-tp", "2")
    again = _snapshot_of_child(tmp_path / "b", {
        **base, "INVOCATION_ID": "9a7e" * 8, "JOURNAL_STREAM": "8:99871", "SHLVL": "3",
        "PWD": str(tmp_path / "b"), "OLDPWD": str(tmp_path / "a"), "_": "/bin/env",
        "SSH_CONNECTION": "10.0.0.5 50000 10.0.0.9 22", "SSH_TTY": "/dev/pts/3"}, "-tp", "2")
    assert again["hash"] == first["hash"]
    body = json.loads(first["body"])
    assert body["env"] == {"VLLM_LOGGING_LEVEL": "INFO", "CUDA_VISIBLE_DEVICES": "0,1",
                           "OMP_NUM_THREADS": "8", "HF_TOKEN": "***"}
    for secret in ("hf_abcdefghij", "hunter2-db", "zq9-unlabelled-value"):
        assert secret not in first["body"] and secret not in again["body"]
    other_variable = _snapshot_of_child(tmp_path / "a", {**base, "VLLM_USE_DEEP_GEMM": "1"},
                                        "-tp", "2")
    other_flag = _snapshot_of_child(tmp_path / "a", base, "-tp", "4")
    assert len({first["hash"], other_variable["hash"], other_flag["hash"]}) == 3


def test_the_hash_covers_the_model_files_vllm_reads(tmp_path: Path) -> None:
    """The model's files are hashed, not only the facts logwatch draws from them: a
    generation config vLLM applies, or a config.json key logwatch does not read, changes the
    configuration. The digests are in the body, where `snapshot diff` shows them."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree(UNCOVERED, model)
    before = take_snapshot(model_dir=str(model), gpu=H200)
    assert before.model is not None
    assert set(before.model.files) == {"config.json", "model.safetensors.index.json"}
    assert take_snapshot(model_dir=str(model), gpu=H200).content_hash() == before.content_hash()
    (model / "generation_config.json").write_text('{"temperature": 0.6}')
    sampling = take_snapshot(model_dir=str(model), gpu=H200)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "rope_scaling": {"factor": 4}}))
    rope = take_snapshot(model_dir=str(model), gpu=H200)
    assert len({before.content_hash(), sampling.content_hash(), rope.content_hash()}) == 3
    changes = {k for k, _, _ in diff_snapshots(sampling, rope)}
    assert changes == {"model.files.config.json"}


def test_a_missing_process_is_a_problem_not_a_crash() -> None:
    snap = take_snapshot(pid=2**22 + 12345, gpu=H200)
    assert any(p.startswith("/proc/") for p in snap.problems)


def test_broken_and_missing_model_directories(tmp_path: Path) -> None:
    facts, problems = read_model_dir(MODELS / "broken-config")
    assert facts is not None and facts.tensor_count == 1  # the index was still read
    assert problems == [f"{MODELS / 'broken-config' / 'config.json'}:2: invalid JSON: "
                        "Expecting value (column 1)"]
    facts, problems = read_model_dir(tmp_path / "nope")
    assert facts is None and "model directory not found" in problems[0]
    (tmp_path / "list").mkdir()
    (tmp_path / "list" / "config.json").write_text("[1, 2]")
    facts, problems = read_model_dir(tmp_path / "list")
    assert any("expected a JSON object, got list" in p for p in problems)
    assert any("no model.safetensors.index.json or model.safetensors" in p for p in problems)


def test_single_file_safetensors_header_only(tmp_path: Path) -> None:
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "mtp.fc.weight": {"dtype": "BF16", "shape": [4, 8],
                                           "data_offsets": [0, 64]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header
                                                 + b"\0" * 64)
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 2, "mtp_num_hidden_layers": 1}')
    facts, problems = read_model_dir(tmp_path)
    assert problems == [] and facts is not None and facts.tensor_count == 1
    assert facts.mtp is not None and facts.mtp.modules[0].name == "mtp.fc"
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 40))
    _, problems = read_model_dir(tmp_path)
    assert any("implausible" in p for p in problems)


def test_redaction_of_argv_and_environment() -> None:
    assert redact_argv(["vllm", "serve", "m", "--api-key", "k", "--hf-token=t",
                        "--max-num-batched-tokens", "8192"]) == [
        "vllm", "serve", "m", "--api-key", "***", "--hf-token=***",
        "--max-num-batched-tokens", "8192"]
    assert redact_env({"OPENAI_API_KEY": "x", "NUM_TOKENS": "5",
                       "HTTPS_PROXY": "http://u:p4ss@proxy:3128"}) == {
        "OPENAI_API_KEY": "***", "NUM_TOKENS": "5", "HTTPS_PROXY": "http://u:***@proxy:3128"}
    # a word that only holds PASSWORD, and PWD beside another word (the shell's PWD is not)
    assert redact_env({"PGPASSWORD": "pg", "MYSQL_PWD": "my", "PWD": "/srv", "KEYBOARD": "us",
                       "MAX_NUM_BATCHED_TOKENS": "8192"}) == {
        "PGPASSWORD": "***", "MYSQL_PWD": "***", "PWD": "/srv", "KEYBOARD": "us",
        "MAX_NUM_BATCHED_TOKENS": "8192"}


def test_content_hash_and_diff() -> None:
    a = take_snapshot(argv=f"vllm serve {UNCOVERED} -tp 4", gpu=H200)
    b = take_snapshot(argv=f"vllm serve {UNCOVERED} -tp 4", gpu=H200)
    c = take_snapshot(argv=f"vllm serve {UNCOVERED} -tp 2", gpu=H200)
    assert a.content_hash() == b.content_hash() != c.content_hash()
    changes = dict((k, (x, y)) for k, x, y in diff_snapshots(a, c))
    assert changes["launch.tensor_parallel_size"] == (4, 2)
    assert changes["argv"][1][-1] == "2"


def test_nvidia_smi_output() -> None:
    gpu = parse_nvidia_smi("NVIDIA H200, 570.124.06, 9.0\nNVIDIA H200, 570.124.06, 9.0\n")
    assert (gpu.name, gpu.count, gpu.driver, gpu.capability) == ("NVIDIA H200", 2,
                                                                 "570.124.06", 90)
    assert parse_nvidia_smi("NVIDIA B200, 575.51.03, 10.0").capability == 100
    assert parse_nvidia_smi("").capability is None


SYSTEMCTL_SHOW = """\
ExecStart={ path=/opt/vllm/bin/vllm ; argv[]=/opt/vllm/bin/vllm serve /models/q -tp 2 \
--speculative-config {"method":"mtp"} ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; \
pid=0 ; code=(null) ; status=0/0 }
Environment=HF_TOKEN=hf_x "VLLM_LOGGING_PREFIX=[prod] "
EnvironmentFiles=/etc/vllm/env (ignore_errors=yes)
MainPID=4242
DropInPaths=/etc/systemd/system/vllm.service.d/10-mtp.conf
FragmentPath=/etc/systemd/system/vllm.service
"""


def test_systemctl_show_output() -> None:
    facts = parse_systemctl_show(SYSTEMCTL_SHOW)
    assert facts["argv"][:4] == ["/opt/vllm/bin/vllm", "serve", "/models/q", "-tp"]
    assert facts["env"] == {"HF_TOKEN": "hf_x", "VLLM_LOGGING_PREFIX": "[prod] "}
    assert facts["env_files"] == ["/etc/vllm/env"]
    assert facts["main_pid"] == 4242
    assert facts["drop_ins"] == ["/etc/systemd/system/vllm.service.d/10-mtp.conf"]
    assert parse_env_file("# c\nA=1\nB=\"two words\"\n\nC='x'") == {"A": "1", "B": "two words",
                                                                     "C": "x"}


def test_a_log_alone_yields_a_partial_snapshot() -> None:
    facts = launch_from_log({
        "lifecycle.non_default_args": {"args": "{'model_tag': '/m', 'tensor_parallel_size': 4, "
                                               "'speculative_config': {'method': 'mtp'}}"},
        "lifecycle.engine_config": {"version": "0.11.2", "model": "/m",
                                    "quantization": "compressed-tensors",
                                    "tensor_parallel_size": "4"},
    })
    assert facts == {"model": "/m", "tensor_parallel_size": 4,
                     "speculative_config": {"method": "mtp"},
                     "quantization": "compressed-tensors", "vllm_version": "0.11.2"}
    assert launch_from_log({"lifecycle.non_default_args": {"args": "__import__('os')"}}) == {}
    snap = take_snapshot(log_facts=facts, gpu=H200)
    assert snap.uses_mtp and snap.tensor_parallel_size == 4
    assert snap.sources["launch"] == "vLLM's own log lines"


def test_an_argv_that_is_not_vllm_keeps_the_rest_of_the_snapshot() -> None:
    snap = take_snapshot(argv="python train.py", model_dir=str(UNCOVERED), gpu=H200)
    assert any("not a vLLM server command line" in p for p in snap.problems)
    assert snap.model is not None and snap.model.quant.scheme == "W4A4_NVFP4"


@pytest.mark.parametrize("flag", ["--cmdline", "--model-dir"])
def test_snapshot_show_cli(flag: str, tmp_path: Path) -> None:
    value = f"vllm serve {UNCOVERED} -tp 4" if flag == "--cmdline" else str(UNCOVERED)
    run = ["snapshot", "show", flag, value, "--gpu-capability", "9.0"]
    shown = logwatch_text(*run)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "W4A4_NVFP4" in text and "Marlin on this GPU: yes" in text
    assert "ignore list: NOT covered" in text and "BF16, not ignored: mtp.fc" in text
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(logwatch_text(*run, "--json").stdout)
    b.write_text(a.read_text().replace('"capability": 90', '"capability": 100'))
    diff = logwatch_text("snapshot", "diff", str(a), str(b))
    assert diff.returncode == 1 and "gpu.capability: 90 -> 100" in diff.stdout


def test_vllm_version_from_the_installed_package(tmp_path: Path) -> None:
    from logwatch.host.capture import installed_vllm_version

    venv = tmp_path / "venv"
    info = venv / "lib" / "python3.12" / "site-packages" / "vllm-0.33.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.0\n\nbody")
    (venv / "bin").mkdir()
    found = installed_vllm_version([str(venv / "bin" / "python3"), "-m", "vllm"])
    assert found == ("0.33.0", str(info / "METADATA"))
    snap = take_snapshot(argv=[str(venv / "bin" / "vllm"), "serve", str(UNCOVERED)], gpu=H200)
    assert snap.vllm_version == "0.33.0" and snap.sources["vllm_version"].endswith("METADATA")
    logged = take_snapshot(argv=[str(venv / "bin" / "vllm"), "serve", str(UNCOVERED)],
                           log_facts={"vllm_version": "0.11.2"}, gpu=H200)
    assert logged.vllm_version == "0.11.2"  # what the log says ran wins


def test_snapshot_records_the_marlin_decision_and_every_mtp_module() -> None:
    d = take_snapshot(model_dir=str(UNCOVERED), gpu=H200).to_dict()
    assert d["model"]["quant"]["marlin_on_this_gpu"] is True
    table = {row["module"]: row for row in d["model"]["mtp"]["module_list"]}
    assert table["mtp.fc"] == {"module": "mtp.fc", "stored": "bf16", "ignored_by": None}
    assert "mtp.layers.0.mlp.experts.*.up_proj" in table
    blackwell = take_snapshot(model_dir=str(UNCOVERED),
                              gpu=GpuFacts(capability=100, source="t")).to_dict()
    assert blackwell["model"]["quant"]["marlin_on_this_gpu"] is False


def test_gpu_capture_through_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU here: a stand-in nvidia-smi prints what the real one prints on an H200 host
    (the query and CSV format are the real tool's); without one the GPU is `unknown`."""
    from logwatch.host.capture import capture_gpu

    monkeypatch.setenv("PATH", str(tmp_path))
    assert capture_gpu().source.startswith("unknown (nvidia-smi not found)")
    tool = tmp_path / "nvidia-smi"
    tool.write_text('#!/bin/sh\n[ "$1" = "--query-gpu=name,driver_version,compute_cap" ] '
                    '|| exit 9\nprintf "NVIDIA H200, 570.124.06, 9.0\\nNVIDIA H200, '
                    '570.124.06, 9.0\\n"\n')
    tool.chmod(0o755)
    gpu = capture_gpu()
    assert (gpu.name, gpu.count, gpu.capability, gpu.source) == ("NVIDIA H200", 2, 90,
                                                                 "nvidia-smi")
    tool.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    assert "exit 9" in capture_gpu().source


def test_target_snapshots_are_retaken_only_when_the_unit_started_again(tmp_path: Path) -> None:
    """The decision alone (the real manager is in test_systemd_unit.py): a new InvocationID
    retakes the snapshot; the same one, or none (systemd unreachable), does not. A target
    with only an argv is snapshotted once and never watched."""
    from logwatch.core.settings.config import TargetConfig
    from logwatch.host.targets import TargetSnapshots

    gpu = GpuFacts("NVIDIA H100", 8, "570", 90, "test")
    invocations = iter(["a1", "a1", None, "b2"])
    targets = TargetSnapshots(
        [TargetConfig("unit", {}, launch={"unit": "missing-vllm.service", "user": True}),
         TargetConfig("argv", {}, launch={"argv": ["vllm", "serve", "/m", "-tp", "2"]})],
        gpu=lambda: gpu, invocation=lambda unit, user: next(invocations))
    assert targets.watched
    first = {s.target: s for s in targets.take_all()}  # "a1" at start
    assert first["unit"].invocation == "a1" and first["argv"].invocation is None
    assert "systemctl" in " ".join(first["unit"].body["problems"])  # no such unit: said
    assert targets.changed() == []  # still "a1"
    assert targets.changed() == []  # systemd did not answer
    [again] = targets.changed()  # "b2": started again
    assert (again.target, again.invocation) == ("unit", "b2")
