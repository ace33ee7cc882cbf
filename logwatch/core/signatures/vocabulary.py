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
MIN_LITERAL_UNANCHORED = 20  # and one that starts with a placeholder (`{} is not supported.`)
MAX_TEXT = 4000  # characters of a message looked at
# A message cut by the capture that holds it (fallback's `message`, 300 characters) may not end
# where its wording does.
CUT_AT = 300
MEMO_ENTRIES = 4096
KEY = "key"  # a data file entry's field: the word it is filed under (index_keys)
_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
# vLLM's own test helpers ship inside the package (marlin_utils_test.py copies torch's code):
# their wordings are not what a serving vLLM raises.
_TEST_HELPER = re.compile(r"(?:^|/)tests?/|(?:^|/)test_\w+\.py$|_test(?:_\w+)?\.py$")


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
    closed: bool = False  # the first line ends with fixed text

    @property
    def release_span(self) -> str:
        first, last = self.releases[0], self.releases[-1]
        return first if first == last else f"{first}–{last}"

    def matches(self, text: str) -> bool:
        """Whether `text` is this wording: its fixed pieces in order, the first at the start
        when the wording starts with one, the last at the end when it ends with one (unless
        the text was cut)."""
        position = 0
        for index, literal in enumerate(self.literals):
            found = text.find(literal, position)
            if found < 0 or (index == 0 and self.anchored and found != 0):
                return False
            position = found + len(literal)
        cut = len(text) >= CUT_AT
        return not self.closed or cut or text.rstrip().endswith(self.literals[-1].rstrip())


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


def _ends_fixed(template: str) -> bool:
    """Whether a template's first line ends with fixed text, not a placeholder."""
    first = template.split("\n", 1)[0].rstrip()
    last = None
    for match in _FIELD.finditer(first):
        last = match
    return bool(first) and not (last is not None and last.group(1) is not None
                                and last.end() == len(first))


def _entry(raw: dict[str, Any]) -> Entry | None:
    literals, anchored = literal_pieces(raw["template"])
    anchored = anchored and not literals[0][:1].isspace() if literals else False
    fixed = sum(len(p.strip()) for p in literals)
    if (fixed < (MIN_LITERAL if anchored else MIN_LITERAL_UNANCHORED)
            or not any(_WORD.search(p) for p in literals) or _TEST_HELPER.search(raw["file"])):
        return None
    return Entry(raw["id"], raw["kind"], raw["label"], raw["template"], raw["file"],
                 raw["function"], tuple(raw["releases"]), literals, anchored,
                 _ends_fixed(raw["template"]))


@dataclass(frozen=True, slots=True)
class Wanted:
    """Which wordings a text may be: of these kinds, raised as one of these classes (None:
    any), and preferably printed by this file (the raising frame's)."""

    kinds: frozenset[str]
    labels: frozenset[str] | None = None
    file: str | None = None
    name: str | None = None  # the file's name the wording must be printed by (a logger tag's)

    def accepts(self, entry: Entry) -> bool:
        return (entry.kind in self.kinds
                and (self.labels is None or entry.label in self.labels
                     or entry.kind == "torch_check")
                and (self.name is None or entry.file.rsplit("/", 1)[-1] == self.name))

    def rank(self, entry: Entry) -> tuple[bool, int]:
        return entry.file == self.file, _fixed(entry)


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
        self._filed: dict[str, list[dict[str, Any]]] = {}  # buckets not yet made entries
        self._memo: dict[tuple[str, Wanted], Entry | None] = {}
        self.problem = ""  # why the wordings could not be read, once tried

    def __getstate__(self) -> dict[str, Any]:  # to a worker process: no index, no memo
        state = dict(self.__dict__)
        state.update(_index=None, _filed={}, _memo={})
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
        other._index, other._filed, other._memo = None, {}, {}
        return other

    def _load(self) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
        if self._raw is None:
            try:
                self._raw, self._files = self._read()
            except (OSError, EOFError, ValueError, KeyError, TypeError) as error:
                # a damaged data file: nothing is known, said once (`problem`); placing by
                # frames and logger tags goes on
                self._raw, self._files = [], {}
                self.problem = f"vLLM's vocabulary could not be read: {error}"
        return self._raw, self._files or {}

    def read(self) -> str:
        """Read the wordings now (not on the first unexplained error); why they could not
        be, or ""."""
        self._load()
        return self.problem

    def entries(self) -> Iterator[dict[str, Any]]:
        """Every wording as the data file holds it (withheld ones too)."""
        yield from self._load()[0]

    def _bucket(self, word: str) -> list[Entry]:
        """The wordings filed under `word` (their rarest word), the closest first."""
        if self._index is None:
            self._index, self._filed = self._file()
        bucket = self._index.get(word)
        if bucket is None:
            raws = self._filed.pop(word, None)
            if raws is None:
                return []
            bucket = self._index[word] = _closest_first(raws)
        return bucket

    def _file(self) -> tuple[dict[str, list[Entry]], dict[str, list[dict[str, Any]]]]:
        """The wordings by the word they are filed under: from the keys the data file holds
        (written with `index_keys`, so the same), each bucket made into entries when first
        asked for; or, without keys or with wordings withheld, all made now."""
        raw = [r for r in self._load()[0] if r["id"] not in self.withheld]
        keyed = not self.withheld and raw and all(KEY in r for r in raw)
        keys = {r["id"]: r[KEY] for r in raw} if keyed else index_keys(raw)
        filed: dict[str, list[dict[str, Any]]] = {}
        for r in raw:
            if (key := keys[r["id"]]) is not None:
                filed.setdefault(key, []).append(r)
        if self._sourced():  # the file's list is not wanted any more: read again should
            self._raw = None  # `entries()` or `without()` want it
        if keyed:
            return {}, filed
        return {word: _closest_first(raws) for word, raws in filed.items()}, {}

    def lookup(self, asked: Iterable[tuple[str, Wanted]]) -> Entry | None:
        """The wording one of the texts is, among the wordings each wants (the first text
        that is one wins); None when none is."""
        for text, wanted in asked:
            text = text.strip()[:MAX_TEXT]
            if not text:
                continue
            key = (text, wanted)
            if key in self._memo:
                found = self._memo[key]
            else:
                found = self._find(text, wanted)
                if len(self._memo) >= MEMO_ENTRIES:
                    self._memo.clear()
                self._memo[key] = found
            if found is not None:
                return found
        return None

    def _find(self, text: str, wanted: Wanted) -> Entry | None:
        best: Entry | None = None
        for word in set(_WORD.findall(text)):
            for entry in self._bucket(word):
                if not wanted.accepts(entry) or not entry.matches(text):
                    continue
                if best is None or wanted.rank(entry) > wanted.rank(best):
                    best = entry
        return best

    def paths_of(self, logger_file: str) -> list[str]:
        """The paths below a release root of the files a log line's `[file.py:N]` tag may
        name: vLLM's shortened path as it is, a bare file name through the releases' file
        list (every file of that name)."""
        files = self._files if self._files is not None else self._load()[1]
        if "/" not in logger_file:
            return list(files.get(logger_file, ()))
        # vLLM's shortened form: `model_executor/.../quantization/utils/fp8_utils.py`; only
        # a file of the releases that fits it (a plugin's path names nothing)
        head, _, tail = logger_file.partition("...")
        head, tail = head.rstrip("/"), tail.lstrip("/")
        return [path for path in files.get(logger_file.rsplit("/", 1)[-1], ())
                if (path == "vllm/" + logger_file) or (
                    tail and path.startswith("vllm/" + head + "/") and path.endswith("/" + tail))]

def index_keys(raw: Sequence[dict[str, Any]]) -> dict[str, str | None]:
    """The word each wording is filed under, by id: the rarest word of its fixed pieces
    among these wordings (None: a wording too vague to be matched). The data file holds
    them (`KEY`), written by tools.vllm_vocab, so a scan need not work them out."""
    keys: dict[str, str | None] = {}
    counts: dict[str, int] = {}
    words_of: list[tuple[str, set[str]]] = []
    for r in raw:
        entry = _entry(r)
        if entry is None:
            keys[r["id"]] = None
            continue
        words = {w for p in entry.literals for w in _WORD.findall(p)}
        words_of.append((entry.id, words))
        for word in words:
            counts[word] = counts.get(word, 0) + 1
    for entry_id, words in words_of:
        keys[entry_id] = min(words, key=lambda w: (counts[w], -len(w), w))
    return keys


def _closest_first(raws: Iterable[dict[str, Any]]) -> list[Entry]:
    """A bucket's wordings as entries, the most fixed text first: the closest wording wins."""
    return sorted((e for e in map(_entry, raws) if e is not None),
                  key=lambda e: (-_fixed(e), e.id))


def _fixed(entry: Entry) -> int:
    return sum(len(p) for p in entry.literals)
