"""vLLM's own failure vocabulary as a matcher layer: every message its sources raise or log at
ERROR in the domain areas, for every release of the matrix, known by its wording.

The data (`signatures/vocabulary.json.gz`, written by `python -m tools.vllm_vocab generate`
from the releases' sources) holds one entry per wording: its kind (`raise`, `assert`,
`torch_check`, `log`), the file and function that print it, and the releases that do. Hand
signatures come first: the vocabulary is asked only for an error no signature diagnoses (the
fallback's, core.signatures.placed), so a known wording is named with the check that raised
it instead of "unrecognised". The vocabulary never makes a finding of its own: what is user
content stays user content.

A wording is matched by its literal pieces in order (a placeholder takes any text): a
sequence of `str.find`, no regular expression, so no message can make it backtrack. Wordings
with too little fixed text to tell them apart (`{}`, `Invalid {}`) are left out.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

MIN_LITERAL = 12  # fixed characters a wording needs in its first line to be matched
MAX_TEXT = 4000  # characters of a message looked at
MEMO_ENTRIES = 4096
_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
RAISED = frozenset({"raise", "assert", "torch_check"})


@dataclass(frozen=True, slots=True)
class Entry:
    """One wording of vLLM's sources."""

    id: str
    kind: str  # raise, assert, torch_check, log
    label: str  # the exception class, the log level or the check macro
    template: str
    file: str
    function: str
    releases: tuple[str, ...]
    literals: tuple[str, ...]  # the first line's fixed pieces, in order
    anchored: bool  # the first line starts with fixed text

    @property
    def raised(self) -> bool:
        return self.kind in RAISED

    @property
    def release_span(self) -> str:
        first, last = self.releases[0], self.releases[-1]
        return first if first == last else f"{first}–{last}"

    def matches(self, text: str) -> bool:
        """Whether `text` is this wording: its fixed pieces in order, the first at the start
        when the wording starts with one."""
        position = 0
        for index, literal in enumerate(self.literals):
            found = text.find(literal, position)
            if found < 0 or (index == 0 and self.anchored and found != 0):
                return False
            position = found + len(literal)
        return True


def literal_pieces(template: str) -> tuple[tuple[str, ...], bool]:
    """The fixed pieces of a template's first line (`{{`/`}}` are literal braces) and whether
    it starts with one."""
    first = template.split("\n", 1)[0]
    pieces: list[str] = []
    current = ""
    position = 0
    starts_fixed = True
    for match in _FIELD.finditer(first):
        current += first[position:match.start()]
        if match.group(0) in ("{{", "}}"):
            current += match.group(0)[0]
        else:
            if not pieces and not current:
                starts_fixed = False
            if current:
                pieces.append(current)
            current = ""
        position = match.end()
    current += first[position:]
    if current:
        pieces.append(current)
    return tuple(p for p in pieces if p.strip()), starts_fixed and bool(pieces)


def _entry(raw: dict[str, Any]) -> Entry | None:
    literals, anchored = literal_pieces(raw["template"])
    if sum(len(p.strip()) for p in literals) < MIN_LITERAL or not any(
            _WORD.search(p) for p in literals):
        return None
    return Entry(raw["id"], raw["kind"], raw["label"], raw["template"], raw["file"],
                 raw["function"], tuple(raw["releases"]), literals,
                 anchored and not literals[0][:1].isspace())


class Vocabulary:
    """The wordings, indexed by the rarest word of each; built on first use (a scan that
    meets no unexplained error never reads them). `raw`: the data file's entries; `files`:
    vLLM's Python files by name, each with its paths. A shell subclass reads them from the
    data file instead (logwatch.library.files.VocabularyFile)."""

    def __init__(self, raw: Sequence[dict[str, Any]] | None = None,
                 files: dict[str, list[str]] | None = None,
                 withheld: Iterable[str] = ()) -> None:
        self._raw = list(raw) if raw is not None else None
        self._files = files
        self.withheld = frozenset(withheld)
        self._index: dict[str, list[Entry]] | None = None
        self._memo: dict[tuple[str, bool], Entry | None] = {}

    def __getstate__(self) -> dict[str, Any]:  # to a worker process: no index, no memo
        state = dict(self.__dict__)
        state.update(_index=None, _memo={})
        if self._sourced():
            state.update(_raw=None, _files=None)  # read again there
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def _sourced(self) -> bool:
        """Whether the wordings can be read again (a subclass's file)."""
        return False

    def _read(self) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
        raise LookupError("a vocabulary without wordings")

    def without(self, ids: Iterable[str]) -> Vocabulary:
        """The same vocabulary with these wordings left out (to measure what is not known)."""
        other = copy.copy(self)
        other.withheld = self.withheld | frozenset(ids)
        other._index, other._memo = None, {}
        return other

    def _load(self) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
        if self._raw is None:
            self._raw, self._files = self._read()
        return self._raw, self._files or {}

    def entries(self) -> Iterator[dict[str, Any]]:
        """Every wording as the data file holds it (withheld ones too)."""
        yield from self._load()[0]

    def _built(self) -> dict[str, list[Entry]]:
        if self._index is not None:
            return self._index
        entries = [e for e in (_entry(raw) for raw in self._load()[0]
                               if raw["id"] not in self.withheld) if e is not None]
        counts: dict[str, int] = {}
        words_of = []
        for entry in entries:
            words = {w for p in entry.literals for w in _WORD.findall(p)}
            words_of.append(words)
            for word in words:
                counts[word] = counts.get(word, 0) + 1
        index: dict[str, list[Entry]] = {}
        for entry, words in zip(entries, words_of, strict=True):
            key = min(words, key=lambda w: (counts[w], -len(w), w))
            index.setdefault(key, []).append(entry)
        for bucket in index.values():  # the most fixed text first: the closest wording wins
            bucket.sort(key=lambda e: (-sum(len(p) for p in e.literals), e.id))
        self._index = index
        return index

    def lookup(self, texts: Iterable[str], raised: bool) -> Entry | None:
        """The wording one of `texts` is (the first text that is one wins), among those vLLM
        raises (`raised`) or those it logs at ERROR; None when none is."""
        for text in texts:
            text = text.strip()[:MAX_TEXT]
            if not text:
                continue
            key = (text, raised)
            if key in self._memo:
                found = self._memo[key]
            else:
                found = self._find(text, raised)
                if len(self._memo) >= MEMO_ENTRIES:
                    self._memo.clear()
                self._memo[key] = found
            if found is not None:
                return found
        return None

    def _find(self, text: str, raised: bool) -> Entry | None:
        index = self._built()
        best: Entry | None = None
        for word in set(_WORD.findall(text)):
            for entry in index.get(word, ()):
                if entry.raised != raised or not entry.matches(text):
                    continue
                if best is None or _fixed(entry) > _fixed(best):
                    best = entry
                break  # a bucket is sorted: its first match is its best
        return best

    def paths_of(self, logger_file: str) -> list[str]:
        """The paths below a release root of the files a log line's `[file.py:N]` tag may
        name: vLLM's shortened path as it is, a bare file name through the releases' file
        list (every file of that name)."""
        if "/" in logger_file:
            return ["vllm/" + logger_file.lstrip("/")]
        return list(self._load()[1].get(logger_file, ()))

def _fixed(entry: Entry) -> int:
    return sum(len(p) for p in entry.literals)
