"""How long `logwatch preflight` takes on a large checkpoint's directory: a Qwen3-MoE of 48
layers of 128 experts (18,700 tensors, about 100 GB of BF16 in 40 shards, written as sparse
files: the headers are real, the data is holes), timed as a user runs it, best of `--runs`.

    python benchmarks/preflight_bench.py [--runs 5] [--keep DIR]

The goal (issue 33): under 2 s, the headers read and no weight."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.model_dirs import Shape, write_safetensors  # noqa: E402

CONFIG = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
          "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 1280,
          "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1,
          "mlp_only_layers": [], "num_hidden_layers": 48, "num_attention_heads": 32,
          "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936,
          "max_position_embeddings": 40960, "tie_word_embeddings": False,
          "torch_dtype": "bfloat16"}
SHARDS = 40


def tensors() -> dict[str, Shape]:
    c = CONFIG
    h, d, moe = c["hidden_size"], c["head_dim"], c["moe_intermediate_size"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    out: dict[str, Shape] = {"model.embed_tokens.weight": ("BF16", (c["vocab_size"], h)),
                             "model.norm.weight": ("BF16", (h,)),
                             "lm_head.weight": ("BF16", (c["vocab_size"], h))}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out |= {p + "input_layernorm.weight": ("BF16", (h,)),
                p + "post_attention_layernorm.weight": ("BF16", (h,)),
                p + "self_attn.q_proj.weight": ("BF16", (q, h)),
                p + "self_attn.k_proj.weight": ("BF16", (kv, h)),
                p + "self_attn.v_proj.weight": ("BF16", (kv, h)),
                p + "self_attn.o_proj.weight": ("BF16", (h, q)),
                p + "self_attn.q_norm.weight": ("BF16", (d,)),
                p + "self_attn.k_norm.weight": ("BF16", (d,)),
                p + "mlp.gate.weight": ("BF16", (c["num_experts"], h))}
        for e in range(c["num_experts"]):
            x = f"{p}mlp.experts.{e}."
            out |= {x + "gate_proj.weight": ("BF16", (moe, h)),
                    x + "up_proj.weight": ("BF16", (moe, h)),
                    x + "down_proj.weight": ("BF16", (h, moe))}
    return out


def build(path: Path) -> tuple[int, int]:
    """The checkpoint: (tensors, bytes of weights its headers describe)."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(CONFIG, indent=2))
    (path / "tokenizer.json").write_text("{}")
    every = tensors()
    names = list(every)
    weight_map: dict[str, str] = {}
    for k in range(SHARDS):
        shard = f"model-{k + 1:05d}-of-{SHARDS:05d}.safetensors"
        part = {n: every[n] for n in names[k::SHARDS]}
        write_safetensors(path / shard, part)
        weight_map |= dict.fromkeys(part, shard)
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    size = sum((path / s).stat().st_size for s in set(weight_map.values()))
    return len(every), size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="build the checkpoint here and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="logwatch-preflight-bench-"))
    model = work / "qwen3-moe-100g"
    try:
        if not model.exists():
            count, size = build(model)
        else:
            count, size = len(tensors()), sum(p.stat().st_size for p in model.glob("*.safetensors"))
        command = [sys.executable, "-m", "logwatch", "preflight", "--model-dir", str(model),
                   "--cmdline", f"vllm serve {model} --max-model-len 32768",
                   "--vllm-version", "0.32.0", "--gpu-capability", "9.0"]
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            times.append(time.perf_counter() - started)
            if done.returncode != 0:
                print(done.stdout + done.stderr, file=sys.stderr)
                return 1
        print(f"preflight of a {size / 1e9:.0f} GB checkpoint ({count:,} tensors in {SHARDS} "
              f"shards, headers read): best {min(times):.2f} s, median "
              f"{sorted(times)[len(times) // 2]:.2f} s of {args.runs} (goal < 2 s); "
              f"a clean start predicted")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
