"""Which vLLM releases can have run a model: those of the checked matrix from the first one
whose model registry names the checkpoint's architecture (tests/test_ignore_rules_oracle.py
checks each entry against the registries). An unlisted architecture: the whole matrix."""

from __future__ import annotations

from collections.abc import Iterable

from logwatch.core.quant.ignore_rules import MATRIX, Release

# architecture -> the first release of the matrix that registers it
FIRST_RELEASE: dict[str, Release] = {
    "DeepseekV3ForCausalLM": (0, 8, 5),
    "Glm4MoeForCausalLM": (0, 10, 0),
    "Qwen3NextForCausalLM": (0, 10, 2),
    "GlmMoeDsaForCausalLM": (0, 16, 0),
    "Qwen3_5MoeForConditionalGeneration": (0, 17, 1),
    "Qwen3_5ForConditionalGeneration": (0, 17, 1),
}


def candidate_releases(architectures: Iterable[object]) -> tuple[Release, ...]:
    """The matrix releases that could run a checkpoint of these architectures."""
    firsts = [FIRST_RELEASE[a] for a in architectures if isinstance(a, str)
              and a in FIRST_RELEASE]
    first = max(firsts) if firsts else MATRIX[0]
    found = tuple(r for r in MATRIX if r >= first)
    return found or MATRIX
