"""Parse what the snapshot shells collect: nvidia-smi CSV, `systemctl show`, /proc blobs, and
the configuration vLLM itself logs (so a log alone still yields a partial snapshot)."""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterable
from typing import Any

from logwatch.core.numbers import COUNT_MAX, bounded_number
from logwatch.core.snapshot.model import GpuFacts

NVIDIA_SMI_QUERY = "name,driver_version,compute_cap"


def parse_nvidia_smi(text: str) -> GpuFacts:
    """`nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader`."""
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
    rows = [r for r in rows if len(r) >= 3]
    if not rows:
        return GpuFacts(source="nvidia-smi (no GPU listed)")
    name, driver, cap = rows[0][0], rows[0][1], rows[0][2]
    capability = None
    if re.fullmatch(r"\d+\.\d+", cap):
        major, minor = cap.split(".")
        capability = int(major) * 10 + int(minor)
    names = {r[0] for r in rows}
    return GpuFacts(name=name if len(names) == 1 else " / ".join(sorted(names)),
                    count=len(rows), driver=driver, capability=capability, source="nvidia-smi")


def split_nul(blob: bytes) -> list[str]:
    """/proc/PID/cmdline and environ: NUL-separated, possibly not UTF-8."""
    return [part.decode("utf-8", errors="replace") for part in blob.split(b"\0") if part]


def parse_environ(entries: Iterable[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        if sep and key:
            env[key] = value
    return env


_EXEC_ARGV = re.compile(r"argv\[\]=(?P<argv>.*?) ; ignore_errors=")


def parse_systemctl_show(text: str) -> dict[str, Any]:
    """`systemctl show UNIT -p ExecStart -p Environment -p EnvironmentFiles -p MainPID
    -p DropInPaths -p FragmentPath`: argv, environment, env files, main pid, drop-ins."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key] = value
    argv: list[str] = []
    if m := _EXEC_ARGV.search(props.get("ExecStart", "")):
        argv = shlex.split(m.group("argv"))
    env: dict[str, str] = {}
    if props.get("Environment"):
        env = parse_environ(shlex.split(props["Environment"]))
    env_files = [part.split(" (ignore_errors", 1)[0].strip()
                 for part in props.get("EnvironmentFiles", "").split(";") if part.strip()]
    main_pid = props.get("MainPID", "0")
    return {"argv": argv, "env": env, "env_files": [f for f in env_files if f],
            "main_pid": int(main_pid) if main_pid.isdigit() and main_pid != "0" else None,
            "drop_ins": props.get("DropInPaths", "").split(),
            "fragment": props.get("FragmentPath") or None}


def exec_start_from_unit(text: str) -> list[str] | None:
    """The effective ExecStart argv from `systemctl cat UNIT` (fragment, then drop-ins in
    order; an empty `ExecStart=` resets). `systemctl show` prints argv unquoted, which loses
    arguments with spaces such as --speculative-config JSON; the unit text does not."""
    commands: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = pending + raw
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        stripped = line.strip()
        if stripped.startswith(("#", ";")) or "=" not in stripped:
            continue
        key, _, value = stripped.partition("=")
        if key.strip() != "ExecStart":
            continue
        value = value.strip()
        if not value:
            commands = []
        else:
            commands.append(value)
    if not commands:
        return None
    command = commands[-1].lstrip("-@:+!")  # systemd's prefixes: ignore failure, argv0, ...
    try:
        return shlex.split(command)
    except ValueError:
        return None


def parse_env_file(text: str) -> dict[str, str]:
    """A systemd EnvironmentFile: KEY=VALUE lines, comments, optional quotes."""
    env: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, sep, value = line.partition("=")
        if sep:
            try:
                parts = shlex.split(value)
            except ValueError:
                parts = [value]
            env[key.strip()] = " ".join(parts)
    return env


def launch_from_log(captures: dict[str, dict[str, str]]) -> dict[str, Any]:
    """What vLLM's own lines say about the launch: `non-default args` (a Python dict repr,
    read with literal_eval, never eval) and the engine-config and version lines.

    `captures` maps a lifecycle signature id to the captures of its first finding."""
    facts: dict[str, Any] = {}
    args = captures.get("lifecycle.non_default_args", {}).get("args")
    if args:
        try:
            parsed = ast.literal_eval(args)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            model = parsed.get("model_tag") or parsed.get("model")
            for key, value in (("model", model),
                               ("quantization", parsed.get("quantization")),
                               ("tensor_parallel_size", parsed.get("tensor_parallel_size")),
                               ("speculative_config", parsed.get("speculative_config")),
                               ("hf_overrides", parsed.get("hf_overrides")),
                               ("max_model_len", parsed.get("max_model_len"))):
                if value is not None:
                    facts[key] = value
    engine = captures.get("lifecycle.engine_config", {})
    if engine.get("model"):
        facts.setdefault("model", engine["model"])
    if engine.get("quantization") and engine["quantization"] != "None":
        facts.setdefault("quantization", engine["quantization"])
    # a size no machine has (more digits than a count holds) is garbage, read as none
    tp = facts.get("tensor_parallel_size")
    if tp is not None and not (isinstance(tp, int) and 0 < tp <= COUNT_MAX):
        del facts["tensor_parallel_size"]
    if (engine_tp := bounded_number(engine.get("tensor_parallel_size"))) is not None:
        facts.setdefault("tensor_parallel_size", engine_tp)
    spec = engine.get("speculative_config")
    if spec and spec != "None" and "speculative_config" not in facts:
        method = re.search(r"method='([^']+)'", spec)
        tokens = re.search(r"num_spec_tokens=(\d+)", spec)
        facts["speculative_config"] = {
            "method": method.group(1) if method else "unknown",
            **({"num_speculative_tokens": count} if tokens
               and (count := bounded_number(tokens.group(1))) is not None else {})}
    version = (captures.get("lifecycle.version", {}).get("version")
               or engine.get("version"))
    if version:
        facts["vllm_version"] = version
    return facts
