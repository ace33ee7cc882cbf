"""An error no signature diagnoses, placed: named by vLLM's own vocabulary, or put in the part
of vLLM that raised or logged it.

The fallback (core.signatures.fallback) keeps one generic finding on a record no specific
signature explains. Before it is reported, it is placed:

- `<area>.known_error`: the exception's message is a wording vLLM's sources raise
  (core.signatures.vocabulary); the finding names the check (file and function) and the
  releases that print it. `<area>.known_error_line`: the same for a line vLLM logs at ERROR.
- `<area>.unrecognised_error`: the wording is not in the vocabulary, but the traceback's
  frames name the area (core.signatures.frame_areas). `<area>.unrecognised_error_line`: an
  ERROR line whose logger tag (`[marlin_utils.py:123]`) names a file of the area.

A placed finding keeps its rule's category, severity and fatality (it is still the fallback:
any specific signature is a better cause), and its signature carries the rule it refines
(`extra["rule"]`) and the area's general advice. These signatures are derived, not files: each
id resolves from the generic rule it refines (`derived`, `WithDerived`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

from logwatch.core.lines.records import Record
from logwatch.core.signatures.findings import Finding
from logwatch.core.signatures.frame_areas import BY_ID, FRAME, Area, area_of_path, vllm_path
from logwatch.core.signatures.signature import Signature
from logwatch.core.signatures.vocabulary import Entry, Vocabulary, Wanted

UNCAUGHT = "generic.uncaught_exception"
ERROR_LINE = "generic.error_line"
# id suffix -> (the rule it refines, known from the vocabulary)
KINDS: dict[str, tuple[str, bool]] = {
    "known_error": (UNCAUGHT, True),
    "unrecognised_error": (UNCAUGHT, False),
    "known_error_line": (ERROR_LINE, True),
    "unrecognised_error_line": (ERROR_LINE, False),
}
KNOWN_ERROR_SUFFIX = ".known_error"  # a raised wording's id: `<area>.known_error`
_VALUE_ERROR = "Value error, "  # pydantic's form of a ValueError a config check raised
# the classes a C++ TORCH_CHECK reaches Python as
TORCH_CHECK_CLASSES = frozenset({"RuntimeError", "ValueError", "IndexError", "TypeError",
                                 "NotImplementedError"})
_TORCH_DISPATCH = re.compile(r"/torch/(?:_ops\.py|_library/)")


def rule_of(signature: Signature) -> str:
    """The generic rule a placed signature refines; any other signature's own id."""
    rule = signature.extra.get("rule")
    return rule if isinstance(rule, str) else signature.id


def derived(signature_id: str, base: Callable[[str], Signature | None]) -> Signature | None:
    """The placed signature of this id (`<area>.<kind>`), from its generic rule as `base`
    returns it; None for an id that is not one."""
    area_id, _, kind = signature_id.partition(".")
    if kind not in KINDS or area_id not in AREAS_BY_ID:
        return None
    rule, known = KINDS[kind]
    generic = base(rule)
    return None if generic is None else _derive(generic, AREAS_BY_ID[area_id], kind, known)


# A wording printed by a file of no area of frame_areas (vllm/utils/, a platform's file)
ELSEWHERE = Area("vllm", "vLLM", re.compile(r"(?!)"),
                 "Read the check's message against the flags, the model directory and the "
                 "release; the file and function it names are where to look in vLLM's sources.")
AREAS_BY_ID: dict[str, Area] = {**BY_ID, ELSEWHERE.id: ELSEWHERE}
_DERIVED: dict[tuple[int, str, str], tuple[Signature, Signature]] = {}


def _derive(generic: Signature, area: Area, kind: str, known: bool) -> Signature:
    key = (id(generic), area.id, kind)
    held = _DERIVED.get(key)
    if held is not None and held[0] is generic:
        return held[1]
    if len(_DERIVED) > 1024:
        _DERIVED.clear()
    made = _make(generic, area, kind, known)
    _DERIVED[key] = (generic, made)
    return made


def _make(generic: Signature, area: Area, kind: str, known: bool) -> Signature:
    line = generic.id == ERROR_LINE
    what = "logged at ERROR" if line else "raised"
    if known:
        title = f"vLLM error {what} in {area.title}"
        explanation = (
            f"vLLM {what} `{{message}}`: a message its own sources print ({{check}}, releases "
            "{releases}). No signature in the library diagnoses it, so this is the check "
            f"that failed, in {area.title}, not a diagnosis. " + area.advice)
        key_captures: tuple[str, ...] = ("vocab",)
    else:
        title = (f"Unrecognised error {what} in {area.title}" if line
                 else f"Unrecognised fatal error in {area.title}")
        explanation = (
            f"An error {what} in {area.title} that no signature knows and vLLM's vocabulary "
            "of the releases in the matrix does not hold (a newer or patched release, or a "
            "message built at run time). " + area.advice + " A recurring one can become a "
            "signature (`logwatch signatures draft`).")
        key_captures = ("exc_type",) if not line else ()
    return replace(generic, id=f"{area.id}.{kind}", title=title, explanation=explanation,
                   key_captures=key_captures, path="",
                   references=("docs/vllm-messages.md#placed-errors", *generic.references[1:]),
                   extra={"rule": generic.id, "area": area.id})


class WithDerived(Mapping[str, Signature]):
    """Signatures by id, the placed ones resolved from the generic rules they refine."""

    def __init__(self, signatures: Mapping[str, Signature]) -> None:
        self._own = signatures

    def __getitem__(self, signature_id: str) -> Signature:
        found = self._own.get(signature_id) or derived(signature_id, self._own.get)
        if found is None:
            raise KeyError(signature_id)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._own)

    def __len__(self) -> int:
        return len(self._own)


def place(finding: Finding, record: Record, vocabulary: Vocabulary | None) -> Finding:
    """The fallback's finding named from the vocabulary or put in its area, where either
    can be done; otherwise as it is."""
    rule = finding.signature.id
    if rule not in (UNCAUGHT, ERROR_LINE):
        return finding
    line = rule == ERROR_LINE
    captures = dict(finding.captures)
    asked = _error_line_texts(finding, vocabulary) if line else _exception_texts(finding, record)
    entry = vocabulary.lookup(asked) if vocabulary is not None else None
    area: Area | None
    if entry is not None:
        area = _entry_area(entry)
        captures.update(vocab=entry.id, check=_check(entry), releases=entry.release_span)
        captures.setdefault("message", entry.template.split("\n", 1)[0])
        kind = "known_error_line" if line else "known_error"
    else:
        area = BY_ID.get(captures.get("area", "")) if not line else \
            _tag_area(finding, vocabulary)
        kind = "unrecognised_error_line" if line else "unrecognised_error"
    if area is None:
        return finding
    captures["area"], captures["area_title"] = area.id, area.title
    return replace(finding, signature=_derive(finding.signature, area, kind, entry is not None),
                   captures=captures)


def _frames_before(record: Record, lineno: int) -> list[tuple[str, int]]:
    """(path, index in the record) of each frame line before `lineno`, outermost first."""
    return [(m.group("path"), i) for i, ln in enumerate(record.lines)
            if ln.lineno < lineno and (m := FRAME.match(ln.message)) is not None]


def _raising_frame(frames: list[tuple[str, int]]) -> tuple[str, int] | None:
    """The frame that raised: the innermost, or, for a custom op's check, the vLLM frame
    that called torch's op dispatch (`torch/_ops.py`, `torch/_library/`)."""
    inner = list(frames)
    while inner and _TORCH_DISPATCH.search(inner[-1][0].replace("\\", "/")):
        inner.pop()
    return inner[-1] if inner else None


def _exception_texts(finding: Finding, record: Record) -> Iterator[tuple[str, Wanted]]:
    """What may be the exception's wording, each with the wordings it may be. Only an
    exception vLLM raised is looked up: its raising frame is vLLM's (a library's exception
    that passes through vLLM is not vLLM's wording), or the record holds no frame at all (a
    message pasted alone). Its class must be the wording's (a C++ check's any of those
    torch raises); a bare assert's statement is the code line under a vLLM frame; a config
    check's message inside pydantic's report needs a vLLM frame in the record."""
    exc_type = finding.captures.get("exc_type", "")
    name = exc_type.rsplit(".", 1)[-1]
    frames = _frames_before(record, finding.lineno)
    raising = _raising_frame(frames)
    ours = raising is not None and vllm_path(raising[0]) is not None
    if frames and not ours and not any(vllm_path(p) is not None for p, _ in frames):
        return
    file = vllm_path(raising[0]) if raising is not None and ours else None
    message = finding.captures.get("message")
    if message and (ours or not frames):
        if name == "AssertionError":
            yield message, Wanted(frozenset({"assert"}), None, file)
        else:
            kinds = {"raise"} | ({"torch_check"} if name in TORCH_CHECK_CLASSES else set())
            yield message, Wanted(frozenset(kinds), frozenset({name}), file)
    if name == "AssertionError" and not message and ours and raising is not None:
        code = record.lines[raising[1] + 1].message.strip() \
            if raising[1] + 1 < len(record.lines) else ""
        if code.startswith("assert "):
            yield code, Wanted(frozenset({"assert"}), None, file)
    if name == "ValidationError":
        index = next((i for i, ln in enumerate(record.lines) if ln.lineno == finding.lineno),
                     len(record.lines))
        for ln in record.lines[index + 1:index + 8]:
            cut = ln.message.find(_VALUE_ERROR)
            if cut >= 0:
                text = ln.message[cut + len(_VALUE_ERROR):].split(" [type=", 1)[0]
                yield text, Wanted(frozenset({"raise"}), frozenset({"ValueError"}))


def _error_line_texts(finding: Finding, vocabulary: Vocabulary | None
                      ) -> Iterator[tuple[str, Wanted]]:
    """An ERROR line's message, among the wordings vLLM logs at ERROR, only where the line's
    logger tag names a file of vLLM that prints it."""
    message = finding.captures.get("message")
    tag = finding.matched.logger_file
    if not message or not tag or vocabulary is None:
        return
    paths = vocabulary.paths_of(tag)
    if paths:
        yield message, Wanted(frozenset({"log"}), None, paths[0],
                              name=paths[0].rsplit("/", 1)[-1])


def _entry_area(entry: Entry) -> Area:
    """The area of the file that prints a wording (ELSEWHERE when it is in none)."""
    return area_of_path(entry.file) or ELSEWHERE


def _tag_area(finding: Finding, vocabulary: Vocabulary | None) -> Area | None:
    """The area of the file an ERROR line's logger tag names, when every file of that name
    in the releases belongs to one area."""
    tag = finding.matched.logger_file
    if not tag or vocabulary is None:
        return None
    areas = {area_of_path(path) for path in vocabulary.paths_of(tag)}
    return areas.pop() if len(areas) == 1 else None


def _check(entry: Entry) -> str:
    where = entry.file if not entry.function else f"{entry.file} {entry.function}"
    return f"{entry.kind} {entry.label} in {where}" if entry.kind != "log" else where
