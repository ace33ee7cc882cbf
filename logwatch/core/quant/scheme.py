"""Derive the quantization scheme of a checkpoint the way vLLM does (vllm-logs.md §3).

Input: the parsed `config.json`, and `hf_quant_config.json` / `quantization_config.json` when
present (read only when config.json has no quantization_config, as vLLM does). Output: the
method vLLM detects, the scheme (W4A16, NVFP4A16, W4A4_NVFP4, ...), its ignore list, and
whether it runs through the weight-only Marlin kernels on a GPU of a given capability.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from logwatch.core.quant.layer_outcome import IgnoreRules

WEIGHT_ONLY_INT = ("W4A16", "W8A16", "GPTQ", "AWQ")
FP4_SCHEMES = ("NVFP4A16", "W4A4_NVFP4", "W4A16_NVFP4", "MXFP4", "MXFP4A16")
NATIVE_FP4_CAPABILITY = 100  # SM100 and newer (B200, B300, RTX 50/PRO 6000): CUTLASS/FlashInfer
NATIVE_FP8_CAPABILITY = 89


@dataclass(frozen=True, slots=True)
class QuantFacts:
    method: str | None  # what vLLM detects: compressed-tensors, modelopt_fp4, quark, gptq, ...
    scheme: str  # W4A16, NVFP4A16, W4A4_NVFP4, W4A16_NVFP4, FP8, W8A16_FP8, MXFP4, GPTQ, ...
    weight_only: bool
    group_size: int | None = None
    ignore: tuple[str, ...] = ()
    # the key the method reads its list from (ignore, exclude_modules, exclude,
    # modules_to_not_convert, dynamic, ignored_layers), whether the checkpoint has one or not
    ignore_key: str | None = None
    source: str = "config.json"
    notes: tuple[str, ...] = field(default=())
    # GPTQ: the `dynamic` keys in order (`-:regex` excludes) and `modules_in_block_to_quantize`
    dynamic_keys: tuple[str, ...] = ()
    in_block: tuple[str, ...] = ()
    listed: tuple[str, ...] = ()  # ModelOpt mixed precision: the `quantized_layers` keys

    def ignore_rules(self, model_type: str | None = None) -> IgnoreRules:
        """What vLLM reads from this config to leave layers unquantized."""
        return IgnoreRules(self.method, self.ignore, dict.fromkeys(self.dynamic_keys),
                           self.in_block, model_type, self.listed)

    @property
    def fp4(self) -> bool:
        return self.scheme in FP4_SCHEMES

    @property
    def quantized(self) -> bool:
        return self.method is not None

    def marlin_path(self, capability: int | None) -> bool | None:
        """Whether linear layers run through weight-only Marlin on this GPU (None: unknown)."""
        if not self.quantized or self.scheme == "unknown":
            return False if not self.quantized else None
        if self.scheme in WEIGHT_ONLY_INT:
            return True
        if capability is None:
            return None
        if self.scheme in ("NVFP4A16", "W4A16_NVFP4", "MXFP4A16"):
            return capability < NATIVE_FP4_CAPABILITY  # SM10x/12x have W4A16 FlashInfer kernels
        if self.scheme in ("W4A4_NVFP4", "MXFP4"):
            return capability < NATIVE_FP4_CAPABILITY
        if self.scheme in ("FP8", "W8A16_FP8"):
            return capability < NATIVE_FP8_CAPABILITY
        return False

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "scheme": self.scheme, "weight_only": self.weight_only,
                "group_size": self.group_size, "ignore": list(self.ignore),
                "ignore_key": self.ignore_key, "source": self.source, "notes": list(self.notes),
                **({"dynamic_keys": list(self.dynamic_keys)} if self.dynamic_keys else {}),
                **({"in_block": list(self.in_block)} if self.in_block else {}),
                **({"quantized_layers": len(self.listed)} if self.listed else {})}


UNQUANTIZED = QuantFacts(None, "unquantized", False, source="none")


def _is_nvfp4(args: dict[str, Any] | None) -> bool:
    """compressed-tensors `_is_nvfp4_format`: tensor_group, float, 4 bits, group 16, symmetric."""
    if not args:
        return False
    return args.get("strategy") == "tensor_group" and args.get("type") == "float" \
        and args.get("num_bits") == 4 and args.get("group_size") == 16 \
        and args.get("symmetric", True) is True


def _compressed_tensors(qc: dict[str, Any], source: str) -> QuantFacts:
    groups = qc.get("config_groups") or {}
    ignore = tuple(str(x) for x in qc.get("ignore") or [])
    linear = [g for g in groups.values() if isinstance(g, dict)
              and not all(str(t).endswith("Attention") for t in g.get("targets") or ["Linear"])]
    if not linear:
        return QuantFacts("compressed-tensors", "unknown", False, None, ignore, "ignore", source,
                          ("no config group targets linear layers",))
    group = linear[0]
    weights = group.get("weights") or {}
    inputs = group.get("input_activations")
    fmt = str(group.get("format") or qc.get("format") or "")
    bits, kind = weights.get("num_bits"), weights.get("type")
    size = weights.get("group_size")
    if _is_nvfp4(weights):
        if inputs is None:
            scheme, weight_only = "NVFP4A16", True
        elif _is_nvfp4(inputs):
            scheme, weight_only = "W4A4_NVFP4", False
        else:
            return QuantFacts("compressed-tensors", "unknown", False, 16, ignore, "ignore",
                              source, ("NVFP4 weights need NVFP4 or no input activations",))
    elif bits == 4 and kind == "float" and size == 32:
        scheme, weight_only = ("MXFP4A16", True) if inputs is None else ("MXFP4", False)
    elif bits in (4, 8) and kind == "int" and inputs is None:
        scheme, weight_only = f"W{bits}A16", True
    elif bits == 8 and kind == "float":
        scheme, weight_only = ("W8A16_FP8", True) if inputs is None else ("FP8", False)
    elif bits == 8 and kind == "int":
        scheme, weight_only = "W8A8_INT8", False
    else:
        return QuantFacts("compressed-tensors", "unknown", False, size, ignore, "ignore", source,
                          (f"unrecognised weights {weights!r} (format {fmt or 'unset'})",))
    return QuantFacts("compressed-tensors", scheme, weight_only, size, ignore, "ignore", source,
                      (f"format {fmt}",) if fmt else ())


def _modelopt(qc: dict[str, Any], source: str) -> QuantFacts:
    """config.json form, or the legacy hf_quant_config.json `quantization` block."""
    inner = qc.get("quantization") if isinstance(qc.get("quantization"), dict) else qc
    assert isinstance(inner, dict)
    algo = str(inner.get("quant_algo") or "").upper()
    key = "exclude_modules" if "exclude_modules" in inner else "ignore"
    ignore = tuple(str(x) for x in inner.get(key) or [])
    notes: list[str] = []
    size = inner.get("group_size")
    if algo == "NVFP4":
        groups = inner.get("config_groups") or {}
        if groups and all(isinstance(g, dict) and g.get("input_activations") is None
                          for g in groups.values()):
            notes.append("quant_algo NVFP4 with no input activations: vLLM auto-downgrades to "
                         "W4A16_NVFP4")
            return QuantFacts("modelopt_fp4", "W4A16_NVFP4", True, size, ignore, key, source,
                              tuple(notes))
        return QuantFacts("modelopt_fp4", "W4A4_NVFP4", False, size, ignore, key, source)
    if algo == "W4A16_NVFP4":
        return QuantFacts("modelopt_fp4", "W4A16_NVFP4", True, size, ignore, key, source)
    if algo.startswith("FP8"):
        return QuantFacts("modelopt", "FP8", False, size, ignore, key, source)
    if algo == "MIXED_PRECISION":
        layers = inner.get("quantized_layers")
        return QuantFacts("modelopt_mixed", "unknown", False, size, ignore, key, source,
                          ("mixed precision: schemes differ per layer",),
                          listed=tuple(str(k) for k in layers) if isinstance(layers, dict)
                          else ())
    return QuantFacts("modelopt", "unknown", False, size, ignore, key, source,
                      (f"unknown ModelOpt quant_algo {algo or 'missing'}",))


def _quark(qc: dict[str, Any], source: str) -> QuantFacts:
    ignore = tuple(str(x) for x in qc.get("exclude") or [])
    glob = qc.get("global_quant_config") or {}
    weight = glob.get("weight") or {}
    if isinstance(weight, list):
        weight = weight[0] if weight else {}
    dtype = str(weight.get("dtype") or "").lower()
    inputs = glob.get("input_tensors")
    size = weight.get("group_size")
    if "fp4" in dtype:
        nv = size == 16
        if inputs is None:
            scheme, weight_only = ("NVFP4A16" if nv else "MXFP4A16"), True
        else:
            scheme, weight_only = ("W4A4_NVFP4" if nv else "MXFP4"), False
    elif "fp8" in dtype:
        scheme, weight_only = ("FP8", False) if inputs is not None else ("W8A16_FP8", True)
    elif dtype.startswith(("int4", "uint4")):
        scheme, weight_only = "W4A16", inputs is None
    else:
        scheme, weight_only = "unknown", False
    return QuantFacts("quark", scheme, weight_only, size, ignore, "exclude", source)


def _flatten(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        out.extend(_flatten(item) if isinstance(item, list) else [item])
    return out


def derive_quant(config: dict[str, Any], hf_quant_config: dict[str, Any] | None = None,
                 standalone: dict[str, Any] | None = None) -> QuantFacts:
    """The quantization of a checkpoint, from the files vLLM reads, in its order."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    qc = config.get("quantization_config") or (text or {}).get("quantization_config")
    source = "config.json"
    if not qc and hf_quant_config:
        qc, source = hf_quant_config, "hf_quant_config.json"
    if not qc and standalone:
        qc, source = standalone, "quantization_config.json"
    if not isinstance(qc, dict) or not qc:
        return UNQUANTIZED
    method = str(qc.get("quant_method") or "").lower()
    producer = qc.get("producer") if isinstance(qc.get("producer"), dict) else {}
    if method == "modelopt" or str((producer or {}).get("name", "")).lower() == "modelopt" \
            or "quant_algo" in qc or isinstance(qc.get("quantization"), dict):
        return _modelopt(qc, source)
    if method == "compressed-tensors" or "config_groups" in qc:
        return _compressed_tensors(qc, source)
    if method == "quark":
        return _quark(qc, source)
    if method in ("gptq", "gptq_marlin", "auto_gptq"):
        dynamic: dict[str, Any] = qc["dynamic"] if isinstance(qc.get("dynamic"), dict) else {}
        in_block = qc.get("modules_in_block_to_quantize")
        return QuantFacts("gptq", "GPTQ", True, qc.get("group_size"),
                          tuple(k[2:] for k in dynamic if str(k).startswith("-:")),
                          "dynamic", source,
                          (f"{qc.get('bits', '?')}-bit",), tuple(str(k) for k in dynamic),
                          tuple(str(x) for x in _flatten(in_block)) if isinstance(
                              in_block, list) else ())
    if method in ("awq", "awq_marlin", "auto_awq"):
        skipped = tuple(str(x) for x in qc.get("modules_to_not_convert") or [])
        return QuantFacts("awq", "AWQ", True, qc.get("group_size"), skipped,
                          "modules_to_not_convert", source)
    if method == "fp8":
        ignore = tuple(str(x) for x in qc.get("ignored_layers") or [])
        return QuantFacts("fp8", "FP8", False, None, ignore, "ignored_layers", source)
    return QuantFacts(method or "unknown", "unknown", False, None, (), None, source,
                      (f"quant_method {method or 'missing'} is not one logwatch interprets",))
