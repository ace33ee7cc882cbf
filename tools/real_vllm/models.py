"""Tiny local model directories for the real-vLLM tier: built here, never downloaded.

Run with the real vLLM's interpreter (it has torch, transformers, tokenizers and safetensors):

    .real-vllm/venv-0.32.0/bin/python tools/real_vllm/models.py DIR

It writes one healthy model (a two-layer Llama, hidden 256, random weights, a word-level
tokenizer trained here) and the variants the cases need, each a copy of the healthy one edited
the way a real checkpoint goes wrong: a weight of the wrong shape, an index naming a shard that
is absent, a broken config.json, and quantization configs this platform cannot run. A variant
is rebuilt only when its folder is missing, so a second run costs nothing.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HIDDEN = 256
INTERMEDIATE = 512
VOCAB = 512


def healthy(out: Path) -> None:
    """A two-layer Llama with random weights, one safetensors shard, a local tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         vocab_size=VOCAB, max_position_embeddings=512,
                         bos_token_id=1, eos_token_id=2, torch_dtype="bfloat16")
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    _tokenizer(out)


def _tokenizer(out: Path) -> None:
    """A word-level tokenizer trained on a few sentences, saved as a fast tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "while", "vllm",
             "serves", "a", "tiny", "model", "on", "cpu", "hello", "world", "what", "is"]
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(words)] * 4, trainers.WordLevelTrainer(
        vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")
    fast.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                          "{% endfor %}assistant:")
    fast.save_pretrained(out)


def _edit_config(out: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = out / "config.json"
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config, indent=2) + "\n")


def wrong_shape(out: Path) -> None:
    """One MLP weight saved with 256 rows where the config asks for 512."""
    from safetensors.torch import load_file, save_file

    path = out / "model.safetensors"
    tensors = load_file(path)
    name = "model.layers.0.mlp.gate_proj.weight"
    tensors[name] = tensors[name][: INTERMEDIATE // 2].clone()
    save_file(tensors, path, metadata={"format": "pt"})


def missing_shard(out: Path) -> None:
    """Two shards and an index; the second shard deleted."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(out / "model.safetensors")
    (out / "model.safetensors").unlink()
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    weight_map = {}
    for shard, part in halves.items():
        save_file({n: tensors[n] for n in part}, out / shard, metadata={"format": "pt"})
        weight_map.update({n: shard for n in part})
    size = sum(t.numel() * t.element_size() for t in tensors.values())
    (out / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": size}, "weight_map": weight_map}, indent=2))
    (out / "model-00002-of-00002.safetensors").unlink()


def broken_config(out: Path) -> None:
    """config.json cut off in the middle, as a failed copy leaves it."""
    path = out / "config.json"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


def modelopt_nvfp4(out: Path) -> None:
    """A ModelOpt NVFP4 quantization config (W4A4, group 16) over the healthy weights."""
    _edit_config(out, lambda c: c.update(quantization_config={
        "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
        "kv_cache_quant_algo": None, "exclude_modules": ["lm_head"]}))


def compressed_tensors_nvfp4(out: Path) -> None:
    """A compressed-tensors NVFP4 (W4A4) config, MTP-less, lm_head ignored."""
    group = {"targets": ["Linear"],
             "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                         "group_size": 16, "symmetric": True, "dynamic": False},
             "input_activations": {"num_bits": 4, "type": "float",
                                   "strategy": "tensor_group", "group_size": 16,
                                   "symmetric": True, "dynamic": "local"}}
    _edit_config(out, lambda c: c.update(quantization_config={
        "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
        "config_groups": {"group_0": group}, "ignore": ["lm_head"]}))


def compressed_tensors_nvfp4a16(out: Path) -> None:
    """The weight-only (W4A16) form of ct-nvfp4: the Marlin path on a GPU, and the variant a
    relaunch plan replaces with its W4A4 sibling (ct-nvfp4)."""
    group = {"targets": ["Linear"],
             "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                         "group_size": 16, "symmetric": True, "dynamic": False},
             "input_activations": None}
    _edit_config(out, lambda c: c.update(quantization_config={
        "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
        "config_groups": {"group_0": group}, "ignore": ["lm_head"]}))


def fp8(out: Path) -> None:
    """A static FP8 config over BF16 weights (the scales it names are not there)."""
    _edit_config(out, lambda c: c.update(quantization_config={
        "quant_method": "fp8", "activation_scheme": "static"}))


def gptq_unpacked(out: Path) -> None:
    """A GPTQ 4-bit config, group 128, over weights that are not packed."""
    _edit_config(out, lambda c: c.update(quantization_config={
        "quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False,
        "sym": True}))


def gptq_width(out: Path) -> None:
    """GPTQ 4-bit, per-channel, on a model whose MLP is 48 wide: the CPU's weight-only kernel
    takes widths in multiples of 32 only (Marlin's 64 on a GPU), and vLLM refuses the layer
    when it builds it, before any weight is read (so the weights need not be packed)."""
    def change(config: dict[str, Any]) -> None:
        config.update(intermediate_size=48, quantization_config={
            "quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": False,
            "sym": True})
    _edit_config(out, change)


def no_tokenizer(out: Path) -> None:
    """The tokenizer's files deleted (a download that took the weights only)."""
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (out / name).unlink(missing_ok=True)


def unknown_architecture(out: Path) -> None:
    """An architecture no release registers."""
    _edit_config(out, lambda c: c.update(architectures=["FrobnicatorForCausalLM"]))


VARIANTS: dict[str, Callable[[Path], None]] = {
    "wrong-shape": wrong_shape,
    "missing-shard": missing_shard,
    "broken-config": broken_config,
    "modelopt-nvfp4": modelopt_nvfp4,
    "ct-nvfp4": compressed_tensors_nvfp4,
    "ct-nvfp4a16": compressed_tensors_nvfp4a16,
    "fp8": fp8,
    "gptq": gptq_unpacked,
    "gptq-width-48": gptq_width,
    "no-tokenizer": no_tokenizer,
    "unknown-architecture": unknown_architecture,
}


def build(root: Path) -> list[str]:
    """Every model under `root`; returns the names built this time."""
    root.mkdir(parents=True, exist_ok=True)
    built = []
    base = root / "healthy"
    if not (base / "config.json").exists():
        shutil.rmtree(base, ignore_errors=True)
        healthy(base)
        built.append("healthy")
    for name, edit in VARIANTS.items():
        target = root / name
        if (target / ".built").exists():
            continue
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(base, target)
        edit(target)
        (target / ".built").write_text("")
        built.append(name)
    return built


if __name__ == "__main__":
    made = build(Path(sys.argv[1]))
    print(f"tiny models in {sys.argv[1]}: " + (", ".join(made) + " built" if made
                                               else "all there"))
