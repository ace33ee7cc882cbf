"""How a simulated vLLM fails to start: the API server refusing the configuration (an
architecture the release does not register, more ranks than GPUs), or the engine's crash with
every rank's traceback interleaved line by line, the engine core's, multiprocessing's and the
API server's (vllm-logs.md 6.1). Pure, like standin_script.
"""

from __future__ import annotations

from logwatch.demo.standin_format import Line
from logwatch.demo.standin_outcome import Outcome
from logwatch.demo.standin_script import Scene, Stamp

SITE = "/usr/local/lib/python3.12/dist-packages/vllm"
WORKER_INIT = ("Exception: WorkerProc initialization failed due to an exception in a background "
               "process. See stack trace for root cause.")
ENGINE_FAILED = ("RuntimeError: Engine core initialization failed. See root cause above. "
                 "Failed core proc(s): {}")


def unsupported_architecture(scene: Scene) -> list[Line]:
    """The API server refuses the model before any engine starts (registry.py)."""
    w = scene.writer
    archs = list(scene.facts.architectures)
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/vllm", line 10, in <module>',
        "    sys.exit(main())",
        f'  File "{SITE}/model_executor/models/registry.py", line 786, in '
        "_raise_for_unsupported",
        "    raise ValueError(",
        f"ValueError: Model architectures {archs} are not supported for now. Supported "
        f"architectures: dict_keys({list(scene.outcome.supported)})"])
    return w.raw("APIServer", w.api_pid, text)


def too_few_gpus(scene: Scene) -> list[Line]:
    """ParallelConfig's refusal (config/parallel.py): the 0.11.2 text, or 0.25.1's on, raised
    in the pydantic dataclass's validation."""
    w = scene.writer
    world, gpus = scene.outcome.world or (0, 0)
    frames = ["Traceback (most recent call last):",
              '  File "/usr/local/bin/vllm", line 10, in <module>', "    sys.exit(main())",
              f'  File "{SITE}/engine/arg_utils.py", line 1360, in create_engine_config',
              "    parallel_config = ParallelConfig("]
    if w.style.read_as < (0, 25, 1):
        error = [f"ValueError: Tensor parallel size ({world}) cannot be larger than the number "
                 f"of available GPUs ({gpus})."]
    else:
        error = ["pydantic_core._pydantic_core.ValidationError: 1 validation error for "
                 "ParallelConfig",
                 f"  Value error, World size ({world}) is larger than the number of available "
                 f"GPUs ({gpus}) in this node. If this is intentional and you are using:",
                 "- ray, set '--distributed-executor-backend ray'.",
                 "- multiprocessing, set '--nnodes' appropriately. [type=value_error, "
                 "input_value=ArgsKwargs(()), input_type=ArgsKwargs]"]
    return w.raw("APIServer", w.api_pid, "\n".join(frames + error))


def _frames(*pairs: tuple[str, int, str, str]) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for path, number, function, code in pairs:
        lines += [f'  File "{SITE}/{path}", line {number}, in {function}', f"    {code}"]
    return lines


def _marlin_frames(outcome: Outcome) -> list[str]:
    experts = (outcome.failing_layer or "").startswith("experts")
    prepare = ("prepare_moe_fp4_layer_for_marlin", 448) if experts else \
        ("prepare_fp4_layer_for_marlin", 220)
    return [*_frames(
        ("v1/worker/gpu_model_runner.py", 2635, "load_model",
         "self.model = model_loader.load_model("),
        ("model_executor/model_loader/base_loader.py", 55, "load_model",
         "process_weights_after_loading(model, model_config, target_device)"),
        ("model_executor/layers/quantization/utils/marlin_utils_fp4.py", prepare[1], prepare[0],
         "marlin_qweight = ops.gptq_marlin_repack("),
        ("_custom_ops.py", 1106, "gptq_marlin_repack",
         "return torch.ops._C.gptq_marlin_repack(b_q_weight, perm, size_k, size_n, num_bits, "
         "is_a_8bit)"),
    ), f"RuntimeError: {outcome.tile_error}"]


def _mismatch_frames(scene: Scene) -> list[str]:
    a, b = scene.outcome.mismatch or (0, 0)
    return [*_frames(
        ("v1/worker/gpu_model_runner.py", 2700, "load_model",
         "self.drafter.load_model(self.model)"),
        ("v1/spec_decode/eagle.py", 960, "load_model",
         "self.model = get_model(vllm_config=self.vllm_config,"),
        ("model_executor/model_loader/base_loader.py", 49, "load_model",
         "self.load_weights(model, model_config)"),
        ("model_executor/layers/linear.py", 456, "weight_loader",
         "param_data.copy_(loaded_weight)"),
    ), f"RuntimeError: The size of tensor a ({a}) must match the size of tensor b ({b}) "
       "at non-singleton dimension 1"]


def crash(scene: Scene, stamp: Stamp) -> list[Line]:
    """The ranks' tracebacks interleaved line by line, the engine core's, multiprocessing's
    and the API server's (vllm-logs.md 6.1)."""
    w, style, outcome = scene.writer, scene.writer.style, scene.outcome
    frames = _marlin_frames(outcome) if outcome.kind == "marlin_tile" else \
        _mismatch_frames(scene)
    out: list[Line] = []
    if outcome.kind == "tensor_mismatch":
        out += scene.each_rank("INFO", "drafter", "Loading drafter model...", stamp)
    now = stamp()
    core = style.engine_name
    if scene.launch.tensor_parallel_size > 1:
        failing = ["WorkerProc failed to start.", *frames]
        for text in failing:
            for name, pid in scene.ranks:
                out += w.log(name, pid, "ERROR", "worker_failed", text, now)
        engine_tb = [*_frames(("v1/executor/multiproc_executor.py", 97, "_init_executor",
                               "self.workers = WorkerProc.wait_for_ready(unready_workers)")),
                     WORKER_INIT]
        root = WORKER_INIT
    else:
        engine_tb, root = frames, frames[-1]
    out += w.log(core, scene.engine_pid, "ERROR", "core_failed",
                 "\n".join(["EngineCore failed to start.", *engine_tb]), stamp())
    out += w.raw(core, scene.engine_pid, "\n".join([
        f"Process {core}:", "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
        "    self.run()", f'  File "{SITE}/v1/engine/core.py", line 712, in run_engine_core',
        "    raise e", root]))
    out += w.raw("APIServer", w.api_pid, "\n".join([
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/vllm", line 10, in <module>', "    sys.exit(main())",
        f'  File "{SITE}/v1/engine/utils.py", line 880, in wait_for_engine_startup',
        "    raise RuntimeError(", ENGINE_FAILED]))
    return out
