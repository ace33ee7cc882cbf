"""Parse a `vllm serve` command line into a launch spec that renders back to the same argv.

Flags logwatch reasons about are read into typed fields (model, quantization, parallel sizes,
speculative config, hf-overrides, backends, memory); every token is kept in order, so the spec
renders back verbatim and can be edited flag by flag for a corrected relaunch.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

# `vllm serve` flags that take no value (argparse store_true / BooleanOptionalAction).
BOOLEAN_FLAGS = frozenset({
    "--enforce-eager", "--trust-remote-code", "--disable-log-stats", "--disable-log-requests",
    "--enable-log-requests", "--enable-prefix-caching", "--no-enable-prefix-caching",
    "--enable-chunked-prefill", "--no-enable-chunked-prefill", "--enable-auto-tool-choice",
    "--disable-uvicorn-access-log", "--async-scheduling", "--enable-expert-parallel",
    "--disable-custom-all-reduce", "--headless", "--allow-deprecated-quantization",
    "--disable-frontend-multiprocessing", "--enable-lora", "--enable-reasoning",
    "--skip-tokenizer-init", "--disable-sliding-window", "--enable-sleep-mode",
    "--disable-fastapi-docs", "--enable-server-load-tracking", "--return-tokens-as-token-ids",
    "--enable-prompt-tokens-details", "--no-enable-log-requests", "--help", "-h", "--version",
})
SHORT_FLAGS = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size",
               "-dp": "--data-parallel-size", "-sc": "--speculative-config",
               "-q": "--quantization"}
SPEC_SHORTHANDS = {"--spec-method": "method", "--spec-model": "model",
                   "--spec-tokens": "num_speculative_tokens"}
API_SERVER_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server")


class ArgvError(ValueError):
    """The command line is not a vLLM server launch, or a value in it is malformed."""


@dataclass(frozen=True, slots=True)
class Option:
    """One flag as written: `--flag value`, `--flag=value`, or a bare boolean flag."""

    flag: str  # as written, e.g. "-tp" or "--tensor-parallel-size"
    value: str | None
    joined: bool = False  # written as --flag=value

    @property
    def name(self) -> str:
        return SHORT_FLAGS.get(self.flag, self.flag)

    def tokens(self) -> list[str]:
        if self.value is None:
            return [self.flag]
        return [f"{self.flag}={self.value}"] if self.joined else [self.flag, self.value]


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """A parsed `vllm serve` launch. `program` + `items` render back to the original argv."""

    program: tuple[str, ...]  # e.g. ("vllm", "serve") or ("python", "-m", "vllm...api_server")
    items: tuple[Option | str, ...]  # options and positionals, in order
    problems: tuple[str, ...] = field(default=())

    # -- reading -----------------------------------------------------------------------------
    def option(self, name: str) -> Option | None:
        """The last occurrence of a flag (argparse keeps the last), by its long name."""
        found = None
        for item in self.items:
            if isinstance(item, Option) and item.name == name:
                found = item
        return found

    def value(self, name: str) -> str | None:
        opt = self.option(name)
        return opt.value if opt is not None else None

    @property
    def model(self) -> str | None:
        flagged = self.value("--model")
        positional = next((i for i in self.items if isinstance(i, str)), None)
        return positional if positional is not None else flagged

    @property
    def quantization(self) -> str | None:
        return self.value("--quantization")

    def _int(self, name: str, default: int) -> int:
        raw = self.value(name)
        try:
            return int(raw) if raw is not None else default
        except ValueError:
            return default

    @property
    def tensor_parallel_size(self) -> int:
        return self._int("--tensor-parallel-size", 1)

    @property
    def pipeline_parallel_size(self) -> int:
        return self._int("--pipeline-parallel-size", 1)

    @property
    def data_parallel_size(self) -> int:
        return self._int("--data-parallel-size", 1)

    @property
    def max_model_len(self) -> int | None:
        raw = self.value("--max-model-len")
        return int(raw) if raw is not None and raw.isdigit() and len(raw) <= 18 else None

    @property
    def gpu_memory_utilization(self) -> float | None:
        raw = self.value("--gpu-memory-utilization")
        try:
            return float(raw) if raw is not None else None
        except ValueError:
            return None

    @property
    def linear_backend(self) -> str | None:
        return self.value("--linear-backend")

    @property
    def moe_backend(self) -> str | None:
        return self.value("--moe-backend")

    @property
    def kv_cache_dtype(self) -> str | None:
        return self.value("--kv-cache-dtype")

    @property
    def hf_overrides(self) -> dict[str, Any] | None:
        return _json_flag(self.value("--hf-overrides"))

    @property
    def speculative_config(self) -> dict[str, Any] | None:
        """The JSON config merged with the `--spec-*` shorthands; None when speculation is off."""
        config = dict(_json_flag(self.value("--speculative-config")) or {})
        for flag, key in SPEC_SHORTHANDS.items():
            raw = self.value(flag)
            if raw is not None:
                counted = key == "num_speculative_tokens" and raw.isdigit() and len(raw) <= 18
                config[key] = int(raw) if counted else raw
        return config or None

    @property
    def uses_mtp(self) -> bool:
        config = self.speculative_config or {}
        method = str(config.get("method", "")).lower()
        return method == "mtp" or method.endswith("_mtp")

    # -- writing -----------------------------------------------------------------------------
    def argv(self) -> list[str]:
        out = list(self.program)
        for item in self.items:
            out.extend([item] if isinstance(item, str) else item.tokens())
        return out

    def with_option(self, name: str, value: str | None) -> LaunchSpec:
        """A copy with the flag set (replacing every occurrence, short forms included)."""
        items: list[Option | str] = []
        placed = False
        for item in self.items:
            if isinstance(item, Option) and item.name == name:
                if not placed:  # keep the operator's spelling (-tp stays -tp)
                    items.append(Option(item.flag, value, item.joined and value is not None))
                    placed = True
                continue
            items.append(item)
        if not placed:
            items.append(Option(name, value))
        return replace(self, items=tuple(items))

    def with_model(self, path: str) -> LaunchSpec:
        """A copy serving `path`: in place of the positional model, else as --model."""
        items = list(self.items)
        for index, item in enumerate(items):
            if isinstance(item, str):
                items[index] = path
                return replace(self, items=tuple(items))
        return self.with_option("--model", path)

    def with_flags_as(self, canonical: Callable[[str], str]) -> LaunchSpec:
        """A copy whose options are spelled as `canonical` reads them (the way the release's
        parser reads `--max_model_len` or `--max-model`), values and order kept."""
        return replace(self, items=tuple(
            Option(canonical(i.name), i.value, i.joined) if isinstance(i, Option) else i
            for i in self.items))

    def without_option(self, name: str) -> LaunchSpec:
        return replace(self, items=tuple(i for i in self.items
                                         if not (isinstance(i, Option) and i.name == name)))

    def summary(self) -> dict[str, Any]:
        return {
            "model": self.model, "quantization": self.quantization,
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "data_parallel_size": self.data_parallel_size,
            "speculative_config": self.speculative_config, "hf_overrides": self.hf_overrides,
            "linear_backend": self.linear_backend, "moe_backend": self.moe_backend,
            "kv_cache_dtype": self.kv_cache_dtype, "max_model_len": self.max_model_len,
            "gpu_memory_utilization": self.gpu_memory_utilization,
        }


def _json_flag(raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, nested beyond the parser, huge numbers
        return None
    return value if isinstance(value, dict) else None


def _program_length(argv: list[str]) -> int:
    """How many leading tokens name the program (`vllm serve`, `python -m ...api_server`)."""
    for i, token in enumerate(argv[:6]):
        base = token.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(argv) and argv[i + 1] == "serve":
            return i + 2
        if token == "-m" and i + 1 < len(argv):
            module = argv[i + 1]
            if module in API_SERVER_MODULES:
                return i + 2
            if module in ("vllm.entrypoints.cli.main", "vllm") and i + 2 < len(argv) \
                    and argv[i + 2] == "serve":
                return i + 3
    raise ArgvError(
        "not a vLLM server command line: expected `vllm serve MODEL ...` or "
        f"`python -m vllm.entrypoints.openai.api_server ...`, got {shlex.join(argv[:4])!r}")


def parse_launch(argv: list[str] | str) -> LaunchSpec:
    """Parse argv (a list, or one shell-quoted string) into a LaunchSpec."""
    if isinstance(argv, str):
        try:
            argv = shlex.split(argv)
        except ValueError as exc:
            raise ArgvError(f"cannot split the command line: {exc}") from exc
    if not argv:
        raise ArgvError("empty command line")
    start = _program_length(argv)
    items: list[Option | str] = []
    problems: list[str] = []
    i = start
    while i < len(argv):
        token = argv[i]
        if token.startswith("-") and token != "-" and not _is_number(token):
            if "=" in token and (token.startswith("--")
                                 or token.partition("=")[0] in SHORT_FLAGS):  # -tp=4 too
                flag, _, value = token.partition("=")
                items.append(Option(flag, value, joined=True))
            elif token in BOOLEAN_FLAGS or i + 1 >= len(argv) or (
                    argv[i + 1].startswith("--") and token not in ("--hf-overrides",)):
                items.append(Option(token, None))
            else:
                items.append(Option(token, argv[i + 1]))
                i += 1
        else:
            items.append(token)
        i += 1
    spec = LaunchSpec(tuple(argv[:start]), tuple(items))
    for name in ("--speculative-config", "--hf-overrides"):
        raw = spec.value(name)
        if raw is not None and _json_flag(raw) is None:
            problems.append(f"{name} is not a JSON object: {raw[:80]!r}")
    if spec.model is None:
        problems.append("no model given (positional MODEL or --model)")
    return replace(spec, problems=tuple(problems))


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


SUMMARY_FLAGS = (("quantization", "--quantization"),
                 ("tensor_parallel_size", "--tensor-parallel-size"),
                 ("pipeline_parallel_size", "--pipeline-parallel-size"),
                 ("data_parallel_size", "--data-parallel-size"),
                 ("speculative_config", "--speculative-config"),
                 ("hf_overrides", "--hf-overrides"), ("linear_backend", "--linear-backend"),
                 ("moe_backend", "--moe-backend"), ("kv_cache_dtype", "--kv-cache-dtype"),
                 ("max_model_len", "--max-model-len"),
                 ("gpu_memory_utilization", "--gpu-memory-utilization"))


def launch_from_summary(summary: dict[str, Any], model: str) -> LaunchSpec:
    """A launch with the settings `LaunchSpec.summary()` keeps (what logwatch reasons
    about), serving `model`: for judging a configuration whose command line is not known
    (a log's `non-default args`), never for starting one."""
    argv = ["vllm", "serve", model]
    for key, flag in SUMMARY_FLAGS:
        value = summary.get(key)
        if value is None or (key.endswith("_parallel_size") and value == 1):
            continue
        argv += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return parse_launch(argv)
