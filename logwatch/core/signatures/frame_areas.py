"""The area of vLLM a traceback's frames name, for an error no signature knows.

A traceback says where it was raised even when its message is new: the deepest vLLM frames
(and a C++ check's `csrc/...` file) are in Marlin, a quantization scheme, the weight loader,
the MTP/EAGLE drafter, KV-cache sizing, NCCL... The innermost vLLM frame that belongs to an
area decides it (a helper such as `vllm/utils.py` below it decides nothing), so an unknown
exception still comes with the part of vLLM that raised it and that part's general advice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Area:
    id: str
    title: str
    paths: re.Pattern[str]  # searched in a frame's path below `vllm/` (or a csrc/ file)
    # and in its function's name
    advice: str


def _paths(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(alternatives))


# Most specific first: a Marlin frame is also under layers/quantization/.
AREAS: tuple[Area, ...] = (
    Area("marlin", "Marlin kernels (weight-only quantized GEMM)",
         _paths(r"marlin", r"csrc/quantization/(?:gptq_)?marlin", r"csrc/moe/marlin"),
         "Marlin runs weight-only (W4A16/W8A16, FP4 and FP8 weights on GPUs without native "
         "support) and needs every layer's width to fit its tiles. Check the shapes of the "
         "layer it names against the quantization (group size, a tensor-parallel split); an "
         "FP4 checkpoint served on a GPU with native FP4 (compute capability 10.0 or newer) "
         "does not need Marlin: serve the W4A4 variant through CUTLASS or FlashInfer."),
    Area("quantization", "a quantization scheme (compressed-tensors, ModelOpt, Quark, FP8, "
         "GPTQ/AWQ, MXFP4/NVFP4)",
         _paths(r"model_executor/layers/quantization/", r"csrc/quantization/",
                r"model_executor/kernels/(?:linear|mixed_precision|scaled_mm)",
                # the custom ops a kernel check raises through (vllm/_custom_ops.py)
                r"^(?:cutlass_|scaled_|machete_|allspark_|awq_|gptq_)", r"_scaled_mm",
                r"(?:fp8|fp4|int8|w4a8|w8a8|mxfp|nvfp)_?\w*(?:quant|mm|gemm)"),
         "The checkpoint's quantization config and its weights disagree with what this "
         "release's scheme code expects. Compare `quantization_config` in config.json (format, "
         "ignore list, group size) with the scheme vLLM picked, and check that the release "
         "supports the scheme on this GPU."),
    Area("moe", "fused MoE layers",
         _paths(r"model_executor/layers/fused_moe/", r"csrc/moe/", r"^(?:fused_)?moe_\w+",
                r"_moe$"),
         "A fused-MoE kernel or its weights: check the expert count and sizes against the "
         "tensor/expert-parallel split and the MoE backend this release chose for the GPU."),
    Area("speculative", "the speculative drafter (MTP, EAGLE, n-gram)",
         _paths(r"spec_decode", r"rejection_sampler", r"(?:^|/)\w*mtp\w*\.py$", r"eagle",
                r"medusa", r"config/speculative\.py"),
         "The draft model or its layers: check `--speculative-config` (method, number of "
         "speculative tokens) against what the model ships, and that the MTP/draft weights "
         "are in the checkpoint and covered by its quantization ignore list."),
    Area("weight_loading", "the weight loader",
         _paths(r"model_executor/model_loader/", r"weight_utils\.py", r"models/utils\.py",
                r"^weight_loader", r"^load_weights$", r"_weight_loader$"),
         "Loading the checkpoint's weights: a tensor of the wrong shape or dtype, a missing "
         "or extra shard, or a name the model does not map. Check the checkpoint files "
         "(index, shard list, config.json) against the architecture it names."),
    Area("kv_cache", "KV-cache sizing and memory profiling",
         _paths(r"kv_cache", r"core/block_pool\.py", r"memory_profil",
                r"^determine_available_memory$", r"^profile_run$"),
         "Memory for the KV cache: check `--gpu-memory-utilization`, `--max-model-len`, "
         "`--max-num-seqs` and what else holds GPU memory on the device."),
    Area("distributed", "distributed communication (NCCL, Ray, custom all-reduce)",
         _paths(r"^vllm/distributed/", r"device_communicators",
                r"parallel_state\.py", r"executor/ray", r"csrc/custom_all_reduce"),
         "Communication between ranks: check NCCL (`NCCL_DEBUG=INFO`), the GPUs' P2P "
         "topology, the tensor/pipeline-parallel sizes against the GPUs there are, and "
         "that every rank runs the same release."),
    Area("attention", "attention backends",
         _paths(r"attention/", r"csrc/attention"),
         "An attention backend: check which backend this release picked for the GPU and "
         "dtype (`VLLM_ATTENTION_BACKEND` forces one) and the head size it supports."),
    Area("compilation", "torch.compile and CUDA graphs",
         _paths(r"compilation/"),
         "torch.compile or CUDA-graph capture: `--enforce-eager` starts without them and "
         "tells whether the failure is theirs."),
    Area("config", "configuration and argument checks",
         _paths(r"^vllm/config/", r"^vllm/engine/arg_utils\.py", r"transformers_utils/"),
         "A configuration value or the model's config.json: read the check's message "
         "against the flags and the model directory."),
    Area("model", "the model definition",
         _paths(r"model_executor/models/", r"^vllm/models/"),
         "The model's own code in this release: check that the release supports the "
         "architecture and the checkpoint's variant of it."),
    Area("api_server", "the OpenAI-compatible API server",
         _paths(r"^vllm/entrypoints/"),
         "The API server: a request it could not serve, or its own start-up (arguments, chat "
         "template, tool parser). Check the request or the flags it names."),
    Area("engine", "the engine core and its workers",
         _paths(r"^vllm/(?:v1/)?(?:engine|executor|worker)/"),
         "The engine core or a worker: the exception above is the cause; the lines that "
         "follow it in other processes are consequences."),
)
BY_ID = {area.id: area for area in AREAS}

# a Python traceback's frame line (the fallback and the placing read it too)
FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_SLASHES = re.compile(r"/{2,}")
_CSRC = re.compile(r"(?P<path>csrc/[\w./-]+\.(?:cu|cuh|cpp|cc|h|hpp))")


def vllm_path(path: str) -> str | None:
    """The part of a frame's path from `vllm/` on; None for a frame outside vLLM (another
    installed package, even in a virtual environment that lives in a `vllm/` folder). A
    Windows path is read too, its backslashes doubled or not."""
    path = _SLASHES.sub("/", path.replace("\\", "/"))
    for installed in ("site-packages/", "dist-packages/"):
        cut = path.rfind(installed)
        if cut >= 0:
            inside = path[cut + len(installed):]
            return inside if inside.startswith("vllm/") else None
    cut = path.rfind("/vllm/")
    found = path[cut + 1:] if cut >= 0 else path if path.startswith("vllm/") else None
    # a source checkout's module, not a console script (`/opt/vllm/bin/vllm`)
    return found if found is not None and "/bin/" not in found else None


def frames(lines: Iterable[str]) -> list[tuple[str, str, str]]:
    """(vLLM path, line, function) of each vLLM frame in a traceback's lines, outermost first."""
    found = []
    for line in lines:
        match = FRAME.match(line)
        if match is not None:
            path = vllm_path(match.group("path"))
            if path is not None:
                found.append((path, match.group("line"), match.group("func")))
    return found


def area_of(lines: Iterable[str]) -> Area | None:
    """The area the traceback's innermost vLLM frames name, or a C++ check's `csrc/` file
    (which is deeper than any Python frame); None when no frame belongs to one."""
    lines = list(lines)
    for line in reversed(lines):
        for match in _CSRC.finditer(line):
            for area in AREAS:
                if area.paths.search(match.group("path")):
                    return area
    for path, _, func in reversed(frames(lines)):
        # the frame's file first (a distributed connector's `register_kv_caches` is
        # distributed), then its function's name (an op in vllm/_custom_ops.py)
        found = area_of_path(path) or next((a for a in AREAS if a.paths.search(func)), None)
        if found is not None:
            return found
    return None


def area_of_path(path: str) -> Area | None:
    """The area a file of vLLM's sources belongs to (`vllm/...` or `csrc/...`)."""
    return next((area for area in AREAS if area.paths.search(path)), None)
