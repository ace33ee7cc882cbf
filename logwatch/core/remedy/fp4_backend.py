"""How to make a vLLM release serve a W4A4 NVFP4 checkpoint through FlashInfer's CUTLASS
kernels instead of weight-only Marlin: a flag where the release has one, an environment
variable where it does not, and never a switch the release would reject.

Which release has which switch comes from the flags and variables extracted from vLLM's sources
(core.snapshot.vllm_cli, 28 releases 0.8.5-0.33.0): `--linear-backend` from 0.22.1, `--moe-backend`
from
0.17.1, `VLLM_NVFP4_GEMM_BACKEND` and `VLLM_USE_FLASHINFER_MOE_FP4` up to 0.23.0. The values were
read in the kernel tables (0.25.1, 0.33.0): `flashinfer_cutlass` selects the FlashInfer CUTLASS
NVFP4 GEMM (compute capability 10.0, 10.3 and 12.x) and the NVFP4 MoE FlashInfer CUTLASS experts;
the variable takes `flashinfer-cutlass` (0.11.2, 0.23.0). A release not among the extracted ones
gets the switches of the newest extracted release before it, said to be assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

from logwatch.core.quant.ignore_rules import Release, release_text
from logwatch.core.snapshot.vllm_cli import CliVocabulary

LINEAR_BACKEND = "flashinfer_cutlass"
MOE_BACKEND = "flashinfer_cutlass"
LINEAR_FLAG, MOE_FLAG = "--linear-backend", "--moe-backend"
GEMM_ENV, GEMM_ENV_VALUE = "VLLM_NVFP4_GEMM_BACKEND", "flashinfer-cutlass"
MOE_ENV, MOE_ENV_VALUE = "VLLM_USE_FLASHINFER_MOE_FP4", "1"


@dataclass(frozen=True, slots=True)
class Switch:
    """One way of choosing a backend: a `vllm serve` flag or an environment variable."""

    kind: str  # "flag" or "env"
    name: str
    value: str


def fp4_switches(release: Release | None, has_moe: bool, vocab: CliVocabulary | None
                 ) -> tuple[list[Switch], list[str]]:
    """The switches that select FlashInfer CUTLASS for NVFP4 linear layers (and MoE experts,
    `has_moe`) on `release`, and notes on what is assumed or left to vLLM."""
    if release is None:
        return [], ["vLLM release unknown: no backend flag or variable is set (each release "
                    "takes different ones); vLLM chooses, and preflight with --vllm-version "
                    "tells which to set"]
    if vocab is None or not vocab.releases:
        return [], ["the flags of each vLLM release could not be read: no backend switch set"]
    notes = []
    known = release
    if not vocab.covers(release):
        earlier = [r for r in vocab.releases if r <= release]
        known = earlier[-1] if earlier else vocab.releases[0]
        notes.append(f"vLLM {release_text(release)} is not among the releases checked; the "
                     f"switches of {release_text(known)} are assumed")
    flags, env = vocab.flags_at(known), vocab.env_at(known)
    wanted = [(LINEAR_FLAG, LINEAR_BACKEND, GEMM_ENV, GEMM_ENV_VALUE)]
    if has_moe:
        wanted.append((MOE_FLAG, MOE_BACKEND, MOE_ENV, MOE_ENV_VALUE))
    switches = []
    for flag, value, variable, setting in wanted:
        if flag in flags:
            switches.append(Switch("flag", flag, value))
        elif variable in env:
            switches.append(Switch("env", variable, setting))
        else:
            notes.append(f"vLLM {release_text(known)} has neither {flag} nor {variable}: "
                         "that backend is left to vLLM")
    return switches, notes
