"""The vocabulary of a matrix of releases: each release's messages (cached per release), merged
into one entry per wording with the releases that contain it."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tools.vllm_vocab import cpp_source, python_source
from tools.vllm_vocab.areas import area_of
from tools.vllm_vocab.sources import message_files, release_key
from tools.vllm_vocab.template import Message, literal_text, shape

_EXTRACTORS = (python_source, cpp_source)


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "logwatch-vocab"


def _extractor_digest() -> str:
    """Changes whenever the extraction code does, so a cache never outlives its extractor."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in ("python_source.py", "cpp_source.py", "template.py", "sources.py"):
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:16]


def extract_tree(tree: Path) -> list[Message]:
    """Every message site in one unpacked release tree."""
    found: list[Message] = []
    for relative, path in message_files(tree):
        text = path.read_text(encoding="utf-8", errors="replace")
        module = python_source if relative.endswith(".py") else cpp_source
        found.extend(module.messages(text, relative))
    return found


def release_messages(tree: Path, cache: Path | None = None) -> list[Message]:
    """One release's messages, from the cache when the tree and the extractor are unchanged."""
    cache = cache or cache_dir()
    stat = tree.stat()
    key = hashlib.sha256(f"{tree.resolve()}|{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    path = cache / f"{tree.name}-{key}-{_extractor_digest()}.json"
    if path.is_file():
        try:
            return [Message(**item) for item in json.loads(path.read_text(encoding="utf-8"))]
        except (ValueError, TypeError):
            pass  # a damaged cache file is rebuilt
    found = extract_tree(tree)
    cache.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps([asdict(m) for m in found]), encoding="utf-8")
    partial.replace(path)
    return found


# What a C++ check raises in Python: the macro's name is not in the log, the class is.
CHECK_CLASSES = {"TORCH_CHECK_NOT_IMPLEMENTED": "NotImplementedError"}


def raised_as(kind: str, label: str) -> str:
    """The class or level a log shows for a message site."""
    if kind == "torch_check":
        return CHECK_CLASSES.get(label, "RuntimeError")
    return label


def wording_key(kind: str, label: str, template: str) -> tuple[str, str, str]:
    """Two sites print the same wording when this key is equal, across files and releases."""
    return kind, raised_as(kind, label), shape(template)


@dataclass(slots=True)
class Wording:
    """One wording across releases: where the newest release has it, and every release."""

    kind: str
    label: str
    template: str  # as the newest release that has it spells the placeholders
    area: str
    file: str
    function: str
    line: int
    releases: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def shape(self) -> str:
        return shape(self.template)


def merge(per_release: Sequence[tuple[str, list[Message]]]) -> list[Wording]:
    """One Wording per (kind, label, wording), releases oldest first; sorted by area, file."""
    merged: dict[tuple[str, str, str], Wording] = {}
    for release, found in sorted(per_release, key=lambda item: release_key(item[0])):
        for message in found:
            key = wording_key(message.kind, message.label, message.template)
            entry = merged.get(key)
            if entry is None:
                entry = merged[key] = Wording(
                    message.kind, message.label, message.template,
                    area_of(message.file, literal_text(message.template)),
                    message.file, message.function, message.line)
            else:  # the newest release's site and spelling win
                entry.label, entry.template = message.label, message.template
                entry.file = message.file
                entry.function, entry.line = message.function, message.line
            if not entry.releases or entry.releases[-1] != release:
                entry.releases.append(release)
            if message.file not in entry.files:
                entry.files.append(message.file)
    for entry in merged.values():  # the newest site decides the area
        entry.area = area_of(entry.file, literal_text(entry.template))
    return sorted(merged.values(), key=lambda w: (w.area, w.file, w.line))


def vocabulary(root: Path, releases: Sequence[str],
               progress: Callable[[str], None] | None = None, jobs: int = 1,
               cache: Path | None = None) -> list[Wording]:
    """The merged vocabulary of the given releases under root; releases not cached yet are
    read by `jobs` processes at once."""
    trees = [root / release for release in releases]
    per_release: list[tuple[str, list[Message]]] = []
    if jobs > 1 and len(trees) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(release_messages, tree, cache) for tree in trees]
            for tree, future in zip(trees, futures, strict=True):
                per_release.append((tree.name, future.result()))
                if progress is not None:
                    progress(tree.name)
    else:
        for tree in trees:
            if progress is not None:
                progress(tree.name)
            per_release.append((tree.name, release_messages(tree, cache)))
    return merge(per_release)
