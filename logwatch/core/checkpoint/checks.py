"""The failures a model directory predicts before vLLM loads it: a config.json vLLM cannot read,
an index naming shards that are not there, a shard whose header is damaged or cut short, a
tensor whose shape disagrees with what config.json makes the architecture expect, and a
quantized layer whose checkpoint holds the wrong kind of tensor.

Each is certain (vLLM fails on it whatever else holds) or uncertain (it may: said as such);
what cannot be judged (a family not described, packing not understood) is judged not at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from logwatch.core.checkpoint.families import Expected, expected, extra_layer, family
from logwatch.core.checkpoint.files import FLOAT_DTYPES, CheckpointFiles, Tensor
from logwatch.core.checkpoint.layouts import (
    GPTQ_METHODS,
    PACKED_SUFFIXES,
    bits_of,
    logical_linear,
)
from logwatch.core.checkpoint.predicted import (
    STAGE_CONFIG,
    STAGE_WEIGHTS,
    Found,
    PreflightProblem,
)
from logwatch.core.quant.ignore_rules import QUANTIZED, Release
from logwatch.core.quant.layer_outcome import possible_outcomes
from logwatch.core.quant.scheme import QuantFacts

SHOWN = 5  # examples listed of a problem that many tensors share


def checkpoint_problems(files: CheckpointFiles, quant: QuantFacts | None,
                        release: Release | None) -> Found:
    found = Found()
    _config(files, found)
    _files(files, found)
    if files.config is not None and files.tensors:
        _shapes(files, quant, release, found)
    found.notes += list(files.unread)
    return found


def _config(files: CheckpointFiles, found: Found) -> None:
    if files.config_error is None:
        return
    if files.config_error == "config.json is missing" and "params.json" in files.names:
        found.notes.append("no config.json but a params.json: a Mistral-format checkpoint "
                           "(--config-format mistral); its configuration is not judged")
        return
    broken = "not valid JSON" in files.config_error or "not UTF-8" in files.config_error
    found.certain.append(PreflightProblem(
        "config_unreadable", "config.json cannot be read", files.config_error,
        stage=STAGE_CONFIG,
        message=(f"OSError: It looks like the config file at '{files.path}/config.json' is "
                 "not a valid JSON file." if broken else ""),
        signature="model.config_not_json" if broken else None,
        evidence=(f"{files.path}/config.json",),
        fixes=("restore config.json from the checkpoint's source",)))


def _files(files: CheckpointFiles, found: Found) -> None:
    if files.missing_shards:
        every = files.configuration_only
        shown = ", ".join(sorted(files.missing_shards)[:SHOWN])
        more = len(files.missing_shards) - SHOWN
        problem = PreflightProblem(
            "shard_missing", "weight files the index names are not there",
            (f"none of the {len(files.missing_shards)} shard(s) {files.index_file} names is "
             "here (a copy of the configuration only?): vLLM fails unless they are in place "
             "when it starts; tensor shapes not checked" if every else
             f"{files.index_file} names {len(files.missing_shards)} shard(s) the directory "
             f"lacks: {shown}" + (f" and {more} more" if more > 0 else "")),
            stage=STAGE_WEIGHTS,
            message="FileNotFoundError: Weight files referenced in index but missing: {...}",
            signature="model.shard_missing",
            evidence=tuple(f"{files.index_file}: weight_map -> {s}"
                           for s in sorted(files.missing_shards)[:SHOWN]),
            fixes=("copy the missing shards (an interrupted download or copy leaves them "
                   "out)",))
        (found.uncertain if every else found.certain).append(problem)
    for shard, what in files.unreadable:
        found.uncertain.append(PreflightProblem(
            "shard_unreadable", "a weight file this user cannot read", f"{shard}: {what}",
            stage=STAGE_WEIGHTS, evidence=(f"{files.path}/{shard}",),
            fixes=("make it readable by the user vLLM runs as",)))
    for shard, what in files.damaged:
        found.certain.append(PreflightProblem(
            "shard_damaged", "a weight file cannot be opened", f"{shard}: {what}",
            stage=STAGE_WEIGHTS, evidence=(f"{files.path}/{shard}",),
            fixes=("copy the shard again and compare its size or checksum with the "
                   "source's",)))
    if not files.has_weights and not files.damaged and files.config is not None:
        others = sorted(n for n in files.names if n.endswith((".bin", ".pt", ".pth", ".gguf")))
        if others:
            found.notes.append(f"weights not in safetensors ({', '.join(others[:3])}): "
                               "their shapes are not checked")
        else:
            found.certain.append(PreflightProblem(
                "no_weights", "no weight files",
                f"{files.path} holds no *.safetensors, *.bin or *.pt file",
                stage=STAGE_WEIGHTS, evidence=(files.path,),
                message=f"RuntimeError: Cannot find any model weights with `{files.path}`",
                fixes=("point --model at the directory holding the checkpoint's weights",)))


@dataclass(frozen=True, slots=True)
class _Mismatch:
    tensor: str
    stored: str
    expected: Expected
    shape: tuple[int, ...]  # what the stored tensor stands for (unpacked)


def _shapes(files: CheckpointFiles, quant: QuantFacts | None, release: Release | None,
            found: Found) -> None:
    assert files.config is not None
    lookup = expected(files.config)
    kind = family(files.config)
    if lookup is None:
        found.notes.append(
            f"tensor shapes not checked: model_type {files.config.get('model_type')!r} "
            + ("lacks a size its shapes need" if kind else "is not among the families "
               "described (Llama, Mistral, Qwen2/3 and their MoE, DeepSeek V2/V3, GLM-4)"))
        return
    method = quant.method if quant is not None and quant.quantized else None
    bits = bits_of(files.config.get("quantization_config")
                   if isinstance(files.config.get("quantization_config"), dict) else None)
    rules = quant.ignore_rules(kind) if quant is not None and method else None
    mismatched: list[_Mismatch] = []
    unpacked: list[str] = []
    modules: set[str] = set()
    extra = sorted((index, name) for name in files.tensors
                   if (index := extra_layer(files.config, name)) is not None)
    if extra:
        found.certain.append(_extra_problem(files, extra))
    for name, tensor in files.tensors.items():
        module, _, suffix = name.rpartition(".")
        if suffix in PACKED_SUFFIXES:
            want = lookup(f"{module}.weight")
            if want is not None and want.linear:
                modules.add(module)
                continue
        want = lookup(name)
        if want is not None and not want.linear and tensor.shape != want.shape:
            mismatched.append(_Mismatch(name, f"{tensor.dtype} {list(tensor.shape)}", want,
                                        tensor.shape))
    # vLLM (0.32.0's GPTQ config) takes the quantized layers from the headers when the config
    # lists none: a layer holding only floats is built unquantized, so only a checkpoint with
    # no packed layer at all, whose every layer is then built quantized, fails on its weights
    packed_nowhere = not any(n.endswith(".qweight") for n in files.tensors)
    for module in sorted(modules):
        want = lookup(f"{module}.weight")
        assert want is not None
        if method in GPTQ_METHODS and packed_nowhere and rules is not None \
                and _is_float(files.tensors.get(f"{module}.weight")) \
                and possible_outcomes(rules, module, release) == {QUANTIZED}:
            unpacked.append(module)
            continue
        got = logical_linear(files.tensors, module, method, bits)
        if got is not None and got.shape != want.shape:
            mismatched.append(_Mismatch(got.tensor, got.stored, want, got.shape))
    failing = [m for m in mismatched if m.expected.loads(m.shape) is False]
    cut = [m for m in mismatched if m.expected.loads(m.shape) is None]
    if failing:
        found.certain.append(_shape_problem(files, failing))
    if cut:
        found.uncertain.append(_cut_problem(files, cut))
    if unpacked:
        found.certain.append(_unpacked_problem(files, method or "", unpacked))


def _is_float(tensor: Tensor | None) -> bool:
    return tensor is not None and tensor.dtype in FLOAT_DTYPES


def _shape_problem(files: CheckpointFiles, mismatched: list[_Mismatch]) -> PreflightProblem:
    first = mismatched[0]
    return PreflightProblem(
        "weight_shape", "tensor shapes disagree with config.json",
        f"{len(mismatched)} tensor(s) of the checkpoint have a shape the architecture "
        f"config.json describes does not: {first.tensor} is {first.stored}, expected "
        f"{first.expected.describe()}",
        **_listed(files, mismatched), message=_load_error(first),
        signature="weights.narrow_out_of_range", config={"mismatched": len(mismatched)},
        fixes=("the checkpoint and its config.json do not belong together: use the "
               "config.json the weights were saved with",))


def _listed(files: CheckpointFiles, mismatched: list[_Mismatch]) -> dict[str, Any]:
    """The details (the tensors after the first) and evidence (file: tensor) of a shape
    problem, a few of each, at the weights' stage."""
    return {"details": tuple(f"{m.tensor}: {m.stored}, expected {m.expected.describe()}"
                             for m in mismatched[1:SHOWN]),
            "evidence": tuple(f"{files.tensors[m.tensor].file}: {m.tensor}"
                              for m in mismatched[:SHOWN] if m.tensor in files.tensors),
            "stage": STAGE_WEIGHTS}


def _load_error(mismatch: _Mismatch) -> str:
    """What vLLM's loader raises on this tensor (at tensor-parallel size 1): torch's narrow
    where the checkpoint is short along the dimension it takes its share of, else a shape
    assertion."""
    want, got, dim = mismatch.expected.shape, mismatch.shape, mismatch.expected.sharded
    if dim is not None and len(got) == len(want) and got[dim] < want[dim] and all(
            g == w for d, (g, w) in enumerate(zip(got, want, strict=True)) if d != dim):
        return f"RuntimeError: start (0) + length ({want[dim]}) exceeds dimension size " \
               f"({got[dim]})."
    return "AssertionError (the loader's shape check), on the first such tensor loaded"


def _cut_problem(files: CheckpointFiles, cut: list[_Mismatch]) -> PreflightProblem:
    first = cut[0]
    return PreflightProblem(
        "weight_cut", "tensors larger than config.json says, which vLLM cuts to size",
        f"{len(cut)} tensor(s) are larger than the architecture config.json describes along "
        f"the dimension vLLM takes its share of: {first.tensor} is {first.stored}, expected "
        f"{first.expected.describe()}. vLLM loads the first rows without a word; the model "
        "starts, and answers wrongly if the config is the one that is off",
        **_listed(files, cut), config={"cut": len(cut)},
        fixes=("use the config.json the weights were saved with",))


def _extra_problem(files: CheckpointFiles, extra: list[tuple[int, str]]) -> PreflightProblem:
    index, name = extra[0]
    layers = sorted({i for i, _ in extra})
    shown = ", ".join(map(str, layers[:SHOWN])) + (" ..." if len(layers) > SHOWN else "")
    return PreflightProblem(
        "weight_unexpected", "tensors of layers config.json does not have",
        f"the checkpoint holds {len(extra)} tensor(s) of layer(s) {shown}, beyond "
        f"config.json's num_hidden_layers {(files.config or {}).get('num_hidden_layers')}",
        stage=STAGE_WEIGHTS, signature="weights.unexpected_param",
        message=f"ValueError: There is no module or parameter named 'layers.{index}' in the "
                "model",
        evidence=(f"{files.tensors[name].file}: {name}", "config.json: num_hidden_layers"),
        config={"layers": layers[:SHOWN], "tensors": len(extra)},
        fixes=("use the config.json the weights were saved with (num_hidden_layers)",))


def _unpacked_problem(files: CheckpointFiles, method: str, modules: Iterable[str]
                      ) -> PreflightProblem:
    listed = sorted(modules)
    return PreflightProblem(
        "weight_not_quantized", f"{method} layers hold unquantized weights",
        f"config.json's quantization_config says {method}, whose layers load a packed "
        f"`qweight`, but {len(listed)} quantized layer(s) hold a plain floating-point "
        f"`weight`: {listed[0]}.weight first",
        details=tuple(f"{m}.weight" for m in listed[1:SHOWN]),
        stage=STAGE_WEIGHTS, signature="weights.unexpected_param",
        message=f"ValueError: There is no module or parameter named '...{listed[0]}.weight' "
                "(or an AttributeError where a fused q/k/v or gate/up shard comes first)",
        evidence=tuple(f"{files.tensors[f'{m}.weight'].file}: {m}.weight"
                       for m in listed[:SHOWN]),
        config={"method": method, "layers": len(listed)},
        fixes=("quantize the checkpoint (the config describes weights it does not hold), "
               "or drop quantization_config from config.json to serve it unquantized",))
