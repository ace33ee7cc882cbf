"""Read a model directory's configuration files and tensor names (never the weights), and
the digest of every file read, for the snapshot's hash."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from logwatch.core.snapshot.model import ModelFacts, model_facts
from logwatch.host.checkpoint_files import raw_header, read_regular

MAX_JSON_BYTES = 64 << 20
# not interpreted, but vLLM reads them: default sampling parameters and the chat template
HASHED_ONLY = ("generation_config.json", "tokenizer_config.json", "chat_template.jinja",
               "chat_template.json")
Digests = dict[str, str]  # file name -> sha256 of what was read


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_bytes(path: Path, problems: list[str], digests: Digests) -> bytes | None:
    """A file's content (its digest noted), or None: missing, too large, unreadable."""
    try:
        data = read_regular(path, MAX_JSON_BYTES)
    except FileNotFoundError:
        return None
    except ValueError as exc:
        problems.append(f"{path}: {exc}, not read")
        return None
    except OSError as exc:
        problems.append(f"{path}: cannot read: {exc}")
        return None
    digests[path.name] = _digest(data)
    return data


def _read_json(path: Path, problems: list[str], digests: Digests) -> dict[str, Any] | None:
    """A JSON object from `path`, or None with a problem naming file and line."""
    raw = _read_bytes(path, problems, digests)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        problems.append(f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})")
        return None
    except (ValueError, RecursionError) as exc:  # not UTF-8, nested too deep, huge numbers
        problems.append(f"{path}: cannot read: {str(exc)[:200] or type(exc).__name__}")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path}: expected a JSON object, got {type(data).__name__}")
        return None
    return data


def _safetensors_names(path: Path, problems: list[str], digests: Digests) -> list[str]:
    """Tensor names from a .safetensors header: 8 bytes of length, then JSON. No weights
    (the digest is the header's: names, dtypes, shapes and offsets)."""
    try:
        head, raw, _ = raw_header(path)
        digests[f"{path.name} (header)"] = _digest(head + raw)
        header = json.loads(raw)
    except (OSError, ValueError, RecursionError) as exc:  # HeaderError is a ValueError
        problems.append(f"{path}: cannot read the safetensors header: {exc}")
        return []
    return [k for k in header if k != "__metadata__"] if isinstance(header, dict) else []


def tensor_names(directory: Path, problems: list[str], digests: Digests) -> list[str]:
    index = _read_json(directory / "model.safetensors.index.json", problems, digests)
    if index is not None:
        weight_map = index.get("weight_map")
        if isinstance(weight_map, dict):
            return [str(k) for k in weight_map]
        problems.append(f"{directory / 'model.safetensors.index.json'}: no weight_map object")
        return []
    single = directory / "model.safetensors"
    if single.is_file():
        return _safetensors_names(single, problems, digests)
    problems.append(f"{directory}: no model.safetensors.index.json or model.safetensors")
    return []


def read_model_dir(path: str | Path, hf_overrides: dict[str, Any] | None = None
                   ) -> tuple[ModelFacts | None, list[str]]:
    """Model facts and the problems met; facts are None only when there is no directory."""
    directory = Path(path)
    problems: list[str] = []
    try:
        found = directory.is_dir()
    except (OSError, ValueError) as exc:  # too long a name, a directory we may not search
        return None, [f"{directory}: cannot read it: {exc}"]
    if not found:
        return None, [f"{directory}: model directory not found (a hub id is not read: "
                      "logwatch never downloads)"]
    digests: Digests = {}
    config = _read_json(directory / "config.json", problems, digests)
    if config is None and not (directory / "config.json").exists():
        problems.append(f"{directory / 'config.json'}: missing")
    names = tensor_names(directory, problems, digests)
    hf_quant = _read_json(directory / "hf_quant_config.json", problems, digests)
    standalone = _read_json(directory / "quantization_config.json", problems, digests)
    for name in HASHED_ONLY:
        _read_bytes(directory / name, problems, digests)
    facts = model_facts(str(directory), config or {}, names, hf_quant_config=hf_quant,
                        standalone_quant=standalone, hf_overrides=hf_overrides,
                        problems=problems, files=digests)
    return facts, problems
