"""The model directories a plan may switch to: the target's configured variants first, then
the directories beside the one served. Each is read as vLLM would (config.json, the
quantization configs, the tensor names); core.remedy.plan decides which one is the W4A4 NVFP4
variant of the same model."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from logwatch.core.snapshot.model import ModelFacts
from logwatch.host.model_dir import read_model_dir

MAX_SIBLINGS = 32  # directories beside the model read at most (a models/ folder can be big)


def variant_candidates(model_dir: str, variants: Mapping[str, str] | None = None
                       ) -> dict[str, ModelFacts]:
    """Facts of each candidate by the name an operator knows it by: the variant's name in
    the configuration, or the directory's name. Directories without a config.json, and the
    model directory itself, are left out."""
    found: dict[str, ModelFacts] = {}
    current = Path(model_dir).resolve()
    for name, directory in (variants or {}).items():
        facts, _ = read_model_dir(directory)
        if facts is not None:
            found[name] = facts
    parent = current.parent
    try:
        siblings = sorted(p for p in parent.iterdir() if p.is_dir() and p.resolve() != current
                          and (p / "config.json").is_file())
    except OSError:
        siblings = []
    for path in siblings[:MAX_SIBLINGS]:
        if path.name in found or any(f.path == str(path) for f in found.values()):
            continue
        facts, _ = read_model_dir(path)
        if facts is not None:
            found[path.name] = facts
    return found
