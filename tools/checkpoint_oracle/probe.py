"""Run with an interpreter that has torch and transformers (the real-vLLM tier's venv): reads
{name: config} as JSON on stdin, builds each model on the meta device (no memory, no
weights) and prints {name: {tensor: shape}} in the checkpoint's naming: transformers 5 holds
an MoE layer's experts fused (`experts.gate_up_proj` [E, 2m, h], `experts.down_proj`
[E, h, m]) and loads and saves them as one tensor per expert and projection, the form of
the checkpoints vLLM reads; that split is undone here."""

from __future__ import annotations

import json
import re
import sys

FUSED = re.compile(r"^(.*\.experts)\.(gate_up_proj|down_proj)$")


def per_expert(name: str, shape: list[int]) -> dict[str, list[int]]:
    fused = FUSED.match(name)
    if fused is None or len(shape) != 3:
        return {name: shape}
    prefix, which = fused.groups()
    experts, rows, cols = shape
    if which == "down_proj":
        return {f"{prefix}.{e}.down_proj.weight": [rows, cols] for e in range(experts)}
    out: dict[str, list[int]] = {}
    for e in range(experts):
        out[f"{prefix}.{e}.gate_proj.weight"] = [rows // 2, cols]
        out[f"{prefix}.{e}.up_proj.weight"] = [rows // 2, cols]
    return out


def main() -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out: dict[str, dict[str, object]] = {}
    for name, given in json.loads(sys.stdin.read()).items():
        try:
            config = AutoConfig.for_model(given["model_type"], **{
                k: v for k, v in given.items() if k != "model_type"})
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(config)
        except Exception as exc:  # said per family: the others are still built
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        tensors: dict[str, object] = {}
        for key, value in model.state_dict().items():
            tensors |= per_expert(key, list(value.shape))
        out[name] = tensors
    print(json.dumps(out))


if __name__ == "__main__":
    main()
