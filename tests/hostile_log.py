"""A log written to break ingestion: overlong, garbage and hostile fields around real vLLM
failures, for tests that follow it with a real daemon (`hostile_log`), and the single real
failures planted among them (`PLANTS`), each with the signature and the line it is found at."""

from __future__ import annotations

import random
from dataclasses import dataclass

MARLIN_SIGNATURE = "marlin.repack_tile_n"


def marlin_failure(pid: int = 2450) -> list[bytes]:
    """A Marlin repack failure in a worker's traceback, as vLLM prints it (its last line is
    the finding's)."""
    head = f"(Worker_TP0 pid={pid}) ERROR 12-04 10:00:09 [multiproc_executor.py:631] "
    return [(head + text).encode() for text in (
        "WorkerProc failed to start.",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/'
        'quantization/utils/marlin_utils_fp4.py", line 231, in prepare_fp4_layer_for_marlin',
        "    marlin_qweight = ops.gptq_marlin_repack(",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/_custom_ops.py", line 1106, '
        "in gptq_marlin_repack",
        "    return torch.ops._C.gptq_marlin_repack(b_q_weight, perm, size_k, size_n, "
        "num_bits, is_a_8bit)",
        "RuntimeError: size_n = 40 is not divisible by tile_n_size = 64")]


@dataclass(frozen=True)
class Plant:
    """A real failure: its lines, and the signature found at its `at`-th line (0-based)."""

    signature: str
    lines: tuple[bytes, ...]
    at: int


def _traceback(head: str, *body: str) -> tuple[bytes, ...]:
    return tuple((head + text).encode() for text in body)


PLANTS = (
    Plant(MARLIN_SIGNATURE, tuple(marlin_failure()), 6),
    Plant("memory.no_cache_blocks", _traceback(
        "(EngineCore pid=330) ERROR 09-12 09:03:11 [core.py:1100] ",
        "EngineCore failed to start.", "Traceback (most recent call last):",
        '  File "/opt/vllm/vllm/v1/core/kv_cache_planning.py", line 60, in '
        "check_enough_kv_cache_memory",
        "    raise ValueError(",
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine."), 4),
    Plant("weights.corrupt_safetensors", _traceback(
        "(EngineCore pid=970) ERROR 09-12 14:42:00 [core.py:1100] ",
        "EngineCore failed to start.", "Traceback (most recent call last):",
        '  File "/opt/vllm/vllm/model_executor/model_loader/weight_utils.py", line 700, in '
        "safetensors_weights_iterator",
        '    with safe_open(st_file, framework="pt") as f:',
        "safetensors_rust.SafetensorError: Error while deserializing header: incomplete "
        "metadata, file not fully covered"), 4),
    Plant("distributed.world_size_mismatch", _traceback(
        "(EngineCore_0 pid=77) ERROR 05-02 09:00:20 [core.py:396] ",
        "EngineCore failed to start.", "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/'
        'multiproc_executor.py", line 60, in _init_executor',
        "    assert self.world_size == tensor_parallel_size, (",
        "AssertionError: world_size (4) must be equal to the tensor_parallel_size (2). "
        "Pipeline parallelism is not yet implemented in v1"), 4),
    Plant("engine.nan_logits", (
        b"(Worker pid=740) ERROR 09-12 13:20:00 [multiproc_executor.py:702] RuntimeError: "
        b"NaNs detected in logits: {'chatcmpl-8b1f-0': 131072}",), 0),
)

OVERLONG_PID_LINE = (b"(EngineCore pid=99999999999999999999999) ERROR 12-04 10:00:05 [core.py:700] "
                     b"EngineCore failed to start.")


def _digits(rng: random.Random) -> str:
    """A number no field can hold: past 32, 64 and 128 bits, or past Python's own limit on
    converting a string of digits to an int."""
    return str(rng.randint(1, 9)) + "".join(rng.choices("0123456789", k=rng.choice(
        (11, 20, 40, 100, 5000))))


def hostile_line(rng: random.Random, big: bool) -> bytes:
    """One line made to break a parser or a column (`big`: one may be a 1 MiB line)."""
    n = _digits(rng)
    month = rng.choice(("99", "00", "13", "12", n[:6]))
    kinds = [
        f"(EngineCore pid={n}) ERROR 12-04 10:00:05 [core.py:700] EngineCore failed to start.",
        f"(Worker_TP0 rank={n} pid={n}) ERROR 12-04 10:00:06 [core.py:{n}] RuntimeError: x",
        f"(Worker_PP{n}_TP{n} pid=12) WARNING 12-04 10:00:06 [w.py:1] something",
        f"(APIServer pid=7) INFO {month}-{month} 99:99:99 [api_server.py:1] vLLM API server "
        f"version 0.11.{n}",
        f"(EngineCore pid=8) INFO 12-04 10:00:06 [core.py:93] Initializing a V1 LLM engine "
        f"(v0.11.2) with config: model='/m', tensor_parallel_size={n}, quantization=fp8, "
        f"speculative_config=SpeculativeConfig(method='mtp', num_spec_tokens={n})",
        f"(APIServer pid=7) INFO 12-04 10:00:01 [utils.py:233] non-default args: "
        f"{{'model_tag': '/m', 'tensor_parallel_size': {n[:200]}, 'max_model_len': -{n[:30]}}}",
        f"E{month[:2]}{month[:2]} 10:00:00.123456 {n} {n}.py:{n}] glog line",
        f'{{"process": {n[:300]}, "level": "ERROR", "message": "json {n[:50]}"}}',
        f"(APIServer pid=7) INFO 12-04 10:00:05 [metrics.py:101] SpecDecoding metrics: Mean "
        f"acceptance length: {n}, Accepted throughput: 1.00 tokens/s, Drafted throughput: 1.00 "
        f"tokens/s, Accepted: {n} tokens, Drafted: {n} tokens, Per-position acceptance rate: "
        f"0.8, Avg Draft acceptance rate: 80.0%",
        f"(Worker pid=1) ERROR 12-04 10:00:07 [x.py:1] RuntimeError: size_n = {n} is not "
        f"divisible by tile_n_size = {n}",
        "(APIServer pid=7) ERROR 12-04 10:00:07 [x.py:1] '; DROP TABLE findings; -- "
        "\" OR 1=1; COPY findings TO '/tmp/pwn'; ATTACH '/etc/passwd'",
        "\x1b[31m\x1b]0;title\x07\x1b[2J(EngineCore pid=5)\x1b[0m ERROR 12-04 10:00:05 "
        "[core.py:1] \x1b[6n colours and a terminal query",
        "".join(chr(rng.randrange(0, 32)) for _ in range(rng.randrange(1, 200))),
        "token=hf_" + "A" * 34 + " Authorization: Bearer sk-" + "x" * 40 + " pid=" + n,
    ]
    if rng.random() < 0.15:  # raw bytes: invalid UTF-8, NULs, stray surrogate encodings
        return bytes(rng.choice((0, 0xFF, 0xC3, 0xED, 0xA0, 0x80, 0x28, 0x0A + 1, 0x1B))
                     for _ in range(rng.randrange(1, 300))) + b"\xed\xa0\x80\x00"
    # the version, engine-config and argument lines each begin or describe a launch: rarer,
    # so the log is a few hundred launches rather than thousands (the test stays quick)
    weights = [1.0] * len(kinds)
    weights[3] = weights[4] = weights[5] = 0.2
    line = rng.choices(kinds, weights)[0].encode()
    if big:
        line += b"9" * (1 << 20)
    return line.replace(b"\n", b" ")


def hostile_log(seed: int, lines: int = 10_000, big_lines: int = 3
                ) -> tuple[bytes, list[tuple[str, int]]]:
    """`lines` hostile lines with every plant set among them; the content, and each plant's
    (signature, 1-based line) where its finding is expected."""
    rng = random.Random(seed)
    out: list[bytes] = []
    expected: list[tuple[str, int]] = []
    slots = sorted(rng.sample(range(50, lines - 50), len(PLANTS) * 2))
    plants = {slot: PLANTS[i % len(PLANTS)] for i, slot in enumerate(slots)}
    bigs = set(rng.sample(range(lines), big_lines))
    for index in range(lines):
        plant = plants.get(index)
        if plant is not None:
            expected.append((plant.signature, len(out) + 1 + plant.at))
            out.extend(plant.lines)
        out.append(hostile_line(rng, index in bigs))
    return b"\n".join(out) + b"\n", expected
