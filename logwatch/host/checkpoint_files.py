"""Read a model directory for the pre-flight: config.json, the safetensors index and every
shard's header (dtype, shape and byte range of each tensor), never a weight. A 100 GB
checkpoint is a few dozen headers of some hundred KB each."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

from logwatch.core.checkpoint.files import DTYPE_BYTES, CheckpointFiles, Tensor

INDEX = "model.safetensors.index.json"
MAX_CONFIG_BYTES = 64 << 20
MAX_HEADER_BYTES = 100 << 20  # the safetensors library's own limit


class HeaderError(ValueError):
    """A shard whose header cannot be used: what is wrong with it, in a sentence."""


def read_checkpoint(path: str | Path) -> CheckpointFiles | None:
    """The directory's files as the pre-flight needs them; None when it is not a directory."""
    directory = Path(path)
    try:
        names = frozenset(os.listdir(directory))
    except (NotADirectoryError, FileNotFoundError):
        return None
    except (OSError, ValueError) as exc:
        return CheckpointFiles(str(directory), frozenset(), None, f"cannot list it: {exc}")
    config, config_error = _config(directory, names)
    unread: list[str] = []
    index_map: dict[str, str] = {}
    index_file = INDEX if INDEX in names else None
    if index_file is not None:
        index_map, problem = _index(directory / INDEX)
        if problem:
            unread.append(problem)
        shards = sorted(set(index_map.values()))
    else:
        shards = sorted(n for n in names if n.endswith(".safetensors"))
    tensors: dict[str, Tensor] = {}
    damaged: list[tuple[str, str]] = []
    missing = tuple(s for s in shards if s not in names)
    for shard in shards:
        if shard in missing:
            continue
        try:
            tensors.update((k, Tensor(v[0], v[1], shard))
                           for k, v in read_header(directory / shard).items())
        except HeaderError as exc:
            damaged.append((shard, str(exc)))
        except OSError as exc:
            unread.append(f"{shard}: cannot read: {exc.strerror or exc}")
    return CheckpointFiles(str(directory), names, config, config_error, tensors, index_file,
                           index_map, missing, tuple(damaged), tuple(unread),
                           _tokenizer_class(directory, names))


def _tokenizer_class(directory: Path, names: frozenset[str]) -> str | None:
    """tokenizer_config.json's `tokenizer_class` (transformers picks the tokenizer by it)."""
    if "tokenizer_config.json" not in names:
        return None
    try:
        data = json.loads((directory / "tokenizer_config.json").read_bytes()[:MAX_CONFIG_BYTES])
    except (OSError, ValueError):
        return None
    value = data.get("tokenizer_class") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _config(directory: Path, names: frozenset[str]) -> tuple[dict[str, Any] | None, str | None]:
    if "config.json" not in names:
        return None, "config.json is missing"
    target = directory / "config.json"
    try:
        if target.stat().st_size > MAX_CONFIG_BYTES:
            return None, f"config.json is larger than {MAX_CONFIG_BYTES >> 20} MiB"
        raw = target.read_bytes()
    except OSError as exc:
        return None, f"config.json cannot be read: {exc.strerror or exc}"
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, (f"config.json is not valid JSON: {exc.msg} at line {exc.lineno}, "
                      f"column {exc.colno}")
    except UnicodeDecodeError as exc:
        return None, f"config.json is not UTF-8 text: {exc.reason} at byte {exc.start}"
    if not isinstance(data, dict):
        return None, f"config.json holds a JSON {type(data).__name__}, not an object"
    return data, None


def _index(path: Path) -> tuple[dict[str, str], str | None]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        return {}, f"{INDEX}: cannot be read: {exc}"
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict):
        return {}, f"{INDEX}: no weight_map object"
    return {str(k): str(v) for k, v in weight_map.items()
            if isinstance(v, str) and "/" not in v and v not in ("", ".", "..")}, None


def read_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name -> (dtype, shape) of a .safetensors file, checked against the file's size as the
    safetensors library checks it when vLLM opens the file (a shard cut short fails there)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(8)
        if len(head) < 8:
            raise HeaderError(f"{size} bytes: shorter than a safetensors header")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER_BYTES:
            raise HeaderError(f"its header claims {length} bytes (more than "
                              f"{MAX_HEADER_BYTES >> 20} MiB): not a safetensors file")
        if 8 + length > size:
            raise HeaderError(f"its header claims {length} bytes, the file has "
                              f"{size - 8} after the length: cut short")
        raw = fh.read(length)
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise HeaderError(f"its header is not JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise HeaderError("its header is not a JSON object")
    data_size = size - 8 - length
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, offsets = _entry(name, entry)
        width = DTYPE_BYTES.get(dtype)
        count = 1
        for n in shape:
            count *= n
        if width is not None and offsets[1] - offsets[0] != count * width:
            raise HeaderError(f"tensor {name!r}: {offsets[1] - offsets[0]} bytes for "
                              f"{dtype} {list(shape)} ({count * width} expected)")
        end = max(end, offsets[1])
        out[name] = (dtype, shape)
    if end > data_size:
        raise HeaderError(f"its tensors need {end} bytes of data, the file has {data_size}: "
                          "cut short")
    return out


def _entry(name: str, entry: object) -> tuple[str, tuple[int, ...], tuple[int, int]]:
    if not isinstance(entry, dict):
        raise HeaderError(f"tensor {name!r}: not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or not isinstance(shape, list) \
            or not all(isinstance(n, int) and n >= 0 for n in shape) \
            or not isinstance(offsets, list) or len(offsets) != 2 \
            or not all(isinstance(n, int) for n in offsets) or not 0 <= offsets[0] <= offsets[1]:
        raise HeaderError(f"tensor {name!r}: dtype, shape or data_offsets malformed")
    return dtype, tuple(shape), (offsets[0], offsets[1])
