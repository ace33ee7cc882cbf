"""How to make a vLLM release serve a W4A4 NVFP4 checkpoint through FlashInfer's CUTLASS
kernels instead of weight-only Marlin: a flag where the release has one, an environment
variable where it does not, and never a switch the release would reject.

Verified in the sdists of 0.11.2, 0.12.0, 0.14.0, 0.17.1, 0.20.2, 0.23.0, 0.25.1, 0.26.0 and
0.33.0 (engine/arg_utils.py, config/kernel.py, envs.py, the kernel tables):
- `--moe-backend` (KernelConfig) takes `flashinfer_cutlass`, the NVFP4 MoE FlashInfer CUTLASS
  experts, from 0.17.1 on; 0.14.0 has no such flag.
- `--linear-backend` takes `flashinfer_cutlass` (the FlashInfer CUTLASS NVFP4 GEMM, which
  runs on compute capability 10.0, 10.3 and 12.x) from 0.23.0 on; 0.20.2 has no such flag.
- `VLLM_NVFP4_GEMM_BACKEND=flashinfer-cutlass` and `VLLM_USE_FLASHINFER_MOE_FP4=1` exist from
  0.11.2 to 0.23.0 (deprecated there in favour of the flags) and are gone in 0.25.1.
Between two sampled releases that disagree the switch in force is the one both sides have
(an environment variable until 0.23.0); before 0.11.2 and after 0.33.0 the choice is the
nearest sampled release's, said to be assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

from logwatch.core.ignore_rules import Release

LINEAR_BACKEND = "flashinfer_cutlass"
MOE_BACKEND = "flashinfer_cutlass"
GEMM_ENV, GEMM_ENV_VALUE = "VLLM_NVFP4_GEMM_BACKEND", "flashinfer-cutlass"
MOE_ENV, MOE_ENV_VALUE = "VLLM_USE_FLASHINFER_MOE_FP4", "1"
MOE_FLAG_FROM: Release = (0, 17, 1)
LINEAR_FLAG_FROM: Release = (0, 23, 0)
ENV_UNTIL: Release = (0, 23, 0)  # the last sampled release with the variables
SAMPLED_FROM, SAMPLED_UNTIL = (0, 11, 2), (0, 33, 0)


@dataclass(frozen=True, slots=True)
class Switch:
    """One way of choosing a backend: a `vllm serve` flag or an environment variable."""

    kind: str  # "flag" or "env"
    name: str
    value: str


def fp4_switches(release: Release | None, has_moe: bool) -> tuple[list[Switch], list[str]]:
    """The switches that select FlashInfer CUTLASS for NVFP4 linear layers (and MoE experts,
    `has_moe`) on `release`, and notes on what is assumed. None for the release: no switch
    (each release names its own), and a note saying so."""
    if release is None:
        return [], ["vLLM release unknown: no backend flag or variable is set (each release "
                    "takes different ones); vLLM chooses, and preflight with --vllm-version "
                    "tells which to set"]
    notes = []
    if release < SAMPLED_FROM or release > SAMPLED_UNTIL:
        nearest = SAMPLED_FROM if release < SAMPLED_FROM else SAMPLED_UNTIL
        notes.append(f"vLLM {'.'.join(map(str, release))} is outside the releases checked; "
                     f"the switches of {'.'.join(map(str, nearest))} are assumed")
    switches = [Switch("flag", "--linear-backend", LINEAR_BACKEND)
                if release >= LINEAR_FLAG_FROM else Switch("env", GEMM_ENV, GEMM_ENV_VALUE)]
    if has_moe:
        switches.append(Switch("flag", "--moe-backend", MOE_BACKEND)
                        if release >= MOE_FLAG_FROM else Switch("env", MOE_ENV, MOE_ENV_VALUE))
    return switches, notes

