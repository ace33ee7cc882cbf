"""The curated set: the messages an operator meets at start-up or in a broken run, as data."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.vllm_vocab.areas import AREAS

CURATED = Path(__file__).with_name("curated.toml")
KINDS = ("raise", "assert", "log", "torch_check")
PROCESSES = ("engine", "api")


class CuratedError(ValueError):
    """curated.toml has an entry that cannot be used; the message names it."""


@dataclass(frozen=True, slots=True)
class Curated:
    id: str
    area: str
    kind: str  # raise, assert, log, torch_check
    label: str  # exception class, log level or check macro
    template: str
    file: str
    function: str
    releases: tuple[str, ...]
    fatal: bool
    process: str  # engine: raised in EngineCore or a worker; api: in the API server
    signature: str | None = None  # the signature expected to name it, when one is meant to
    values: dict[str, str] = field(default_factory=dict)  # placeholder values to render with
    # the pydantic config class whose validation runs the raising code (API-server errors
    # from quantization configs and the model registry), when it is not the file's own class
    wrapped_by: str | None = None


def _entry(raw: dict[str, object], where: str) -> Curated:
    try:
        entry = Curated(
            id=str(raw["id"]), area=str(raw["area"]), kind=str(raw["kind"]),
            label=str(raw["label"]), template=str(raw["template"]), file=str(raw["file"]),
            function=str(raw.get("function", "<module>")),
            releases=tuple(str(r) for r in raw["releases"]),  # type: ignore[attr-defined]
            fatal=bool(raw["fatal"]), process=str(raw.get("process", "engine")),
            signature=str(raw["signature"]) if raw.get("signature") else None,
            values={str(k): str(v) for k, v in dict(raw.get("values", {})).items()},  # type: ignore[call-overload]
            wrapped_by=str(raw["wrapped_by"]) if raw.get("wrapped_by") else None,
        )
    except KeyError as exc:
        raise CuratedError(f"{where}: missing {exc.args[0]!r}") from exc
    if entry.area not in AREAS:
        raise CuratedError(f"{where} ({entry.id}): unknown area {entry.area!r}")
    if entry.kind not in KINDS or entry.process not in PROCESSES:
        raise CuratedError(f"{where} ({entry.id}): kind {entry.kind!r} / process "
                           f"{entry.process!r} not one of {KINDS} / {PROCESSES}")
    if not entry.releases:
        raise CuratedError(f"{where} ({entry.id}): no releases")
    return entry


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CuratedError(f"{path}: {exc}") from exc


def matrix(path: Path = CURATED) -> list[str]:
    """The releases the curated set was drawn from and is checked against."""
    return [str(r) for r in _read(path).get("matrix", [])]


def load(path: Path = CURATED) -> list[Curated]:
    """Every curated entry, ids unique."""
    data = _read(path)
    entries = [_entry(raw, f"{path.name} message {n + 1}")
               for n, raw in enumerate(data.get("message", []))]
    releases = set(matrix(path))
    seen: set[str] = set()
    for entry in entries:
        if releases and not releases.issuperset(entry.releases):
            raise CuratedError(f"{path.name} ({entry.id}): releases outside the matrix: "
                               f"{sorted(set(entry.releases) - releases)}")
        if entry.id in seen:
            raise CuratedError(f"{path.name}: id {entry.id!r} appears twice")
        seen.add(entry.id)
    return entries
