"""The tensor shapes an architecture expects of its checkpoint, from config.json alone, for the
families vLLM serves most: Llama and Mistral, Qwen2 and Qwen3 (dense and MoE), DeepSeek V2/V3
(multi-head latent attention, routed and shared experts) and GLM-4 (dense and MoE).

`expected(config)` gives a lookup from a checkpoint tensor name to what it must be: its
logical shape (a linear layer's is (out, in), whatever packing a quantized checkpoint stores it
in: layouts.py) and whether it is a linear layer's weight. Names a family does not describe
(MTP layers, vision towers, anything unusual) are not judged: `None`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LLAMA_LIKE = frozenset({"llama", "mistral", "qwen2", "qwen3"})
QWEN_MOE = frozenset({"qwen2_moe", "qwen3_moe"})
DEEPSEEK = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2"})
GLM = frozenset({"glm4"})
GLM_MOE = frozenset({"glm4_moe"})
FAMILIES = LLAMA_LIKE | QWEN_MOE | DEEPSEEK | GLM | GLM_MOE

# what transformers' config classes give a key config.json leaves out (save_pretrained writes
# only the values that differ from them), where the shapes need it; any other key missing
# leaves the config unjudged. Checked against transformers itself by
# tests/test_checkpoint_families_oracle.py, which leaves these keys out.
HEAD_DIM_128 = frozenset({"qwen3", "glm4"})  # else hidden / heads (qwen3_moe, glm4_moe too)
KV_HEADS_AS_HEADS = frozenset({"llama"})  # LlamaConfig: num_key_value_heads None -> heads
QKV_BIAS = frozenset({"qwen2", "qwen2_moe"})  # in the model, whatever the config says
ATTENTION_BIAS_DEFAULT = {"glm4": True}  # the config's attention_bias when it has none

_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
_EXPERT = re.compile(r"^mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


@dataclass(frozen=True, slots=True)
class Expected:
    shape: tuple[int, ...]
    linear: bool  # a linear layer's weight, (out, in): quantized checkpoints pack it
    why: str  # the config keys the shape comes from
    # the dimension vLLM's loader narrows to its share (0: column-parallel, the output; 1:
    # row-parallel, the input): a checkpoint larger there is cut to size without a word, one
    # smaller fails; every other dimension must be equal. None: all must be equal (norms,
    # embeddings, which want vocab_size rows exactly, replicated routers).
    sharded: int | None = None

    def describe(self) -> str:
        return f"{list(self.shape)} ({self.why})"

    def loads(self, shape: tuple[int, ...]) -> bool | None:
        """Whether vLLM loads a checkpoint tensor of `shape` here: False, it fails; None, it
        loads cut to size (larger only along the sharded dimension); True, it fits."""
        if shape == self.shape:
            return True
        if len(shape) != len(self.shape) or self.sharded is None:
            return False
        for dim, (got, want) in enumerate(zip(shape, self.shape, strict=True)):
            if got < want or (dim != self.sharded and got != want):
                return False
        return None


Lookup = Callable[[str], "Expected | None"]


class ConfigShapeError(ValueError):
    """config.json lacks a size the family's shapes need."""


# families whose models build no decoder layer beyond num_hidden_layers (DeepSeek V3 and
# GLM-4 MoE keep their MTP layers there, which the main model skips)
NO_EXTRA_LAYERS = LLAMA_LIKE | QWEN_MOE | GLM


def extra_layer(config: dict[str, Any], name: str) -> int | None:
    """The layer index of a tensor under a decoder layer the model does not build (vLLM has
    no parameter for it: "There is no module or parameter named 'layers.N'"), else None."""
    found = _LAYER.match(name)
    layers = config.get("num_hidden_layers")
    if found is None or family(config) not in NO_EXTRA_LAYERS or not isinstance(layers, int):
        return None
    index = int(found.group(1))
    return index if index >= layers else None


def family(config: dict[str, Any]) -> str | None:
    """The family of a config.json (its text config's model_type), when one is described."""
    model_type = config.get("model_type")
    return model_type if isinstance(model_type, str) and model_type in FAMILIES else None


def expected(config: dict[str, Any]) -> Lookup | None:
    """The expected-shape lookup of this config, or None when its family is not described or a
    size it needs is missing (then nothing is judged: never a guess)."""
    kind = family(config)
    if kind is None:
        return None
    try:
        return _Shapes(config, kind).lookup
    except ConfigShapeError:
        return None


def _int(config: dict[str, Any], key: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        if default is not None and value is None:
            return default
        raise ConfigShapeError(key)
    return value


class _Shapes:
    def __init__(self, c: dict[str, Any], kind: str) -> None:
        self.kind = kind
        self.hidden = _int(c, "hidden_size")
        self.layers = _int(c, "num_hidden_layers")
        self.vocab = _int(c, "vocab_size")
        self.heads = _int(c, "num_attention_heads")
        self.kv_heads = _int(c, "num_key_value_heads",
                             self.heads if kind in KV_HEADS_AS_HEADS else None)
        head_dim = c.get("head_dim")
        if kind in DEEPSEEK:  # latent attention: its own head sizes (below)
            head_dim = 0
        elif head_dim is None and kind in HEAD_DIM_128:
            head_dim = 128
        elif head_dim is None:
            if self.heads == 0 or self.hidden % self.heads:
                raise ConfigShapeError("head_dim")
            head_dim = self.hidden // self.heads
        elif not isinstance(head_dim, int) or isinstance(head_dim, bool) or head_dim <= 0:
            raise ConfigShapeError("head_dim")
        self.head_dim: int = head_dim
        self.inter = _int(c, "intermediate_size")
        self.tied = bool(c.get("tie_word_embeddings", False))
        self.bias = kind in QKV_BIAS or bool(c.get("attention_bias",
                                                    ATTENTION_BIAS_DEFAULT.get(kind, False)))
        self.config = c
        self.sparse: Callable[[int], bool] = lambda i: False
        if kind in QWEN_MOE:
            experts = _int(c, "num_experts", 0)
            step = _int(c, "decoder_sparse_step", 1) or 1
            listed = c.get("mlp_only_layers")
            if listed is not None and not isinstance(listed, list):
                raise ConfigShapeError("mlp_only_layers")
            dense_only = {i for i in listed or [] if isinstance(i, int)}
            self.experts = experts
            self.moe_inter = _int(c, "moe_intermediate_size")
            self.shared_inter = _int(c, "shared_expert_intermediate_size", 0)
            self.sparse = lambda i: experts > 0 and i not in dense_only and (i + 1) % step == 0
        elif kind in DEEPSEEK | GLM_MOE:
            self.experts = _int(c, "n_routed_experts", 0)
            self.moe_inter = _int(c, "moe_intermediate_size", 0)
            self.shared_inter = self.moe_inter * _int(c, "n_shared_experts", 0)
            first_dense = _int(c, "first_k_dense_replace", 0)
            freq = _int(c, "moe_layer_freq", 1) or 1
            self.sparse = lambda i: self.experts > 0 and i >= first_dense and i % freq == 0
        if kind in DEEPSEEK:
            self.q_lora = c.get("q_lora_rank") if isinstance(c.get("q_lora_rank"), int) else None
            self.kv_lora = _int(c, "kv_lora_rank")
            self.nope = _int(c, "qk_nope_head_dim")
            self.rope = _int(c, "qk_rope_head_dim")
            self.v_head = _int(c, "v_head_dim")

    def lookup(self, name: str) -> Expected | None:
        h = self.hidden
        if name == "model.embed_tokens.weight":
            return Expected((self.vocab, h), False, "vocab_size, hidden_size")
        if name == "lm_head.weight":
            return Expected((self.vocab, h), False, "vocab_size, hidden_size")
        if name == "model.norm.weight":
            return Expected((h,), False, "hidden_size")
        found = _LAYER.match(name)
        if found is None:
            return None
        layer, rest = int(found.group(1)), found.group(2)
        if layer >= self.layers:  # MTP or other extra layers: not described
            return None
        if rest in ("input_layernorm.weight", "post_attention_layernorm.weight",
                    "post_self_attn_layernorm.weight", "post_mlp_layernorm.weight"):
            return Expected((h,), False, "hidden_size")
        if rest.startswith("self_attn."):
            return self._attention(rest[len("self_attn."):])
        if rest.startswith("mlp."):
            return self._mlp(layer, rest)
        return None

    def _attention(self, rest: str) -> Expected | None:
        h, d = self.hidden, self.head_dim
        if self.kind in DEEPSEEK:
            return self._mla(rest)
        q, kv = self.heads * d, self.kv_heads * d
        table = {
            "q_proj.weight": Expected((q, h), True, "num_attention_heads x head_dim, "
                                      "hidden_size", 0),
            "k_proj.weight": Expected((kv, h), True, "num_key_value_heads x head_dim, "
                                      "hidden_size", 0),
            "v_proj.weight": Expected((kv, h), True, "num_key_value_heads x head_dim, "
                                      "hidden_size", 0),
            "o_proj.weight": Expected((h, q), True, "hidden_size, num_attention_heads x "
                                      "head_dim", 1),
        }
        if self.bias:
            table["q_proj.bias"] = Expected((q,), False, "num_attention_heads x head_dim", 0)
            table["k_proj.bias"] = Expected((kv,), False, "num_key_value_heads x head_dim", 0)
            table["v_proj.bias"] = Expected((kv,), False, "num_key_value_heads x head_dim", 0)
        if self.kind == "qwen3" or self.kind == "qwen3_moe" or (
                self.kind in GLM_MOE and self.config.get("use_qk_norm")):
            table["q_norm.weight"] = Expected((d,), False, "head_dim")
            table["k_norm.weight"] = Expected((d,), False, "head_dim")
        return table.get(rest)

    def _mla(self, rest: str) -> Expected | None:
        h, heads = self.hidden, self.heads
        qk = self.nope + self.rope
        table = {
            "kv_a_proj_with_mqa.weight": Expected((self.kv_lora + self.rope, h), True,
                                                  "kv_lora_rank + qk_rope_head_dim, "
                                                  "hidden_size", 0),
            "kv_a_layernorm.weight": Expected((self.kv_lora,), False, "kv_lora_rank"),
            "kv_b_proj.weight": Expected((heads * (self.nope + self.v_head), self.kv_lora),
                                         True, "num_attention_heads x (qk_nope_head_dim + "
                                         "v_head_dim), kv_lora_rank", 0),
            "o_proj.weight": Expected((h, heads * self.v_head), True,
                                      "hidden_size, num_attention_heads x v_head_dim", 1),
        }
        if self.q_lora:
            table["q_a_proj.weight"] = Expected((self.q_lora, h), True,
                                                "q_lora_rank, hidden_size", 0)
            table["q_a_layernorm.weight"] = Expected((self.q_lora,), False, "q_lora_rank")
            table["q_b_proj.weight"] = Expected((heads * qk, self.q_lora), True,
                                                "num_attention_heads x (qk_nope_head_dim + "
                                                "qk_rope_head_dim), q_lora_rank", 0)
        else:
            table["q_proj.weight"] = Expected((heads * qk, h), True,
                                              "num_attention_heads x (qk_nope_head_dim + "
                                              "qk_rope_head_dim), hidden_size", 0)
        return table.get(rest)

    def _mlp(self, layer: int, rest: str) -> Expected | None:
        h = self.hidden
        if not self.sparse(layer):
            if self.kind in GLM and rest == "mlp.gate_up_proj.weight":
                return Expected((2 * self.inter, h), True, "2 x intermediate_size, hidden_size",
                                0)
            return _projection(rest[len("mlp."):], self.inter, h, "intermediate_size")
        expert = _EXPERT.match(rest)
        if expert is not None:
            if int(expert.group(1)) >= self.experts:
                return None
            return _projection(expert.group(2) + ".weight", self.moe_inter, h,
                               "moe_intermediate_size")
        if rest == "mlp.gate.weight":
            key = "num_experts" if self.kind in QWEN_MOE else "n_routed_experts"
            return Expected((self.experts, h), False, f"{key}, hidden_size")
        if rest == "mlp.gate.e_score_correction_bias" and self.kind not in QWEN_MOE:
            return Expected((self.experts,), False, "n_routed_experts")
        if self.shared_inter:
            for prefix in ("mlp.shared_expert.", "mlp.shared_experts."):
                if rest.startswith(prefix):
                    key = ("shared_expert_intermediate_size" if self.kind in QWEN_MOE
                           else "moe_intermediate_size x n_shared_experts")
                    return _projection(rest[len(prefix):], self.shared_inter, h, key)
            if rest == "mlp.shared_expert_gate.weight" and self.kind == "qwen2_moe":
                return Expected((1, h), False, "hidden_size")
        return None


def _projection(rest: str, inter: int, hidden: int, key: str) -> Expected | None:
    if rest in ("gate_proj.weight", "up_proj.weight"):
        return Expected((inter, hidden), True, f"{key}, hidden_size", 0)
    if rest == "down_proj.weight":
        return Expected((hidden, inter), True, f"hidden_size, {key}", 1)
    return None
