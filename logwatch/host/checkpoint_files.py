"""Read a model directory for the pre-flight: config.json, the safetensors index and every
shard's header (dtype, shape and byte range of each tensor), never a weight. A 100 GB
checkpoint is a few dozen headers of some hundred KB each.

Only regular files are opened (a FIFO would block the read for ever; a directory where a
shard should be is damage), every parse stops at limits of size and nesting, and what a
file holds is never shown raw: a header length that is not plausible is said as such, not
as the number its first 8 bytes make (a symlinked shard may be any file)."""

from __future__ import annotations

import json
import os
import stat
import struct
from pathlib import Path
from typing import Any

from logwatch.core.checkpoint.files import DTYPE_BYTES, CheckpointFiles, Tensor
from logwatch.core.diagnosis.preflight import NOT_READ, NotRead

INDEX = "model.safetensors.index.json"
MAX_CONFIG_BYTES = 64 << 20
MAX_HEADER_BYTES = 100 << 20  # the safetensors library's own limit
MAX_DIMS = 16  # far beyond any real tensor; a header beyond it is not a checkpoint's
MAX_DIM = 1 << 48


class HeaderError(ValueError):
    """A shard whose header cannot be used: what is wrong with it, in a sentence."""


class NotRegular(OSError):
    """A path that is not a regular file (a FIFO, a directory, a device)."""


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
    unreadable: list[tuple[str, str]] = []
    missing = tuple(s for s in shards if s not in names)
    for shard in shards:
        if shard in missing:
            continue
        try:
            tensors.update((k, Tensor(v[0], v[1], shard))
                           for k, v in read_header(directory / shard).items())
        except (HeaderError, NotRegular) as exc:
            damaged.append((shard, str(exc)))
        except IsADirectoryError:
            damaged.append((shard, "a directory, not a file"))
        except OSError as exc:
            unreadable.append((shard, f"cannot read it: {exc.strerror or exc}"))
    klass, custom = _tokenizer(directory, names)
    return CheckpointFiles(str(directory), names, config, config_error, tensors, index_file,
                           index_map, missing, tuple(damaged), tuple(unread), klass, custom,
                           tuple(unreadable))


def model_files(path: str | Path) -> CheckpointFiles | NotRead | None:
    """What `--model` names: a directory's files; NOT_READ for a file (a GGUF checkpoint,
    which some releases serve: not judged); None when nothing is there."""
    try:
        if Path(path).is_file():
            return NOT_READ
    except (OSError, ValueError):
        return None
    return read_checkpoint(path)


def read_regular(path: Path, limit: int) -> bytes:
    """A regular file's bytes (at most `limit`; more is an error), never a FIFO's or a
    device's: those raise NotRegular before any read."""
    with open(path, "rb", opener=nonblocking_opener) as fh:
        mode = os.fstat(fh.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(f"{path.name} is not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path.name} is larger than {limit >> 20} MiB")
    return data


def nonblocking_opener(path: str, flags: int) -> int:
    """Open without blocking on a FIFO that has no writer (then fstat says what it is)."""
    return os.open(path, flags | os.O_NONBLOCK)


def _json(path: Path, limit: int = MAX_CONFIG_BYTES) -> Any:
    """A JSON file's value; ValueError (with what is wrong) for anything that is not one,
    RecursionError included (nesting deeper than the parser goes)."""
    raw = read_regular(path, limit)
    try:
        return json.loads(raw)
    except RecursionError as exc:
        raise ValueError("nested too deeply to read") from exc


def _tokenizer(directory: Path, names: frozenset[str]) -> tuple[str | None, bool]:
    """tokenizer_config.json's `tokenizer_class` (transformers picks the tokenizer by it),
    and whether the tokenizer is custom code (`auto_map` names an AutoTokenizer)."""
    if "tokenizer_config.json" not in names:
        return None, False
    try:
        data = _json(directory / "tokenizer_config.json")
    except (OSError, ValueError):
        return None, False
    if not isinstance(data, dict):
        return None, False
    value = data.get("tokenizer_class")
    auto_map = data.get("auto_map")
    custom = isinstance(auto_map, dict) and "AutoTokenizer" in auto_map
    return (value if isinstance(value, str) else None), custom


def _config(directory: Path, names: frozenset[str]) -> tuple[dict[str, Any] | None, str | None]:
    if "config.json" not in names:
        return None, "config.json is missing"
    try:
        raw = read_regular(directory / "config.json", MAX_CONFIG_BYTES)
    except NotRegular:
        return None, "config.json is not a regular file"
    except ValueError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"config.json cannot be read: {exc.strerror or exc}"
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, (f"config.json is not valid JSON: {exc.msg} at line {exc.lineno}, "
                      f"column {exc.colno}")
    except UnicodeDecodeError as exc:
        return None, f"config.json is not UTF-8 text: {exc.reason} at byte {exc.start}"
    except RecursionError:
        return None, "config.json is nested too deeply to read"
    except ValueError as exc:  # an integer of thousands of digits, say
        return None, f"config.json cannot be read: {exc}"
    if not isinstance(data, dict):
        return None, f"config.json holds a JSON {type(data).__name__}, not an object"
    return data, None


def _index(path: Path) -> tuple[dict[str, str], str | None]:
    try:
        data = _json(path)
    except (OSError, ValueError) as exc:
        return {}, f"{INDEX}: cannot be read: {exc}"
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict):
        return {}, f"{INDEX}: no weight_map object"
    return {str(k): str(v) for k, v in weight_map.items()
            if isinstance(v, str) and "/" not in v and v not in ("", ".", "..")}, None


def raw_header(path: Path) -> tuple[bytes, bytes, int]:
    """A .safetensors file's first 8 bytes (the header's length), its header's bytes (as many
    as the file holds of them) and the file's size. Raises NotRegular for anything but a
    regular file, HeaderError for a file too short for the length or whose length is beyond
    the safetensors library's limit (the length itself never said: a symlinked shard may be
    any file)."""
    with open(path, "rb", opener=nonblocking_opener) as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular("not a regular file")
        head = fh.read(8)
        if len(head) < 8:
            raise HeaderError(f"{info.st_size} bytes: shorter than a safetensors header")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER_BYTES:
            raise HeaderError(f"the header length it starts with is implausible (more than "
                              f"{MAX_HEADER_BYTES >> 20} MiB): not a safetensors file")
        return head, fh.read(length), info.st_size


def read_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name -> (dtype, shape) of a .safetensors file, checked against the file's size as the
    safetensors library checks it when vLLM opens the file (a shard cut short fails there)."""
    head, raw, size = raw_header(path)
    (length,) = struct.unpack("<Q", head)
    if 8 + length > size:
        raise HeaderError("the header length it starts with is more than the file holds: "
                          "cut short, or not a safetensors file")
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise HeaderError(f"its header is not JSON: {str(exc)[:200]}") from exc
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
            raise HeaderError(f"tensor {name[:200]!r}: {offsets[1] - offsets[0]} bytes for "
                              f"{dtype} {list(shape)} ({count * width} expected)")
        end = max(end, offsets[1])
        out[name] = (dtype, shape)
    if end > data_size:
        raise HeaderError(f"its tensors need {end} bytes of data, the file has {data_size}: "
                          "cut short")
    return out


def _entry(name: str, entry: object) -> tuple[str, tuple[int, ...], tuple[int, int]]:
    if not isinstance(entry, dict):
        raise HeaderError(f"tensor {name[:200]!r}: not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or not isinstance(shape, list) or len(shape) > MAX_DIMS \
            or not all(type(n) is int and 0 <= n <= MAX_DIM for n in shape) \
            or not isinstance(offsets, list) or len(offsets) != 2 \
            or not all(type(n) is int and 0 <= n <= 1 << 62 for n in offsets) \
            or not offsets[0] <= offsets[1]:
        raise HeaderError(f"tensor {name[:200]!r}: dtype, shape or data_offsets malformed")
    return dtype[:32], tuple(shape), (offsets[0], offsets[1])
