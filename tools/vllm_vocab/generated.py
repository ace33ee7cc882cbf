"""The generated vocabulary: every failure message vLLM's sources print in the domain areas, for
every release of the matrix, as data, split by a fixed hash of its wording into a tuning half
and a held-out half.

A failure message is a `raise`, an `assert`, a C++ `TORCH_CHECK` or a log call at ERROR or
CRITICAL (warnings and info lines are not failures), in a file of one of the domain areas
(tools/vllm_vocab/areas.py; "other" is left out). One entry per wording across releases, with
the releases that print it. The half is the parity of the wording key's SHA-256, so it never
depends on what logwatch recognises: signatures are written looking at the tuning half only,
and the held-out half measures what was not tuned to.

`python -m tools.vllm_vocab generate` writes `generated.json.gz` from the release trees;
`make vocab` measures both halves (tools/vllm_vocab/coverage.py).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from logwatch.core.signatures.vocabulary import KEY, index_keys
from logwatch.library.files import VocabularyFile
from tools.vllm_vocab.curated import Curated
from tools.vllm_vocab.sources import message_files
from tools.vllm_vocab.stubs import API_FILES
from tools.vllm_vocab.vocabulary import Wording, wording_key

GENERATED = Path(__file__).resolve().parent.parent.parent / "signatures" / "vocabulary.json.gz"
HALVES = ("tuning", "held_out")
FAILURE_LEVELS = frozenset({"ERROR", "CRITICAL"})


def entry_id(kind: str, label: str, template: str) -> str:
    """A wording's id: the first 12 hex digits of its key's SHA-256 (stable across runs)."""
    key = "\x1f".join(wording_key(kind, label, template))
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def half_of(identifier: str) -> str:
    """The half a wording belongs to: the parity of its id, fixed forever."""
    return HALVES[int(identifier, 16) & 1]


def is_failure(wording: Wording) -> bool:
    return wording.area != "other" and (
        wording.kind != "log" or wording.label in FAILURE_LEVELS)


def to_data(words: Sequence[Wording]) -> list[dict[str, Any]]:
    """The failure wordings as the data file holds them, by id."""
    out = []
    for w in words:
        if not is_failure(w):
            continue
        out.append({"id": entry_id(w.kind, w.label, w.template), "area": w.area,
                    "kind": w.kind, "label": w.label, "template": w.template, "file": w.file,
                    "function": w.function, "releases": list(w.releases),
                    "process": "api" if API_FILES.match(w.file) else "engine"})
    return sorted(out, key=lambda e: e["id"])


def file_index(root: Path, names: Sequence[str]) -> dict[str, list[str]]:
    """Every Python file of vLLM in these releases by its name, with every path it has: what
    a log line's `[file.py:N]` tag may name (a file list, no wording)."""
    index: dict[str, set[str]] = {}
    for name in names:
        for relative, _ in message_files(root / name):
            if relative.endswith(".py"):
                index.setdefault(PurePosixPath(relative).name, set()).add(relative)
    return {name: sorted(paths) for name, paths in sorted(index.items())}


def write(entries: list[dict[str, Any]], files: dict[str, list[str]],
          path: Path = GENERATED) -> None:
    # each entry with the word a scan files it under, so that a scan need not work them all
    # out before its first lookup (logwatch.core.signatures.vocabulary.index_keys)
    keys = index_keys(entries)
    entries = [{**e, KEY: keys[e["id"]]} for e in entries]
    text = json.dumps({"entries": entries, "files": files}, separators=(",", ":"),
                      sort_keys=True)
    # mtime 0: the same entries give the same bytes, so a regeneration diffs only on change
    with gzip.GzipFile(path, "wb", mtime=0) as out:
        out.write(text.encode())


def load(path: Path = GENERATED, half: str | None = None) -> list[Curated]:
    """The generated entries as measurable messages (every one fatal but ERROR log lines,
    which are errors), of one half or both."""
    vocabulary = VocabularyFile(path)  # read as logwatch reads it
    raw = list(vocabulary.entries())
    if vocabulary.problem:
        raise SystemExit(vocabulary.problem)
    return [Curated(id=e["id"], area=e["area"], kind=e["kind"], label=e["label"],
                    template=e["template"], file=e["file"], function=e["function"],
                    releases=tuple(e["releases"]), fatal=e["kind"] != "log",
                    process=e["process"])
            for e in raw if half is None or half_of(e["id"]) == half]
