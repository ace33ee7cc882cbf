"""Read a model directory's configuration files and tensor names (never the weights)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from logwatch.core.snapshot import ModelFacts, model_facts

MAX_JSON_BYTES = 64 << 20
MAX_SAFETENSORS_HEADER = 100 << 20


def _read_json(path: Path, problems: list[str]) -> dict[str, Any] | None:
    """A JSON object from `path`, or None with a problem naming file and line."""
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            problems.append(f"{path}: larger than {MAX_JSON_BYTES >> 20} MiB, not read")
            return None
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as exc:
        problems.append(f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: cannot read: {exc}")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path}: expected a JSON object, got {type(data).__name__}")
        return None
    return data


def _safetensors_names(path: Path, problems: list[str]) -> list[str]:
    """Tensor names from a .safetensors header: 8 bytes of length, then JSON. No weights."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise ValueError("file shorter than its header")
            (size,) = struct.unpack("<Q", head)
            if size > MAX_SAFETENSORS_HEADER:
                raise ValueError(f"header of {size} bytes is implausible")
            header = json.loads(fh.read(size))
    except (OSError, ValueError) as exc:
        problems.append(f"{path}: cannot read the safetensors header: {exc}")
        return []
    return [k for k in header if k != "__metadata__"] if isinstance(header, dict) else []


def tensor_names(directory: Path, problems: list[str]) -> list[str]:
    index = _read_json(directory / "model.safetensors.index.json", problems)
    if index is not None:
        weight_map = index.get("weight_map")
        if isinstance(weight_map, dict):
            return [str(k) for k in weight_map]
        problems.append(f"{directory / 'model.safetensors.index.json'}: no weight_map object")
        return []
    single = directory / "model.safetensors"
    if single.is_file():
        return _safetensors_names(single, problems)
    problems.append(f"{directory}: no model.safetensors.index.json or model.safetensors")
    return []


def read_model_dir(path: str | Path, hf_overrides: dict[str, Any] | None = None
                   ) -> tuple[ModelFacts | None, list[str]]:
    """Model facts and the problems met; facts are None only when there is no directory."""
    directory = Path(path)
    problems: list[str] = []
    if not directory.is_dir():
        return None, [f"{directory}: model directory not found (a hub id is not read: "
                      "logwatch never downloads)"]
    config = _read_json(directory / "config.json", problems)
    if config is None and not (directory / "config.json").exists():
        problems.append(f"{directory / 'config.json'}: missing")
    facts = model_facts(
        str(directory), config or {}, tensor_names(directory, problems),
        hf_quant_config=_read_json(directory / "hf_quant_config.json", problems),
        standalone_quant=_read_json(directory / "quantization_config.json", problems),
        hf_overrides=hf_overrides, problems=problems)
    return facts, problems
