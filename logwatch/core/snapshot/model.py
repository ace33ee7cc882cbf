"""The configuration in force when vLLM ran: launch, environment, model, vLLM version, GPU.

A snapshot is assembled from facts the shells gather (argv, /proc, systemd, the model
directory, nvidia-smi, vLLM's own log lines); every piece says where it came from, secrets are
redacted before it exists, and its content hash identifies it across scans and restarts.

The hash covers what shapes vLLM's behaviour, so an unchanged configuration started again has
the same one: argv and the launch read from it; the environment (below); the model's facts
and the digests of the model files they come from; the vLLM release; the GPU (name, count,
driver, compute capability). Not how or where the pieces were read (`sources`, `problems`,
the GPU facts' `source`).

The environment is kept by name: the variables of vLLM and of the libraries it runs on
(`BEHAVIOUR_ENV_PREFIXES`: VLLM_, CUDA_ (CUDA_VISIBLE_DEVICES), NCCL_, TORCH_, TORCHINDUCTOR_,
PYTORCH_, TRITON_, FLASHINFER_, HF_, TRANSFORMERS_, TOKENIZERS_, NVIDIA_, OMP_) and those that
change which code is loaded (`BEHAVIOUR_ENV_NAMES`: LD_LIBRARY_PATH, LD_PRELOAD, PYTHONPATH),
secret values masked (a new HF_TOKEN is the same configuration). Everything else is dropped
from the snapshot altogether, not only from the hash: INVOCATION_ID, JOURNAL_STREAM, PWD,
SHLVL, `_`, SYSTEMD_EXEC_PID, LISTEN_*, NOTIFY_SOCKET, SSH_*, TERM and the like differ from one
start to the next or describe the session that started vLLM, and a body showing them would
differ between snapshots of one hash; every variable kept is also one more place for a secret
the masking might not recognise. PATH is dropped too: the vLLM release it leads to is recorded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from logwatch.core.quant.ignore import merge_overrides
from logwatch.core.quant.mtp_layout import MtpLayout, mtp_layout, text_config
from logwatch.core.quant.scheme import QuantFacts, derive_quant
from logwatch.core.safe_text.redact import is_secret_name, redact, redact_argv, redact_env
from logwatch.core.snapshot.argv import LaunchSpec

BEHAVIOUR_ENV_PREFIXES = ("VLLM_", "CUDA_", "NCCL_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_",
                          "TRITON_", "FLASHINFER_", "HF_", "TRANSFORMERS_", "TOKENIZERS_",
                          "NVIDIA_", "OMP_")
BEHAVIOUR_ENV_NAMES = frozenset({"LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH"})


def behaviour_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that change what vLLM does (see the module's docstring), as given."""
    return {k: v for k, v in env.items()
            if k.startswith(BEHAVIOUR_ENV_PREFIXES) or k in BEHAVIOUR_ENV_NAMES}


@dataclass(frozen=True, slots=True)
class GpuFacts:
    name: str | None = None
    count: int = 0
    driver: str | None = None
    capability: int | None = None  # e.g. 90 for sm_90, 100 for sm_100
    source: str = "unknown"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "count": self.count, "driver": self.driver,
                "capability": self.capability, "source": self.source}


@dataclass(frozen=True, slots=True)
class ModelFacts:
    path: str
    architectures: tuple[str, ...]
    model_type: str | None
    num_hidden_layers: int | None
    dims: dict[str, int]  # hidden_size, intermediate_size, ... for naming failing layers
    quant: QuantFacts
    effective_ignore: tuple[str, ...]
    ignore_replaced: tuple[str, ...]  # checkpoint entries an --hf-overrides list dropped
    mtp: MtpLayout | None
    tensor_count: int
    problems: tuple[str, ...] = ()
    # sha256 of each model file read (config.json, the quantization configs, the safetensors
    # index or a single file's header, the generation and chat-template configs): the facts
    # above are what logwatch understands of them, the digests what vLLM was given
    files: dict[str, str] = field(default_factory=dict)

    def to_dict(self, vllm_version: str | None = None) -> dict[str, Any]:
        """The MTP coverage judged under the rules of `vllm_version` (None: every release)."""
        return {"path": self.path, "architectures": list(self.architectures),
                "model_type": self.model_type, "num_hidden_layers": self.num_hidden_layers,
                "dims": dict(self.dims), "quant": self.quant.to_dict(),
                "effective_ignore": list(self.effective_ignore),
                "ignore_replaced": list(self.ignore_replaced),
                "mtp": self.mtp.to_dict(vllm_version) if self.mtp else None,
                "tensor_count": self.tensor_count, "problems": list(self.problems),
                "files": dict(self.files)}


DIM_KEYS = ("hidden_size", "intermediate_size", "moe_intermediate_size",
            "shared_expert_intermediate_size", "num_attention_heads", "num_key_value_heads",
            "head_dim", "q_lora_rank", "kv_lora_rank", "vocab_size")


def model_facts(path: str, config: dict[str, Any], tensor_names: Sequence[str],
                hf_quant_config: dict[str, Any] | None = None,
                standalone_quant: dict[str, Any] | None = None,
                hf_overrides: dict[str, Any] | None = None,
                problems: Sequence[str] = (),
                files: Mapping[str, str] | None = None) -> ModelFacts:
    """Interpret a model directory's files (already parsed) with the launch's overrides;
    `files`: their digests by file name."""
    effective_config = merge_overrides(config, hf_overrides) if hf_overrides else config
    checkpoint_quant = derive_quant(config, hf_quant_config, standalone_quant)
    quant = derive_quant(effective_config, hf_quant_config, standalone_quant)
    replaced: tuple[str, ...] = ()
    if hf_overrides and quant.ignore != checkpoint_quant.ignore:
        replaced = tuple(e for e in checkpoint_quant.ignore if e not in quant.ignore)
    text = text_config(effective_config)
    dims = {k: v for k in DIM_KEYS if isinstance(v := text.get(k), int)}
    layers = text.get("num_hidden_layers")
    return ModelFacts(
        path=path,
        architectures=tuple(str(a) for a in effective_config.get("architectures") or []),
        model_type=str(effective_config.get("model_type") or "") or None,
        num_hidden_layers=layers if isinstance(layers, int) else None, dims=dims,
        quant=quant, effective_ignore=quant.ignore, ignore_replaced=replaced,
        mtp=mtp_layout(effective_config, tensor_names, quant.ignore_rules(
            str(text.get("model_type") or effective_config.get("model_type") or "") or None)),
        tensor_count=len(tensor_names), problems=tuple(problems), files=dict(files or {}))


@dataclass(frozen=True, slots=True)
class Snapshot:
    argv: tuple[str, ...] = ()  # redacted
    launch: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # redacted
    model: ModelFacts | None = None
    vllm_version: str | None = None
    gpu: GpuFacts = field(default_factory=GpuFacts)
    sources: dict[str, str] = field(default_factory=dict)  # what came from where
    problems: tuple[str, ...] = ()

    @property
    def uses_mtp(self) -> bool:
        spec = self.launch.get("speculative_config") or {}
        method = str(spec.get("method", "")).lower()
        return method == "mtp" or method.endswith("_mtp")

    @property
    def tensor_parallel_size(self) -> int:
        value = self.launch.get("tensor_parallel_size")
        return value if isinstance(value, int) and value > 0 else 1

    @property
    def marlin_path(self) -> bool | None:
        """Whether this checkpoint runs through weight-only Marlin on this GPU."""
        return self.model.quant.marlin_path(self.gpu.capability) if self.model else None

    def to_dict(self) -> dict[str, Any]:
        model = self.model.to_dict(self.vllm_version) if self.model else None
        if model is not None:
            model["quant"]["marlin_on_this_gpu"] = self.marlin_path
        return {"argv": list(self.argv), "launch": self.launch, "env": dict(self.env),
                "model": model,
                "vllm_version": self.vllm_version, "gpu": self.gpu.to_dict(),
                "sources": dict(self.sources), "problems": list(self.problems)}

    def identity(self) -> dict[str, Any]:
        """What the content hash covers: the body without how it was read."""
        content = self.to_dict()
        del content["sources"], content["problems"]
        del content["gpu"]["source"]
        return content

    def content_hash(self) -> str:
        """A stable id for this configuration (what it is, not when or how it was read)."""
        canonical = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"),
                               default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def build_snapshot(launch: LaunchSpec | None = None, env: Mapping[str, str] | None = None,
                   model: ModelFacts | None = None, vllm_version: str | None = None,
                   gpu: GpuFacts | None = None, sources: Mapping[str, str] | None = None,
                   problems: Sequence[str] = (), raw_argv: Sequence[str] = ()) -> Snapshot:
    """A snapshot with secrets redacted from argv and environment, and only the variables
    that shape vLLM's behaviour kept. `raw_argv`: a command that is not a vLLM launch,
    recorded as it was (redacted) all the same."""
    return Snapshot(
        argv=tuple(redact_argv(launch.argv() if launch else raw_argv)),
        launch=_redacted_launch(launch) if launch else {},
        env=redact_env(behaviour_env(env or {})), model=model, vllm_version=vllm_version,
        gpu=gpu or GpuFacts(), sources=dict(sources or {}),
        problems=tuple(problems) + (launch.problems if launch else ()))


def _redacted_launch(launch: LaunchSpec) -> dict[str, Any]:
    summary: dict[str, Any] = _redact_values(json.loads(json.dumps(launch.summary(), default=str)))
    return summary


def _redact_values(value: Any, key: str = "") -> Any:
    """Secrets inside launch values (speculative config, overrides): by key name or content."""
    if isinstance(value, dict):
        return {k: _redact_values(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_values(v, key) for v in value]
    if isinstance(value, str):
        return "***" if is_secret_name(key) else redact(value)
    return value


def diff_dicts(left: dict[str, Any], right: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(dotted key, left value, right value) for every differing leaf of two snapshot dicts
    (their `sources`, `problems` and `hash` are about reading, not content, and are skipped,
    as are the `latent_problems` `snapshot show --json` derives from the content)."""
    out: list[tuple[str, Any, Any]] = []

    def walk(prefix: str, x: Any, y: Any) -> None:
        if isinstance(x, dict) and isinstance(y, dict):
            for key in sorted(set(x) | set(y)):
                walk(f"{prefix}.{key}" if prefix else str(key), x.get(key), y.get(key))
        elif x != y:
            out.append((prefix, x, y))

    skip = ("sources", "problems", "hash", "latent_problems")  # latent: derived from the rest
    walk("", {k: v for k, v in left.items() if k not in skip},
         {k: v for k, v in right.items() if k not in skip})
    return out


def diff_snapshots(a: Snapshot, b: Snapshot) -> list[tuple[str, Any, Any]]:
    return diff_dicts(a.to_dict(), b.to_dict())
