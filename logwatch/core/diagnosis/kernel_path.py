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


# What a start-up says it runs, signature by signature: (scheme, layers) from the captures,
# or fixed where the signature names them. The kernel the line names decides the path.
SELECTION_SIGNATURES = {
    "quant.linear_kernel": ("method", "linear", "kernel"),
    "nvfp4.gemm_backend": ("NVFP4", "linear", "backend"),
    "nvfp4.moe_backend": ("NVFP4", "MoE", "backend"),
}
# The fallback warnings: they name no kernel, only that the layers run weight-only on Marlin
# (or emulated); a selection line of the same scheme and layers says more and wins.
FALLBACK_SIGNATURES = {
    "nvfp4.marlin_fallback": ("dtype", "linear", "Marlin"),
    "nvfp4.cutlass_unsupported": ("NVFP4", "linear", "scheme"),
    "nvfp4.emulation_fallback": ("NVFP4", "linear", "emulation"),
}
_SCHEMES = (("nvfp4", "NVFP4"), ("mxfp4", "MXFP4"), ("mxfp8", "MXFP8"), ("fp4", "FP4"),
            ("fp8", "FP8"), ("int8", "INT8"), ("w4a8", "W4A8"), ("int4", "INT4"))


@dataclass(frozen=True, slots=True)
class ObservedKernel:
    """One scheme × layers of a launch and the kernel its start-up said runs them."""

    scheme: str  # NVFP4, MXFP4, FP8, ... (or the method vLLM named)
    layers: str  # linear | MoE
    kernel: str  # as vLLM names it
    path: str  # marlin (weight-only) | native | emulation
    signature: str  # the line that said it

    def to_dict(self) -> dict[str, str]:
        return {"scheme": self.scheme, "layers": self.layers, "kernel": self.kernel,
                "path": self.path, "signature": self.signature}

    def text(self) -> str:
        how = {MARLIN: "Marlin, weight-only", "emulation": "emulated"}.get(self.path,
                                                                          "native")
        if self.kernel.lower() in ("marlin", "emulation"):  # a fallback warning's: no name
            return f"{self.scheme} {self.layers}: {how}"
        return f"{self.scheme} {self.layers}: {self.kernel} ({how})"


def _scheme(named: str) -> str:
    lowered = named.lower()
    return next((scheme for key, scheme in _SCHEMES if key in lowered), named)


def _path(kernel: str) -> str:
    lowered = kernel.lower()
    if "marlin" in lowered or "w4a16" in lowered:
        return MARLIN
    return "emulation" if "emulat" in lowered else NATIVE


def observed_kernels(incidents: list[dict[str, Any]]) -> list[ObservedKernel]:
    """The kernel path a launch's start-up reported, one record per scheme and layers: its
    kernel-selection lines first, the fallback warnings where no line named a kernel
    (`incidents`: a report's incident dicts of one launch)."""
    found: dict[tuple[str, str], ObservedKernel] = {}
    for table in (SELECTION_SIGNATURES, FALLBACK_SIGNATURES):
        for incident in incidents:
            rule = table.get(incident["signature"])
            if rule is None:
                continue
            captures = incident["captures"]
            scheme_of, layers, kernel_of = rule
            scheme = _scheme(captures.get(scheme_of, scheme_of))
            kernel = captures.get(kernel_of, kernel_of).strip("'\"")
            if table is FALLBACK_SIGNATURES and any(
                    known.endswith(scheme) and known_layers == layers
                    for known, known_layers in found):
                continue  # a selection line said which kernel (FP4: NVFP4's or MXFP4's)
            if table is SELECTION_SIGNATURES and scheme_of == "method":
                scheme = _scheme(kernel) if scheme == captures.get("method") else scheme
            found.setdefault((scheme, layers), ObservedKernel(
                scheme, layers, kernel, _path(kernel) if kernel != "emulation" else "emulation",
                incident["signature"]))
    return list(found.values())
