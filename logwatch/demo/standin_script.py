"""The lines a simulated vLLM prints, phase by phase, for an `Outcome`: start-up (API server,
engine core, tensor-parallel workers interleaved), then (unless standin_failures takes over)
the serving banner; stats, access and shutdown lines. Pure: the shell
supplies timestamps, pids and the bound address, and paces the phases.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from logwatch.core.snapshot.model import ModelFacts
from logwatch.demo.standin_format import Line, Writer
from logwatch.demo.standin_outcome import Launch, Outcome, SimulatedGpu

FP4_MARLIN = ("Your GPU does not have native support for FP4 computation but FP4 quantization "
              "is being used. Weight-only FP4 compression will be used leveraging the Marlin "
              "kernel. This may degrade performance for compute-heavy workloads.")
PADDING = ("Marlin requires thread-tile padding for some weight shapes in this model. "
           "Activations and/or outputs of the padded layers are padded/sliced on every "
           "forward; performance may be degraded.")
Stamp = Callable[[], str]


@dataclass(frozen=True, slots=True)
class Scene:
    """Everything a phase's lines are made of."""

    writer: Writer
    facts: ModelFacts
    launch: Launch
    gpu: SimulatedGpu
    outcome: Outcome
    engine_pid: int
    max_model_len: int

    @property
    def ranks(self) -> list[tuple[str, int]]:
        """(process name, pid) of each process holding a model shard."""
        tp = self.launch.tensor_parallel_size
        if tp <= 1:
            return [(self.writer.style.engine_name, self.engine_pid)]
        return [(f"Worker_TP{r}", self.engine_pid + 1 + r) for r in range(tp)]

    def engine(self, level: str, key: str, message: str, stamp: Stamp) -> list[Line]:
        return self.writer.log(self.writer.style.engine_name, self.engine_pid, level, key,
                               message, stamp())

    def each_rank(self, level: str, key: str, message: str, stamp: Stamp) -> list[Line]:
        now = stamp()
        return [line for name, pid in self.ranks
                for line in self.writer.log(name, pid, level, key, message, now)]


def api_start(scene: Scene, stamp: Stamp) -> list[Line]:
    """The API server's first lines: platform, version (logo from 0.25.1), arguments."""
    w, launch, release = scene.writer, scene.launch, scene.outcome.release
    out = w.log("MainProcess", w.api_pid, "INFO", "platform",
                "Automatically detected platform cuda.", stamp())
    if w.style.logo:
        logo = ("       █     █     █▄   ▄█\n"
                f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {release}\n"
                f"  █▄█▀ █     █     █     █  model   {launch.model}\n"
                "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀")
        out += w.api("INFO", "version", logo, stamp())
    else:
        out += w.api("INFO", "version", f"vLLM API server version {release}", stamp())
    out += w.api("INFO", "args", f"non-default args: {launch.non_default!r}", stamp())
    for name in scene.outcome.unknown_env:
        out += w.api("WARNING", "env", f"Unknown vLLM environment variable detected: {name}",
                     stamp())
    if scene.outcome.kind in ("unsupported_architecture", "too_few_gpus"):
        return out
    arch = scene.facts.architectures[0] if scene.facts.architectures else "unknown"
    out += w.api("INFO", "arch", f"Resolved architecture: {arch}", stamp())
    out += w.api("INFO", "max_len", f"Using max model len {scene.max_model_len}", stamp())
    out += w.api("INFO", "chunked",
                 "Chunked prefill is enabled with max_num_batched_tokens=8192.", stamp())
    return out


def engine_start(scene: Scene, stamp: Stamp) -> list[Line]:
    launch, facts = scene.launch, scene.facts
    spec = "None"
    if launch.speculative_config:
        method = launch.speculative_config.get("method")
        tokens = launch.speculative_config.get("num_speculative_tokens", 1)
        spec = f"SpeculativeConfig(method={method!r}, model={launch.model!r}, " \
               f"num_spec_tokens={tokens})"
    quant = launch.quantization or facts.quant.method
    config = (f"model={launch.model!r}, speculative_config={spec}, "
              f"tokenizer={launch.model!r}, skip_tokenizer_init=False, dtype=torch.bfloat16, "
              f"max_seq_len={scene.max_model_len}, "
              f"tensor_parallel_size={launch.tensor_parallel_size}, "
              f"pipeline_parallel_size=1, quantization={quant}, enforce_eager=False, "
              "kv_cache_dtype=auto")
    out = scene.engine("INFO", "engine", f"Initializing a V1 LLM engine (v{scene.outcome.release})"
                       f" with config: {config}", stamp)
    if launch.tensor_parallel_size > 1:
        out += scene.each_rank("INFO", "nccl", "vLLM is using nccl==2.27.3", stamp)
    out += scene.each_rank("INFO", "load", f"Starting to load model {launch.model}...", stamp)
    return out


def load_weights(scene: Scene, stamp: Stamp) -> list[Line]:
    name, pid = scene.ranks[0]
    shards = "Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:01<00:00,  " \
             "1.52it/s]"
    out = scene.writer.raw(name, pid, shards)
    out += scene.each_rank("INFO", "weights", "Loading weights took 1.31 seconds", stamp)
    if scene.outcome.marlin and scene.facts.quant.fp4:
        out += scene.each_rank("WARNING", "fp4_marlin", FP4_MARLIN, stamp)
    if scene.outcome.padded:
        out += scene.each_rank("WARNING", "pad", PADDING, stamp)
    return out


def engine_ready(scene: Scene, stamp: Stamp) -> list[Line]:
    out: list[Line] = []
    if scene.launch.uses_mtp:
        out += scene.each_rank("INFO", "drafter", "Loading drafter model...", stamp)
    # 0.11.2 formats the size with %.4f, 0.25.1 on with %s
    size = f"{21.4:.4f}" if scene.writer.style.read_as < (0, 25, 1) else "21.4"
    out += scene.each_rank("INFO", "loaded",
                           f"Model loading took {size} GiB memory and 3.204113 seconds", stamp)
    kv = scene.gpu.memory_gib * 0.9 - 21.4
    out += scene.each_rank("INFO", "kv_mem", f"Available KV cache memory: {kv:.2f} GiB", stamp)
    tokens = int(kv * 21_800) * scene.launch.tensor_parallel_size
    size_line = f"GPU KV cache size: {tokens:,} tokens"
    if scene.writer.style.read_as >= (0, 33, 0):  # one line with the concurrency in 0.33
        size_line += (f", Maximum concurrency for {scene.max_model_len:,} tokens per request: "
                      f"{tokens / scene.max_model_len:.2f}x")
    out += scene.engine("INFO", "kv_size", size_line, stamp)
    out += scene.each_rank("INFO", "graphs", "Graph capturing finished in 2 secs, took 0.91 GiB",
                           stamp)
    unit = " seconds" if scene.writer.style.read_as < (0, 25, 1) else " s"
    out += scene.engine("INFO", "init", "init engine (profile, create kv cache, warmup model) "
                        f"took 4.12{unit}", stamp)
    return out


ROUTES = (("/health", "GET"), ("/v1/models", "GET"), ("/v1/completions", "POST"))


def serving(scene: Scene, url: str, stamp: Stamp) -> list[Line]:
    """From `Supported tasks` to uvicorn's `Application startup complete.`."""
    w = scene.writer
    out = w.api("INFO", "tasks", "Supported tasks: ['generate']", stamp())
    if w.style.read_as < (0, 25, 1):
        out += w.api("INFO", "serving", f"Starting vLLM API server 0 on {url}", stamp())
    else:
        out += w.api("INFO", "serving", f"Starting vLLM server on {url}", stamp())
    out += w.api("INFO", "routes", "Available routes are:", stamp())
    for path, method in ROUTES:
        out += w.api("INFO", "route", f"Route: {path}, Methods: {method}", stamp())
    out += w.uvicorn(f"Started server process [{w.api_pid}]")
    out += w.uvicorn("Waiting for application startup.")
    out += w.uvicorn("Application startup complete.")
    return out


def access(scene: Scene, client: str, request: str, status: int, phrase: str) -> list[Line]:
    return scene.writer.uvicorn(f'{client} - "{request}" {status} {phrase}', stream="out")


def stats(scene: Scene, requests: int, tokens: int, interval: float, stamp: Stamp
          ) -> list[Line]:
    """One stats interval with traffic: throughput, and acceptance when MTP drafts."""
    w = scene.writer
    rate = tokens / interval if interval > 0 else 0.0
    out = w.api("INFO", "stats", f"Engine 000: Avg prompt throughput: {rate * 0.4:.1f} "
                f"tokens/s, Avg generation throughput: {rate:.1f} tokens/s, Running: 0 reqs, "
                "Waiting: 0 reqs, GPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%",
                stamp())
    if scene.launch.uses_mtp:
        n = int((scene.launch.speculative_config or {}).get("num_speculative_tokens", 1) or 1)
        drafted = max(tokens, 1) * n
        positions = [0.0 if scene.outcome.garbage_draft else max(0.0, 0.87 - 0.1 * i)
                     for i in range(n)]
        accepted = int(drafted * sum(positions) / n)
        out += w.api("INFO", "spec", "SpecDecoding metrics: Mean acceptance length: "
                     f"{1 + sum(positions):.2f}, Accepted throughput: {accepted / interval:.2f} "
                     f"tokens/s, Drafted throughput: {drafted / interval:.2f} tokens/s, "
                     f"Accepted: {accepted} tokens, Drafted: {drafted} tokens, Per-position "
                     f"acceptance rate: {', '.join(f'{p:.3f}' for p in positions)}, Avg Draft "
                     f"acceptance rate: {100 * accepted / drafted:.1f}%", stamp())
    return out


def shutdown(scene: Scene, signal_name: str, stamp: Stamp) -> list[Line]:
    w = scene.writer
    out: list[Line] = []
    if w.style.shutdown_tags:
        out += w.api("INFO", "shutdown", "[shutdown] API server: shutdown triggered", stamp())
        out += scene.engine("INFO", "core_signal",
                            f"[shutdown] EngineCore: trigger received signal={signal_name}", stamp)
        if scene.launch.tensor_parallel_size > 1:
            out += scene.engine("INFO", "workers_exited",
                                "[shutdown] Executor: all workers exited gracefully", stamp)
    if w.style.release[:2] == (0, 32):
        out += teardown_error(scene, stamp)
    for text in ("Shutting down", "Waiting for application shutdown.",
                 "Application shutdown complete.", f"Finished server process [{w.api_pid}]"):
        out += w.uvicorn(text)
    return out


def teardown_error(scene: Scene, stamp: Stamp) -> list[Line]:
    """What a real vLLM 0.32.0 often logs at ERROR during a clean stop (docs/real-vllm.md):
    the engine core is stopped under the API server's output handler, which logs the
    `EngineDeadError` it gets. The stand-in prints it at every stop of 0.32.x, the harder
    case for a verdict."""
    site = "/opt/vllm/lib/python3.11/site-packages/vllm/v1/engine"
    return scene.writer.log(
        "APIServer", scene.writer.api_pid, "ERROR", "output_handler",
        "AsyncLLM output_handler failed.\nTraceback (most recent call last):\n"
        f'  File "{site}/async_llm.py", line 849, in output_handler\n'
        "    outputs = await engine_core.get_output_async()\n"
        f'  File "{site}/core_client.py", line 1235, in get_output_async\n'
        "    raise self._format_exception(outputs) from None\n"
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
        "stack trace (above) for the root cause.", stamp())


def completion_text(prompt: str, max_tokens: int) -> str:
    """A deterministic tiny completion (the stand-in has no model)."""
    words = ["The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog."]
    seed = sum(prompt.encode("utf-8", "replace")) % len(words)
    return " " + " ".join(words[(seed + i) % len(words)] for i in range(max(1, max_tokens)))


def json_body(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
