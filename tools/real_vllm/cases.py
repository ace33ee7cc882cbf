"""The real-vLLM tier's cases: a model directory, the `vllm serve` arguments, and what an
operator should be told.

`outcome` is the verdict logwatch must reach on the real process (the launch's outcome) and,
for a failure, `causes` the categories that name its cause (any one of them). What a case
expects comes from what the real vLLM printed and why it stopped (docs/real-vllm.md has the
evidence for each), never from what logwatch said.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# the arguments every case shares: a short context, loopback, FP32 (this CPU's BF16 kernel
# dies with an illegal instruction on the first request: a case of its own)
BASE_ARGS = ("--host", "127.0.0.1", "--max-model-len", "256", "--dtype", "float32")


@dataclass(frozen=True)
class Case:
    name: str
    model: str  # a folder made by models.py, or a path that does not exist
    args: tuple[str, ...] = ()  # after BASE_ARGS; a later flag wins in vLLM's parser
    outcome: str = "failed"  # the launch's outcome logwatch must report
    causes: tuple[str, ...] = ()  # root-cause categories that are right (failed cases)
    serve: bool = False  # reaches readiness: then (a request and) Ctrl-C
    request: bool = True  # with serve: send one completion before the Ctrl-C
    request_crashes: bool = False  # the request kills the engine (a failure while serving)
    why: str = ""  # the real failure, in a sentence
    env: dict[str, str] = field(default_factory=dict)
    # the kind of the first failure `logwatch preflight` must predict for it ("": none, a
    # launch that starts, or a failure its configuration does not decide)
    preflight: str = ""


CASES: tuple[Case, ...] = (
    Case("healthy", "healthy", ("--enforce-eager",), outcome="stopped", serve=True,
         why="serves a request, then Ctrl-C (SIGINT to the process group), exit 0"),
    Case("healthy-idle", "healthy", ("--enforce-eager",), outcome="stopped", serve=True,
         request=False, why="comes up, no request, then Ctrl-C, exit 0"),
    Case("fp8-compiled", "fp8", ("--dtype", "bfloat16"), outcome="stopped", serve=True,
         request=False,
         why="an FP8 checkpoint served with torch.compile, then Ctrl-C, exit 0; vLLM logs "
             "EngineDeadError at ERROR on the way down"),
    Case("bf16-request-crash", "healthy", ("--enforce-eager", "--dtype", "bfloat16"),
         serve=True, request_crashes=True, causes=("worker_failed",),
         why="BF16 on this CPU: the worker dies of a signal on the first request (exit code "
             "-4, an illegal instruction, or None); the API server answers 500 and stops"),
    Case("wrong-shape", "wrong-shape", causes=("weight_shape_mismatch",),
         why="gate_proj saved with 256 rows where config.json asks for 512",
         preflight="weight_shape"),
    Case("missing-shard", "missing-shard", causes=("model_not_found",),
         why="the index names a shard that is not in the folder",
         preflight="shard_missing"),
    Case("broken-config", "broken-config", causes=("model_not_found",),
         why="config.json cut off in the middle",
         preflight="config_unreadable"),
    Case("missing-model", "no-such-model", causes=("model_not_found",),
         why="--model names a folder that does not exist (vLLM tries it as a Hub repo id)",
         preflight="model_not_found"),
    Case("max-model-len", "healthy", ("--max-model-len", "100000"),
         causes=("config_invalid",),
         why="--max-model-len above the model's max_position_embeddings (512)",
         preflight="max_model_len"),
    Case("bad-flag", "healthy", ("--no-such-flag",), causes=("config_invalid",),
         why="an argument vLLM's parser does not know: argparse, exit 2",
         preflight="unknown_flag"),
    Case("gpu-mem-util", "healthy", ("--gpu-memory-utilization", "1.5"),
         causes=("config_invalid",), why="--gpu-memory-utilization above 1",
         preflight="invalid_argument"),
    Case("speculative-mtp", "healthy",
         ("--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}'),
         causes=("spec_decode_config",),
         why="MTP speculative decoding on a Llama checkpoint that has no MTP layers",
         preflight="mtp_unsupported"),
    Case("modelopt-nvfp4", "modelopt-nvfp4", ("--dtype", "bfloat16"),
         causes=("nvfp4_backend",),
         why="a ModelOpt NVFP4 checkpoint: no NVFP4 linear kernel on this platform",
         preflight="quant_no_kernel"),
    Case("ct-nvfp4", "ct-nvfp4", ("--dtype", "bfloat16"), causes=("nvfp4_backend",),
         why="a compressed-tensors NVFP4 checkpoint: no NVFP4 linear kernel here",
         preflight="quant_no_kernel"),
    Case("fp8-float32", "fp8", causes=("config_invalid",),
         why="--dtype float32 with an FP8 checkpoint: the method takes BF16 and FP16 only",
         preflight="dtype_unsupported"),
    Case("gptq-unpacked", "gptq", ("--dtype", "bfloat16"), causes=("weight_name_mismatch",),
         why="a GPTQ config over weights never packed: the layer has qweight, the "
             "checkpoint a plain weight",
         preflight="weight_not_quantized"),
    Case("no-tokenizer", "no-tokenizer", causes=("model_not_found",),
         why="the tokenizer's files are not in the model directory",
         preflight="tokenizer_missing"),
    Case("unknown-architecture", "unknown-architecture", causes=("model_unsupported",),
         why="config.json names an architecture vLLM does not register",
         preflight="architecture_unsupported"),
    Case("gptq-width-48", "gptq-width-48", ("--dtype", "bfloat16"),
         causes=("quant_unsupported_gpu",),
         why="GPTQ 4-bit on an MLP 48 wide: no weight-only kernel here takes it (the CPU's "
             "wants multiples of 32, as Marlin wants 64 on a GPU); vLLM lists each kernel's "
             "reason under the error",
         preflight="quant_no_kernel"),
)
