"""Load and validate the signature library from TOML texts: all of it, or nothing.

Every problem is collected with its file, line and a hint before anything is refused, and
every signature's examples and counter-examples are run through the real pipeline.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import regex

from logwatch.core.lines.assemble import assemble
from logwatch.core.problems import Problem, did_you_mean
from logwatch.core.signatures.placed import WithDerived, derived
from logwatch.core.signatures.signature import (
    CATEGORIES,
    CONDITION_OPS,
    REMEDIES,
    REPEATS,
    SEVERITIES,
    STATUSES,
    Condition,
    Example,
    Pattern,
    Signature,
)
from logwatch.core.signatures.vocabulary import Vocabulary

if TYPE_CHECKING:
    from logwatch.core.signatures.findings import Finding

SIGNATURE_KEYS = {
    "id": "required", "version": "required", "status": "required", "severity": "required",
    "fatal": "required", "category": "required", "title": "required",
    "patterns": "required", "explanation": "required", "remedy": "required",
    "examples": "required", "counter_examples": "required", "conditions": "optional",
    "key_captures": "optional", "vllm_versions": "optional", "references": "optional",
    "repeats": "optional",
}
PATTERN_KEYS = ("regex", "literals")
CONDITION_KEYS = ("capture", "op", "value")
EXAMPLE_KEYS = ("text", "captures")
LIBRARY_KEYS = ("version", "changelog")
CHANGELOG_KEYS = ("version", "date", "changes")
_ID = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+")
# A named group in a pattern already known to compile (see parse_signature).
_GROUP_NAME = re.compile(r"\(\?P?<([A-Za-z_]\w*)>")  # (?P<n>...) or (?<n>...)
_SEMVER = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?")
EXAMPLE_REFERENCE_TIME = datetime(2026, 6, 1)


@dataclass(frozen=True, slots=True)
class Step:
    """What the loader is about to do, named for an operator should it never finish."""

    path: str
    line: int | None
    what: str  # e.g. "signature 'site.x': example 2"


Progress = Callable[[Step], None]


def no_progress(step: Step) -> None:
    pass


class LibraryError(Exception):
    """The library did not load; `problems` lists every reason."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True, slots=True)
class Library:
    version: str
    changelog: tuple[dict[str, Any], ...]
    signatures: tuple[Signature, ...]
    sources: tuple[str, ...] = field(default=())
    texts: dict[str, str] = field(default_factory=dict)  # signature id -> its file's text
    vocabulary: Vocabulary | None = None  # vLLM's own wordings (core.signatures.vocabulary)

    def get(self, signature_id: str) -> Signature | None:
        """A signature by id; a placed one (core.signatures.placed) from its rule."""
        own = next((s for s in self.signatures if s.id == signature_id), None)
        return own or derived(signature_id, self.get)

    def by_id(self) -> WithDerived:
        """Every signature by id, the placed ones resolved on demand."""
        return WithDerived({s.id: s for s in self.signatures})


# The draft-acceptance target: spec_decode.acceptance takes rates at or above it,
# spec_decode.acceptance_below_target those under it (and above the garbage line).
DEFAULT_ACCEPTANCE_TARGET = 50.0
GARBAGE_ACCEPTANCE = 10.0  # spec_decode.low_acceptance's line, fixed
_TARGET_BOUNDS = {"spec_decode.acceptance": ">=", "spec_decode.acceptance_below_target": "<"}


def with_acceptance_target(library: Library, percent: float) -> Library:
    """The library with the draft-acceptance target at `percent` (more than the garbage
    line, at most 100): the two signatures' bounds at the target move, nothing else."""
    if not GARBAGE_ACCEPTANCE < percent <= 100:
        raise ValueError(f"a draft-acceptance target of {percent:g}%: more than "
                         f"{GARBAGE_ACCEPTANCE:g}, at most 100")
    moved = []
    for signature in library.signatures:
        op = _TARGET_BOUNDS.get(signature.id)
        if op is not None:
            signature = replace(signature, conditions=tuple(
                replace(c, value=percent if c.capture == "rate_percent" else percent / 100)
                if c.op == op and c.capture in ("rate_percent", "rate_fraction") else c
                for c in signature.conditions))
        moved.append(signature)
    return replace(library, signatures=tuple(moved))


def _line_of(text: str, key: str, table: str | None = None, index: int = 0) -> int | None:
    """Best-effort line number of `key` (inside the index-th `[[table]]` when given)."""
    lines = text.splitlines()
    start = 0
    if table is not None:
        headers = [i for i, ln in enumerate(lines) if ln.strip() == f"[[{table}]]"]
        if index < len(headers):
            start = headers[index]
            if not key:
                return start + 1
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=") if key else None
    for i in range(start, len(lines)):
        if pattern is not None and pattern.match(lines[i]):
            return i + 1
    return start + 1 if table is not None else None


class _Checker:
    """Collects problems for one file."""

    def __init__(self, path: str, text: str) -> None:
        self.path, self.text = path, text
        self.problems: list[Problem] = []

    def add(self, message: str, key: str = "", table: str | None = None, index: int = 0,
            hint: str = "") -> None:
        self.problems.append(Problem(self.path, _line_of(self.text, key, table, index),
                                     message, hint))

    def unknown_keys(self, data: dict[str, Any], allowed: Iterable[str], where: str,
                     table: str | None = None, index: int = 0) -> None:
        allowed = list(allowed)
        for key in data:
            if key not in allowed:
                self.add(f"unknown key {key!r} in {where}", key, table, index,
                         did_you_mean(key, allowed))

    def typed(self, data: dict[str, Any], key: str, kind: type | tuple[type, ...],
              where: str, table: str | None = None, index: int = 0) -> Any:
        value = data.get(key)
        if value is None:
            self.add(f"missing required key {key!r} in {where}", "", table, index)
            return None
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__
                                                                          for k in kind)
            self.add(f"{key!r} must be a {names}, got {type(value).__name__}", key, table,
                     index)
            return None
        return value

    def tables(self, data: dict[str, Any], key: str, allowed: Sequence[str],
               label: str) -> Iterator[tuple[int, dict[str, Any]]]:
        """The entries of a `[[key]]` array that are tables, unknown keys reported."""
        entries = data.get(key) or []
        if not isinstance(entries, list):
            self.add(f"{key} must be an array of [[{key}]] tables", key)
            return
        for i, raw in enumerate(entries):
            if not isinstance(raw, dict):
                self.add(f"each [[{key}]] entry must be a table", key)
                continue
            self.unknown_keys(raw, allowed, f"{label} {i + 1}", key, i)
            yield i, raw

    def choice(self, data: dict[str, Any], key: str, choices: Sequence[str]) -> str | None:
        value = self.typed(data, key, str, "the signature")
        if value is not None and value not in choices:
            self.add(f"{key} {value!r} is not one of {', '.join(choices)}", key,
                     hint=did_you_mean(value, choices))
            return None
        return value  # type: ignore[no-any-return]


def parse_signature(path: str, text: str, compile_patterns: bool = True
                    ) -> tuple[Signature | None, list[Problem]]:
    """Parse and validate one signature file (examples are checked separately).

    `compile_patterns=False` for a text that passed this check before (library.vetted):
    its capture names are then read from the pattern's text, and the matcher compiles a
    pattern when it first needs it."""
    check = _Checker(path, text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        return None, [Problem(path, int(line.group(1)) if line else None,
                              f"invalid TOML: {exc}")]
    check.unknown_keys(data, SIGNATURE_KEYS, "the signature")
    sig_id = check.typed(data, "id", str, "the signature")
    if sig_id is not None and not _ID.fullmatch(sig_id):
        check.add(f"id {sig_id!r} must be dotted lowercase words, e.g. 'marlin.repack_tile_n'",
                  "id")
    version = check.typed(data, "version", int, "the signature")
    if version is not None and version < 1:
        check.add("version must be 1 or more", "version")
    status = check.choice(data, "status", STATUSES)
    severity = check.choice(data, "severity", SEVERITIES)
    category = check.choice(data, "category", CATEGORIES)
    remedy = check.choice(data, "remedy", REMEDIES)
    fatal = check.typed(data, "fatal", bool, "the signature")
    title = check.typed(data, "title", str, "the signature")
    explanation = check.typed(data, "explanation", str, "the signature")

    patterns: list[Pattern] = []
    groups: set[str] = set()
    if "patterns" not in data:
        check.add("missing required key 'patterns' in the signature")
    for i, raw in check.tables(data, "patterns", PATTERN_KEYS, "pattern"):
        source = check.typed(raw, "regex", str, f"pattern {i + 1}", "patterns", i)
        literals = check.typed(raw, "literals", list, f"pattern {i + 1}", "patterns", i)
        if source is None or literals is None:
            continue
        if not compile_patterns:
            groups.update(_GROUP_NAME.findall(source))
        else:
            try:
                compiled = regex.compile(source, regex.MULTILINE)
            except regex.error as exc:
                check.add(f"pattern {i + 1} is not a valid regex: {exc}", "regex", "patterns",
                          i)
                continue
            groups.update(compiled.groupindex)
        if not literals or not all(isinstance(x, str) and x and "\n" not in x
                                   for x in literals):
            check.add(f"pattern {i + 1} needs a non-empty list of one-line literal strings",
                      "literals", "patterns", i)
            continue
        patterns.append(Pattern(source, tuple(literals)))

    conditions: list[Condition] = []
    for i, raw in check.tables(data, "conditions", CONDITION_KEYS, "condition"):
        capture = check.typed(raw, "capture", str, f"condition {i + 1}", "conditions", i)
        op = check.typed(raw, "op", str, f"condition {i + 1}", "conditions", i)
        value = check.typed(raw, "value", (int, float), f"condition {i + 1}", "conditions", i)
        if capture is not None and groups and capture not in groups:
            check.add(f"condition {i + 1} names capture {capture!r}, which no pattern defines",
                      "capture", "conditions", i, did_you_mean(capture, groups))
        if op is not None and op not in CONDITION_OPS:
            check.add(f"condition {i + 1} op {op!r} is not one of {' '.join(CONDITION_OPS)}",
                      "op", "conditions", i)
        if capture is not None and op in CONDITION_OPS and value is not None:
            conditions.append(Condition(capture, op, float(value)))

    key_captures = data.get("key_captures")
    if key_captures is not None:
        if not isinstance(key_captures, list) or not all(isinstance(k, str)
                                                         for k in key_captures):
            check.add("key_captures must be a list of capture names", "key_captures")
            key_captures = None
        else:
            for name in key_captures:
                if name not in groups:
                    check.add(f"key_captures names {name!r}, which no pattern captures",
                              "key_captures", hint=did_you_mean(name, groups))

    examples = _examples(check, data, "examples", groups)
    counter_examples = _examples(check, data, "counter_examples", groups)
    vllm_versions = data.get("vllm_versions", "")
    if not isinstance(vllm_versions, str):
        check.add("vllm_versions must be a string such as '>=0.10'", "vllm_versions")
    references = data.get("references", [])
    if not isinstance(references, list) or not all(isinstance(r, str) for r in references):
        check.add("references must be a list of strings", "references")
        references = []

    repeats = data.get("repeats", REPEATS[0])
    if repeats not in REPEATS:
        check.add(f"repeats {repeats!r} is not one of {', '.join(REPEATS)}", "repeats",
                  hint=did_you_mean(str(repeats), REPEATS))
        repeats = REPEATS[0]
    if check.problems:
        return None, check.problems
    assert sig_id and version and status and severity and category and remedy and title
    return Signature(
        id=sig_id, version=version, status=status, severity=severity, fatal=bool(fatal),
        category=category, title=title, patterns=tuple(patterns),
        explanation=str(explanation).strip(), remedy=remedy, examples=tuple(examples),
        counter_examples=tuple(counter_examples), conditions=tuple(conditions),
        key_captures=tuple(key_captures) if key_captures is not None else None,
        vllm_versions=str(vllm_versions), references=tuple(references), path=path,
        repeats=repeats,
    ), []


def _examples(check: _Checker, data: dict[str, Any], key: str,
              groups: set[str]) -> list[Example]:
    raw_list = data.get(key)
    if not isinstance(raw_list, list) or not raw_list:
        check.add(f"at least one [[{key}]] entry is required", "", None,
                  hint="every signature carries lines it must match and lines it must not")
        return []
    out: list[Example] = []
    allowed = EXAMPLE_KEYS if key == "examples" else ("text",)
    for i, raw in check.tables(data, key, allowed, key):
        text = check.typed(raw, "text", str, f"{key} {i + 1}", key, i)
        captures = raw.get("captures")
        if captures is not None and (not isinstance(captures, dict) or not all(
                isinstance(v, str) for v in captures.values())):
            check.add(f"{key} {i + 1}: captures must be a table of strings", "captures", key, i)
            captures = None
        for name in captures or {}:
            if groups and name not in groups:
                check.add(f"{key} {i + 1} expects capture {name!r}, which no pattern defines",
                          "captures", key, i, did_you_mean(name, groups))
        if text is not None:
            out.append(Example(text, dict(captures) if captures is not None else None))
    return out


def check_examples(signature: Signature, text: str,
                   progress: Progress = no_progress) -> list[Problem]:
    """Run a signature's examples and counter-examples through parse, assemble and match.

    Every pattern also runs alone on each of them under the full match budget: one that runs
    over is a problem naming it, for it would cost that budget on every such line."""
    from logwatch.core.signatures.matcher import (  # matcher imports findings,
        MATCH_TIMEOUT_S,
        Matcher,
    )
    # which import us

    matcher = Matcher([signature], engine="python", disable_after=None)
    problems: list[Problem] = []

    def run(kind: str, index: int, line: int | None, records: list[Any]
            ) -> tuple[list[Finding], list[tuple[int, str, str | None]]]:
        """The matcher's findings and each pattern's matches alone; overruns reported."""
        matcher.timeouts.clear()
        matcher.skipped.clear()
        findings = matcher.match_records(records)
        if matcher.timeouts or matcher.skipped:
            # once more: one overrun can be the machine's (_search_twice); a pattern its
            # record's budget left untried matches nothing, which read as a failed example
            matcher.timeouts.clear()
            matcher.skipped.clear()
            findings = matcher.match_records(records)
        over, matches = _each_pattern(signature, records)
        for number in over:
            problems.append(Problem(
                signature.path, line, f"{kind} {index + 1}: pattern {number + 1} ran over the "
                f"{MATCH_TIMEOUT_S * 1000:g} ms match budget on it", OVER_BUDGET_HINT))
        if matcher.timeouts and not over:
            problems.append(Problem(
                signature.path, line, f"{kind} {index + 1}: the patterns together ran over "
                f"the {MATCH_TIMEOUT_S * 1000:g} ms match budget on it", OVER_BUDGET_HINT))
        return findings, matches

    for i, example in enumerate(signature.examples):
        line = _line_of(text, "", "examples", i)
        progress(Step(signature.path, line, f"signature {signature.id!r}: example {i + 1}"))
        before = len(problems)
        findings, matches = run("example", i, line, _records(example.text))
        lied = [Problem(signature.path, line,
                        f"example {i + 1}: matched text {matched[:80]!r} contains none of "
                        f"the pattern's literals", "the prefilter would skip this line")
                for number, matched, level in matches
                if not any(lit in matched or lit == level
                           for lit in signature.patterns[number].literals)]
        problems.extend(lied)
        if not findings:
            if len(problems) == before:
                problems.append(Problem(
                    signature.path, line, f"example {i + 1} does not match",
                    example.text.splitlines()[0][:120] if example.text else ""))
            continue
        if example.captures is not None:
            got = findings[0].captures
            for name, want in example.captures.items():
                if got.get(name) != want:
                    problems.append(Problem(
                        signature.path, line,
                        f"example {i + 1}: capture {name!r} is {got.get(name)!r}, "
                        f"expected {want!r}"))
    for i, counter in enumerate(signature.counter_examples):
        line = _line_of(text, "", "counter_examples", i)
        progress(Step(signature.path, line,
                      f"signature {signature.id!r}: counter-example {i + 1}"))
        if run("counter-example", i, line, _records(counter.text))[0]:
            problems.append(Problem(signature.path, line,
                                    f"counter-example {i + 1} matches but must not"))
    return problems


OVER_BUDGET_HINT = ("it backtracks catastrophically on such lines; make the repeats "
                    "unambiguous, e.g. (a|aa)+ -> a+")


def _each_pattern(signature: Signature, records: list[Any]
                  ) -> tuple[list[int], list[tuple[int, str, str | None]]]:
    """Every pattern alone on every record, under the full match budget: (the patterns that
    ran over, (pattern, matched text, the level word the prefilter also counts for the record)
    of each first match). A pattern the matcher never reached (an earlier one matched) would
    run on other lines at run time."""
    from logwatch.core.signatures.matcher import MATCH_TIMEOUT_S, compile_pattern, level_literal

    over: list[int] = []
    matches: list[tuple[int, str, str | None]] = []
    for number, pattern in enumerate(signature.patterns):
        compiled = compile_pattern(pattern.regex)
        for record in records:
            try:
                m = _search_twice(compiled, record.message, MATCH_TIMEOUT_S)
            except TimeoutError:
                over.append(number)
                break
            if m:
                matches.append((number, m.group(0), level_literal(record)))
    return over, matches


def _records(text: str) -> list[Any]:
    from logwatch.core.lines.vllm_format import parse_line

    lines = [parse_line("example", i + 1, ln, EXAMPLE_REFERENCE_TIME)
             for i, ln in enumerate(text.splitlines())]
    return list(assemble(lines))


def parse_library_header(path: str, text: str) -> tuple[str, tuple[dict[str, Any], ...],
                                                          list[Problem]]:
    check = _Checker(path, text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return "", (), [Problem(path, None, f"invalid TOML: {exc}")]
    check.unknown_keys(data, LIBRARY_KEYS, "library.toml")
    version = check.typed(data, "version", str, "library.toml")
    if version is not None and not _SEMVER.fullmatch(version):
        check.add(f"version {version!r} is not semver (MAJOR.MINOR.PATCH)", "version")
    changelog = data.get("changelog", [])
    if not isinstance(changelog, list) or not changelog:
        check.add("changelog must list at least the current version", "changelog")
        changelog = []
    for i, entry in enumerate(changelog):
        if isinstance(entry, dict):
            check.unknown_keys(entry, CHANGELOG_KEYS, f"changelog entry {i + 1}", "changelog", i)
    if changelog and isinstance(changelog[0], dict) and changelog[0].get("version") != version:
        check.add(f"the first changelog entry must describe version {version}", "changelog")
    return version or "", tuple(changelog), check.problems


def load_library(header: tuple[str, str], layers: Sequence[Sequence[tuple[str, str]]],
                 check: bool = True, progress: Progress = no_progress,
                 vetted: bool = False) -> Library:
    """Build a library from `library.toml` and layers of signature files given as (path, text).

    A later layer overrides an earlier one signature by signature (site signatures over the
    shipped library); within one layer an id may appear only once. `progress` is told each
    step before it starts (a caller bounding the load in time names the one that ran over).
    `vetted`: these exact texts passed the whole check before, so patterns are not compiled
    here (see parse_signature).
    """
    version, changelog, problems = parse_library_header(*header)
    by_id: dict[str, Signature] = {}
    texts: dict[str, str] = {}
    sources: list[str] = []
    for files in layers:
        seen_in: dict[str, str] = {}
        for path, text in files:
            sources.append(path)
            progress(Step(path, None, "reading it and compiling its patterns"))
            signature, file_problems = parse_signature(path, text, not vetted)
            problems.extend(file_problems)
            if signature is None:
                continue
            if signature.id in seen_in:
                problems.append(Problem(path, _line_of(text, "id"),
                                        f"duplicate id {signature.id!r}, also in "
                                        f"{seen_in[signature.id]}",
                                        "ids are stable and never reused"))
            seen_in[signature.id] = path
            by_id[signature.id] = signature
            texts[signature.id] = text
    if check:
        for signature in by_id.values():
            problems.extend(check_examples(signature, texts[signature.id], progress))
    if problems:
        raise LibraryError(problems)
    return Library(version, changelog, tuple(by_id.values()), tuple(sources), texts)


def _search_twice(compiled: Any, text: str, timeout: float) -> Any:
    """A search within `timeout`, tried again once when it runs over: a pattern that costs the
    budget does so every time, while one overrun can be the machine's (a loaded CI runner
    descheduling the process mid-search made `signatures test` fail a cheap pattern once)."""
    try:
        return compiled.search(text, timeout=timeout)
    except TimeoutError:
        return compiled.search(text, timeout=timeout)
