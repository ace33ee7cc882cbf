"""The pre-flight's shape tables (core/checkpoint/families.py) against transformers itself:
each family's model built from a tiny config on the meta device by an interpreter that has
torch and transformers (the real-vLLM tier's venv, or $LOGWATCH_TRANSFORMERS_PYTHON), and
every tensor the table judges must have the shape the table says; most must be judged.
Skipped, with the reason, where no such interpreter is here."""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.checkpoint.families import expected
from tests.conftest import ROOT

BASE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 96,
        "tie_word_embeddings": False, "pad_token_id": 0}
MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
       "decoder_sparse_step": 1, "mlp_only_layers": [0]}
DEEPSEEK = {"n_routed_experts": 4, "n_shared_experts": 2, "num_experts_per_tok": 2,
            "moe_intermediate_size": 32, "first_k_dense_replace": 1, "moe_layer_freq": 1,
            "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
            "v_head_dim": 16, "num_key_value_heads": 4, "n_group": 1, "topk_group": 1}
# Keys left out on purpose where config.json may leave them out (families.py's defaults):
# llama's num_key_value_heads, the head_dim of all but mistral, glm4's attention_bias.
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {**{k: v for k, v in BASE.items() if k != "num_key_value_heads"},
              "model_type": "llama"},
    "mistral": {**BASE, "model_type": "mistral", "head_dim": 32},  # not hidden / heads
    "qwen2": {**BASE, "model_type": "qwen2"},  # q/k/v biases
    "qwen3": {**BASE, "model_type": "qwen3"},  # q/k norms
    "qwen2_moe": {**BASE, **MOE, "model_type": "qwen2_moe",
                  "shared_expert_intermediate_size": 48},
    "qwen3_moe": {**BASE, **MOE, "model_type": "qwen3_moe"},
    "deepseek_v2": {**BASE, **DEEPSEEK, "model_type": "deepseek_v2", "q_lora_rank": None},
    "deepseek_v3": {**BASE, **DEEPSEEK, "model_type": "deepseek_v3", "q_lora_rank": 48},
    "glm4": {**BASE, "model_type": "glm4"},
    "glm4_moe": {**BASE, **DEEPSEEK, "model_type": "glm4_moe", "attention_bias": True,
                 "use_qk_norm": True},
}


def interpreter() -> Path | None:
    given = os.environ.get("LOGWATCH_TRANSFORMERS_PYTHON")
    for candidate in ([Path(given)] if given else []) + [
            ROOT / ".real-vllm" / "venv-0.32.0" / "bin" / "python"]:
        if candidate.is_file():
            return candidate
    return None


@cache
def built() -> dict[str, dict[str, Any]]:
    python = interpreter()
    if python is None:
        pytest.skip("no interpreter with torch and transformers (make real-vllm installs "
                    "one; or set LOGWATCH_TRANSFORMERS_PYTHON)")
    done = subprocess.run([str(python), str(ROOT / "tools" / "checkpoint_oracle" / "probe.py")],
                          input=json.dumps(FAMILIES), capture_output=True, text=True,
                          timeout=600, check=False)
    if done.returncode != 0:
        pytest.skip(f"{python} cannot build the models: {done.stderr.strip()[-300:]}")
    result: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_shape_table_agrees_with_transformers(family: str) -> None:
    tensors = built()[family]
    if "error" in tensors:
        pytest.fail(f"transformers could not build {family}: {tensors['error']}")
    lookup = expected(FAMILIES[family])
    assert lookup is not None
    judged, wrong = 0, []
    for name, shape in tensors.items():
        want = lookup(name)
        if want is None:
            continue
        judged += 1
        if tuple(shape) != want.shape:
            wrong.append(f"{name}: transformers {shape}, table {list(want.shape)}")
    assert wrong == []
    unjudged = sorted(n for n in tensors if lookup(n) is None)
    assert judged >= 0.9 * len(tensors), unjudged
