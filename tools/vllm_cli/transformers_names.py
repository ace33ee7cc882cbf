"""The model classes transformers maps a model type to (`transformers/models/auto/
modeling_auto.py`'s `*_MAPPING_NAMES` tables), read with `ast` from a transformers wheel.

vLLM serves a config.json whose `architectures` its own registry lacks through its
Transformers backend when transformers has the class (and it is compatible): an architecture
in neither list fails for certain, one in transformers' only may or may not be served."""

from __future__ import annotations

import ast
import re
import zipfile
from pathlib import Path

AUTO = "transformers/models/auto/modeling_auto.py"
WHEEL = re.compile(r"transformers-(\d+\.\d+\.\d+)-py3-none-any\.whl")


def model_classes(source: str) -> frozenset[str]:
    """The class names of every `(model_type, class)` pair of the `*_MAPPING_NAMES` tables."""
    found: set[str] = set()
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.endswith("_MAPPING_NAMES")):
            continue
        for pair in ast.walk(node.value):
            if isinstance(pair, ast.Tuple) and len(pair.elts) == 2 \
                    and isinstance(pair.elts[0], ast.Constant):
                value = pair.elts[1]
                values = value.elts if isinstance(value, ast.Tuple) else [value]
                found |= {v.value for v in values
                          if isinstance(v, ast.Constant) and isinstance(v.value, str)}
    return frozenset(found)


def from_wheel(wheel: Path) -> tuple[str, frozenset[str]]:
    """(transformers version, its model classes) from a wheel `pip download` fetched."""
    matched = WHEEL.fullmatch(wheel.name)
    if matched is None:
        raise ValueError(f"{wheel.name}: not a transformers wheel (transformers-X.Y.Z-py3-"
                         "none-any.whl)")
    with zipfile.ZipFile(wheel) as archive:
        return matched.group(1), model_classes(archive.read(AUTO).decode("utf-8"))
