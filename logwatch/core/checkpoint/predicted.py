"""One failure the pre-flight predicts, and where in vLLM's start-up it happens."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# vLLM's start-up in order: a launch stops at the first failure it meets, so the report ranks
# what it predicts by these (and the rest would follow once that one is fixed).
STAGE_ARGUMENTS = 10  # the command line's parser
STAGE_CONFIG = 20  # the engine's settings and the model's config.json
STAGE_TOKENIZER = 30
STAGE_KERNELS = 40  # quantization methods and kernels chosen for this platform
STAGE_WEIGHTS = 50  # the checkpoint's files opened and its tensors loaded
STAGE_NAMES = {STAGE_ARGUMENTS: "arguments", STAGE_CONFIG: "configuration",
               STAGE_TOKENIZER: "tokenizer", STAGE_KERNELS: "kernels", STAGE_WEIGHTS: "weights"}


@dataclass(frozen=True, slots=True)
class PreflightProblem:
    kind: str  # marlin_tile, unknown_flag, weight_shape, shard_missing, ...
    title: str
    reason: str
    details: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)  # the fields that show it
    fixes: tuple[str, ...] = ()
    stage: int = STAGE_KERNELS
    # what vLLM prints when it happens, and the signature that recognises it in its log
    message: str = ""
    signature: str | None = None
    evidence: tuple[str, ...] = ()  # file and key: "config.json: max_position_embeddings"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "title": self.title, "reason": self.reason,
                "details": list(self.details), "config": self.config, "fixes": list(self.fixes),
                "stage": STAGE_NAMES.get(self.stage, str(self.stage)),
                "message": self.message, "signature": self.signature,
                "evidence": list(self.evidence)}


@dataclass
class Found:
    """What a set of checks predicts: failures for certain, failures that may happen (said
    as such), and notes of what was not judged and why."""

    certain: list[PreflightProblem] = field(default_factory=list)
    uncertain: list[PreflightProblem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def extend(self, other: Found) -> None:
        self.certain += other.certain
        self.uncertain += other.uncertain
        self.notes += other.notes
