"""The (out, in) shape a linear layer's checkpoint tensors stand for, quantized or not.

A quantized checkpoint stores a layer's weight packed: GPTQ as `qweight` int32 of
(in x bits / 32, out), AWQ as `qweight` int32 of (in, out x bits / 32), compressed-tensors'
pack-quantized integers as `weight_packed` int32 of (out, in x bits / 32), NVFP4 (ModelOpt's
`weight`, compressed-tensors' `weight_packed`) as uint8 of (out, in / 2), two FP4 values a
byte. FP8 keeps (out, in) in an 8-bit float. This module unpacks those shapes; it reads no
values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from logwatch.core.checkpoint.files import FLOAT_DTYPES, Tensor

GPTQ_METHODS = frozenset({"gptq", "gptq_marlin", "gptq_marlin_24"})
AWQ_METHODS = frozenset({"awq", "awq_marlin"})
PACKED_SUFFIXES = ("weight", "weight_packed", "qweight")


@dataclass(frozen=True, slots=True)
class Logical:
    shape: tuple[int, int]  # (out, in)
    tensor: str  # the tensor it was read from
    stored: str  # how it is stored, e.g. "I32 [64, 512] (GPTQ 4-bit, 8 a word)"


def bits_of(quant_config: Mapping[str, object] | None) -> int | None:
    """The weight bit width a quantization_config states (4 when it says none); None when its
    layers differ (GPTQ's `dynamic` overrides of `bits`, compressed-tensors groups of several
    widths): then no packed integer layout is unpacked."""
    if not quant_config:
        return 4
    dynamic = quant_config.get("dynamic")
    if isinstance(dynamic, Mapping) and any(
            isinstance(rule, Mapping) and "bits" in rule for rule in dynamic.values()):
        return None
    for key in ("bits", "w_bit", "num_bits"):
        value = quant_config.get(key)
        if isinstance(value, int) and value in (2, 3, 4, 8):
            return value
    groups = quant_config.get("config_groups")
    widths: set[object] = set()
    if isinstance(groups, Mapping):
        for group in groups.values():
            weights = group.get("weights") if isinstance(group, Mapping) else None
            widths.add(weights.get("num_bits") if isinstance(weights, Mapping) else None)
    if len(widths) > 1:
        return None
    (value,) = widths or {4}
    return value if isinstance(value, int) and value in (2, 3, 4, 8) else 4


def logical_linear(tensors: Mapping[str, Tensor], module: str, method: str | None,
                   bits: int | None) -> Logical | None:
    """The layer `module`'s (out, in) as its checkpoint tensors store it; None when none of
    them is there or their layout is not one this module knows."""
    return _unpacked(_logical(tensors, module, method, bits))


def _logical(tensors: Mapping[str, Tensor], module: str, method: str | None,
             bits: int | None) -> Logical | None:
    packed = tensors.get(f"{module}.qweight")
    if packed is not None:
        if bits is None or len(packed.shape) != 2 or 32 % bits:
            return None  # widths differ by layer, or not a layout unpacked here
        per_word = 32 // bits
        rows, cols = packed.shape
        if method in AWQ_METHODS:
            return Logical((cols * per_word, rows), f"{module}.qweight",
                           f"{packed.dtype} {list(packed.shape)} (AWQ {bits}-bit, "
                           f"{per_word} a word along out)")
        if method in GPTQ_METHODS:
            return Logical((cols, rows * per_word), f"{module}.qweight",
                           f"{packed.dtype} {list(packed.shape)} (GPTQ {bits}-bit, "
                           f"{per_word} a word along in)")
        return None
    packed = tensors.get(f"{module}.weight_packed")
    if packed is not None and len(packed.shape) == 2:
        rows, cols = packed.shape
        if packed.dtype == "U8":  # NVFP4 / MXFP4: two values a byte
            return Logical((rows, cols * 2), f"{module}.weight_packed",
                           f"U8 {list(packed.shape)} (FP4, 2 a byte)")
        if packed.dtype == "I32" and bits is not None and 32 % bits == 0:
            return Logical((rows, cols * (32 // bits)), f"{module}.weight_packed",
                           f"I32 {list(packed.shape)} ({bits}-bit, {32 // bits} a word)")
        return None
    weight = tensors.get(f"{module}.weight")
    if weight is None or len(weight.shape) != 2:
        return None
    rows, cols = weight.shape
    if weight.dtype == "U8" and f"{module}.weight_scale" in tensors:  # ModelOpt NVFP4
        return Logical((rows, cols * 2), f"{module}.weight",
                       f"U8 {list(weight.shape)} (FP4, 2 a byte)")
    if weight.dtype in FLOAT_DTYPES or weight.dtype.startswith("F8_"):
        return Logical((rows, cols), f"{module}.weight", f"{weight.dtype} {list(weight.shape)}")
    return None


def _unpacked(found: Logical | None) -> Logical | None:
    """The stored form followed by the shape it stands for, where packing changed it."""
    if found is None or found.stored.endswith("]"):
        return found
    return Logical(found.shape, found.tensor, f"{found.stored}, unpacked {list(found.shape)}")
