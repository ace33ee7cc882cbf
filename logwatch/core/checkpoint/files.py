"""What the pre-flight knows of a checkpoint's files: read by logwatch/host/checkpoint_files.py
(headers only, never a weight), judged by checks.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# safetensors dtype names and their sizes in bytes ("F4" and "F8_E8M0" are packed/scale types
# newer writers use; an unknown name is not sized)
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
               "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
               "I64": 8, "U64": 8, "F64": 8}
FLOAT_DTYPES = frozenset({"F16", "BF16", "F32", "F64"})


@dataclass(frozen=True, slots=True)
class Tensor:
    dtype: str
    shape: tuple[int, ...]
    file: str  # the shard's file name


@dataclass(frozen=True, slots=True)
class CheckpointFiles:
    """A model directory's files, as far as the pre-flight reads them."""

    path: str
    names: frozenset[str]  # the directory's own entries (not recursive)
    config: dict[str, Any] | None  # config.json parsed; None: missing or broken
    config_error: str | None  # why config.json could not be used (None: it could)
    tensors: dict[str, Tensor] = field(default_factory=dict)  # from every header read
    index_file: str | None = None  # model.safetensors.index.json when present
    index_map: dict[str, str] = field(default_factory=dict)  # tensor -> shard, as indexed
    missing_shards: tuple[str, ...] = ()  # shards the index names that are not there
    damaged: tuple[tuple[str, str], ...] = ()  # (file, what is wrong) of unreadable shards
    unread: tuple[str, ...] = ()  # what was not read, and why (limits, permissions)
    tokenizer_class: str | None = None  # tokenizer_config.json's, when it names one
    tokenizer_custom: bool = False  # its auto_map names an AutoTokenizer (remote code)
    # shards that are there but could not be read here (permissions: vLLM may run as
    # another user), with why
    unreadable: tuple[tuple[str, str], ...] = ()

    @property
    def configuration_only(self) -> bool:
        """An index without any of its shards: a copy of the configuration (to check before
        a download, say), whose other missing files are not failures either."""
        return bool(self.index_map) and len(self.missing_shards) == len(
            set(self.index_map.values()))

    @property
    def has_weights(self) -> bool:
        """Safetensors files, indexed or not (other formats are not read)."""
        return bool(self.index_map) or any(n.endswith(".safetensors") for n in self.names)
