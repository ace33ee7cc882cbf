"""Capture a snapshot from the host: an argv, a running process, or a systemd unit; the model
directory the launch names; the GPUs. A missing tool or file is recorded, never fatal."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from logwatch.core.quant.ignore_rules import one_version
from logwatch.core.snapshot.argv import ArgvError, LaunchSpec, parse_launch
from logwatch.core.snapshot.host_facts import (
    NVIDIA_SMI_QUERY,
    exec_start_from_unit,
    parse_env_file,
    parse_environ,
    parse_nvidia_smi,
    parse_systemctl_show,
    split_nul,
)
from logwatch.core.snapshot.model import GpuFacts, Snapshot, build_snapshot
from logwatch.host.model_dir import read_model_dir

COMMAND_TIMEOUT_S = 10


def capture_gpu() -> GpuFacts:
    """GPU name, count, driver and compute capability; unknown when there is no nvidia-smi."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return GpuFacts(source="unknown (nvidia-smi not found)")
    try:
        out = subprocess.run([tool, f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return GpuFacts(source=f"unknown (nvidia-smi failed: {exc})")
    if out.returncode != 0:
        return GpuFacts(source=f"unknown (nvidia-smi exit {out.returncode}: "
                               f"{out.stderr.strip()[:120]})")
    return parse_nvidia_smi(out.stdout)


def installed_vllm_version(argv: list[str]) -> tuple[str, str] | None:
    """The vLLM version installed for the interpreter or entry point that argv runs, read
    from its `vllm-*.dist-info/METADATA` (nothing is executed). (version, file) or None."""
    roots: list[Path] = []
    for token in argv[:3]:
        path = Path(token)
        if path.is_absolute() and path.parent.name == "bin":
            roots.append(path.parent.parent)
    roots += [Path("/usr/local"), Path("/usr")]
    for root in roots:
        for pattern in ("lib/python3*/site-packages/vllm-*.dist-info/METADATA",
                        "lib/python3*/dist-packages/vllm-*.dist-info/METADATA",
                        "lib/python3/dist-packages/vllm-*.dist-info/METADATA"):
            for metadata in sorted(root.glob(pattern)):
                try:
                    with open(metadata, encoding="utf-8", errors="replace") as fh:
                        for line in fh:
                            if line.startswith("Version:"):
                                return line.split(":", 1)[1].strip(), str(metadata)
                            if not line.strip():
                                break
                except OSError:
                    continue
    return None


def read_process(pid: int, proc: Path = Path("/proc")) -> tuple[list[str], dict[str, str]]:
    """argv and environment (as at exec time) of a running process."""
    base = proc / str(pid)
    argv = split_nul((base / "cmdline").read_bytes())
    try:
        env = parse_environ(split_nul((base / "environ").read_bytes()))
    except PermissionError:
        env = {}
    return argv, env


def run_systemctl(args: list[str], user: bool) -> str:
    cmd = ["systemctl", *(["--user"] if user else []), *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                         check=False)
    if out.returncode != 0:
        raise OSError(f"{' '.join(cmd)}: {out.stderr.strip() or f'exit {out.returncode}'}")
    return out.stdout


def read_unit(unit: str, user: bool = False) -> dict[str, Any]:
    """ExecStart argv (exact, from the unit text with its drop-ins), Environment (with
    EnvironmentFiles read), MainPID and drop-ins of a systemd unit."""
    facts = parse_systemctl_show(run_systemctl(
        ["show", unit, "-p", "ExecStart", "-p", "Environment", "-p", "EnvironmentFiles",
         "-p", "MainPID", "-p", "DropInPaths", "-p", "FragmentPath"], user))
    try:
        exact = exec_start_from_unit(run_systemctl(["cat", unit], user))
    except OSError as exc:
        exact = None
        facts.setdefault("problems", []).append(f"{exc} (argv from `systemctl show`, which "
                                                "loses arguments with spaces)")
    if exact:
        facts["argv"] = exact
    for env_file in facts["env_files"]:
        try:
            facts["env"] = {**parse_env_file(Path(env_file).read_text()), **facts["env"]}
        except OSError as exc:
            facts.setdefault("problems", []).append(f"{env_file}: {exc}")
    return facts


def take_snapshot(argv: list[str] | str | None = None, env: Mapping[str, str] | None = None,
                  pid: int | None = None, unit: str | None = None, user_unit: bool = False,
                  model_dir: str | None = None, log_facts: Mapping[str, Any] | None = None,
                  gpu: GpuFacts | None = None, served_first: bool = False) -> Snapshot:
    """Everything that can be learned; each missing piece is a problem in the snapshot.
    `served_first`: the model the command line serves, when it is a directory here, is read
    rather than `model_dir` (a target's configured directory, for a launch that names a hub
    id; a relaunch serving an overlay is read as it runs)."""
    problems: list[str] = []
    sources: dict[str, str] = {}
    environment = dict(env or {})
    unit_argv: list[str] | None = None
    if unit is not None:
        try:
            facts = read_unit(unit, user_unit)
            unit_argv = facts["argv"] or None
            environment = {**facts["env"], **environment}
            problems += facts.get("problems", [])
            sources["env"] = f"systemd unit {unit}"
            pid = pid or facts["main_pid"]
        except (OSError, subprocess.TimeoutExpired) as exc:
            problems.append(str(exc))
    if pid is not None:  # what is running now is exact: it wins over the unit's text
        try:
            proc_argv, proc_env = read_process(pid)
            if unit_argv and len(proc_argv) > len(unit_argv) \
                    and proc_argv[-len(unit_argv):] == unit_argv:
                # the unit's command with the interpreter of its #! line in front: the same
                # launch, kept in one form whether it is read running or stopped (one hash)
                proc_argv = unit_argv
            argv = argv or proc_argv
            environment = {**environment, **proc_env}
            sources.setdefault("argv", f"/proc/{pid}/cmdline")
            sources["env"] = f"/proc/{pid}/environ" + (f" (unit {unit})" if unit else "")
        except OSError as exc:
            problems.append(f"/proc/{pid}: {exc.strerror or exc}")
    if argv is None and unit_argv:
        argv = unit_argv
        sources["argv"] = f"systemd unit {unit} (ExecStart, drop-ins applied)"
    launch: LaunchSpec | None = None
    if argv:
        try:
            launch = parse_launch(argv)
            sources.setdefault("argv", "command line")
        except ArgvError as exc:
            problems.append(str(exc))
    log_facts = dict(log_facts or {})
    served = launch.model if launch else None
    if served_first and served and _is_dir(served):
        model_path: str | None = served
    else:
        model_path = model_dir or served
    logged_model = log_facts.get("model")
    if model_path is None and isinstance(logged_model, str) and _is_dir(logged_model):
        model_path = logged_model  # the log's model path exists here: read it too
    overrides = launch.hf_overrides if launch else log_facts.get("hf_overrides")
    model = None
    if model_path:
        model, model_problems = read_model_dir(model_path, overrides)
        problems += model_problems
        sources["model"] = str(model_path)
    logged = log_facts.get("vllm_version")
    found = installed_vllm_version(launch.argv()) if launch is not None else None
    version = one_version(logged, found[0] if found else None)
    if found is not None and version == found[0]:
        sources["vllm_version"] = found[1] + (" (the release vLLM's log names)"
                                              if logged else "")
    elif version:
        sources["vllm_version"] = "vLLM's own log lines"
    raw_argv: list[str] = []
    if argv and launch is None:  # not a vLLM launch: still record what it was
        try:
            raw_argv = shlex.split(argv) if isinstance(argv, str) else list(argv)
        except ValueError:
            raw_argv = [str(argv)]
    snapshot = build_snapshot(launch, environment, model, vllm_version=version,
                              raw_argv=raw_argv,
                              gpu=gpu or capture_gpu(), sources=sources, problems=problems)
    if launch is None and log_facts:  # a log alone: the launch as vLLM reported it
        launch_summary = {k: v for k, v in log_facts.items() if k != "vllm_version"}
        snapshot = Snapshot(snapshot.argv, launch_summary, snapshot.env, snapshot.model,
                            snapshot.vllm_version, snapshot.gpu,
                            {**snapshot.sources, "launch": "vLLM's own log lines"},
                            snapshot.problems)
    return snapshot


def _is_dir(path: str) -> bool:
    """Whether a path read from a command line or a log is a directory here; a name too long
    for the system, or one under a directory we may not search, is none (Python 3.11's
    `is_dir` raises for those: a model path a log names must never stop its reading)."""
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):
        return False
