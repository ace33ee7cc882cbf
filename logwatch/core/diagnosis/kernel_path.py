"""The kernel path a launch will take for its quantized layers, predicted before any weight
loads: the checkpoint's scheme, the GPU's compute capability and what the command line or the
environment forces. An FP4 checkpoint on weight-only Marlin is the runbook's first finding:
where the GPU has native FP4 (10.0+) the W4A4 variant runs through CUTLASS/FlashInfer instead;
below it, even W4A4 falls back to Marlin, and the alternative is to make Marlin's tiles fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from logwatch.core.quant.scheme import NATIVE_FP4_CAPABILITY, NATIVE_FP8_CAPABILITY
from logwatch.core.snapshot.model import Snapshot

MARLIN, NATIVE, UNKNOWN = "marlin", "native", "unknown"
# What makes vLLM take Marlin whatever the GPU: backend flags (0.17.1+/0.22.1+) and variables
FORCING_FLAGS = ("linear_backend", "moe_backend")
FORCING_ENV = ("VLLM_NVFP4_GEMM_BACKEND", "VLLM_MXFP4_BACKEND")


@dataclass(frozen=True, slots=True)
class KernelPath:
    scheme: str
    path: str  # marlin | native | unknown
    summary: str  # one line: what runs the quantized layers, and why
    advice: str = ""  # for an FP4 checkpoint on Marlin: the runbook's remedy, or its refusal

    def to_dict(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "path": self.path, "summary": self.summary,
                "advice": self.advice}


def forced_marlin(snapshot: Snapshot) -> list[str]:
    """The settings of the launch that force Marlin (`--linear-backend marlin`, ...)."""
    forced = [f"--{flag.replace('_', '-')} marlin" for flag in FORCING_FLAGS
              if str(snapshot.launch.get(flag, "")).lower() == "marlin"]
    forced += [f"{name}={value}" for name, value in sorted(snapshot.env.items())
               if name in FORCING_ENV and "marlin" in str(value).lower()]
    return forced


def kernel_path(snapshot: Snapshot) -> KernelPath | None:
    """The predicted kernel path; None for an unquantized model or no model directory."""
    model = snapshot.model
    quant = model.quant if model is not None else None
    if quant is None or not quant.quantized:
        return None
    scheme, cap = quant.scheme, snapshot.gpu.capability
    gpu = f"compute capability {cap / 10:.1f}" if cap is not None else "an unknown GPU"
    forced = forced_marlin(snapshot)
    marlin = True if forced and quant.fp4 else quant.marlin_path(cap)
    if marlin is None:
        return KernelPath(scheme, UNKNOWN, f"{scheme} on {gpu}: Marlin or a native kernel, "
                          "depending on the GPU (give --gpu-capability)")
    if not marlin:
        native = ("CUTLASS/FlashInfer W4A4" if scheme in ("W4A4_NVFP4", "MXFP4") else
                  "FlashInfer W4A16" if quant.fp4 else "the GPU's native kernels")
        return KernelPath(scheme, NATIVE, f"{scheme} on {gpu}: {native}, no Marlin repack")
    why = ("forced by " + ", ".join(forced) if forced else
           "weight-only integer quantization always runs on Marlin" if not quant.fp4
           and scheme not in ("FP8", "W8A16_FP8") else
           f"no native {'FP4' if quant.fp4 else 'FP8'} kernels below compute capability "
           f"{(NATIVE_FP4_CAPABILITY if quant.fp4 else NATIVE_FP8_CAPABILITY) / 10:.1f}")
    summary = f"{scheme} on {gpu}: weight-only Marlin ({why})"
    if not quant.fp4:
        return KernelPath(scheme, MARLIN, summary)
    if cap is not None and cap >= NATIVE_FP4_CAPABILITY:
        advice = ("remove " + ", ".join(forced) + " to run natively" if forced and
                  scheme in ("W4A4_NVFP4", "MXFP4") else
                  "serve the W4A4 NVFP4 variant of the checkpoint: it runs through "
                  "CUTLASS/FlashInfer on this GPU, never repacked through Marlin")
    else:
        advice = ("W4A4 is refused here: without native FP4 it falls back to Marlin too; keep "
                  "Marlin and make every layer fit its tiles (a tensor-parallel size that "
                  "aligns each layer), or serve W4A4 on a 10.0+ GPU (B200/B300/RTX 50)")
    return KernelPath(scheme, MARLIN, summary, advice)
