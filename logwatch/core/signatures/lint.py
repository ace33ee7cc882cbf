"""Lint the signature library: untested branches, risky patterns, examples two rules claim."""

from __future__ import annotations

import re
import re._constants as sre_constants
import re._parser as sre_parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import regex

from logwatch.core.signatures.idle_literals import idle_literals
from logwatch.core.signatures.library import Library, Progress, Step, _records, no_progress
from logwatch.core.signatures.matcher import MATCH_TIMEOUT_S, Matcher
from logwatch.core.signatures.signature import CONSEQUENCE_CATEGORIES, FALLBACK_CATEGORY, Signature

_UNBOUNDED = sre_constants.MAXREPEAT
_REPEATS = {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT,
            getattr(sre_constants, "POSSESSIVE_REPEAT", sre_constants.MAX_REPEAT)}
_WILD = {sre_constants.ANY, sre_constants.NOT_LITERAL, sre_constants.IN}


@dataclass(frozen=True, slots=True)
class LintIssue:
    signature: str
    path: str
    # untested-pattern, untested-branch, catastrophic, unanchored, shared-example, idle-literal
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.signature}: {self.kind}: {self.message}"


def nested_quantifier(pattern: str) -> bool:
    """Catastrophic shapes: an unbounded repeat inside another repeat, or a repeated
    alternation whose branches can start the same way (`(a|aa)+`)."""
    try:
        parsed = sre_parse.parse(pattern)
    except Exception:  # regex-only syntax: `re` cannot judge it, the time bound still holds
        return False

    def walk(items: Any, inside_repeat: bool) -> bool:
        for op, av in items:
            if op in _REPEATS:
                _, high, sub = av
                unbounded = high == _UNBOUNDED
                if unbounded and inside_repeat:
                    return True
                # an outer repeat of a few (e.g. {0,2}) is polynomial at worst; more is not
                if walk(sub, inside_repeat or high == _UNBOUNDED or high > 10):
                    return True
            elif op == sre_constants.SUBPATTERN:
                if walk(av[3], inside_repeat):
                    return True
            elif op == sre_constants.BRANCH:
                # `re` factors `a|aa` into `a(?:|a)`: an empty branch under a repeat, or two
                # branches starting alike, give the engine many ways to split the same text
                firsts = [next(iter(b)) for b in av[1] if len(b)]
                if inside_repeat and (len(firsts) < len(av[1])
                                      or len({repr(f) for f in firsts}) < len(firsts)):
                    return True
                if any(walk(b, inside_repeat) for b in av[1]):
                    return True
            elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT) and walk(av[1],
                                                                                  inside_repeat):
                return True
        return False

    return walk(parsed, False)


def unanchored(pattern: str) -> bool:
    """Starts or ends with an unbounded wildcard, which matches nothing more and costs time."""
    try:
        parsed = list(sre_parse.parse(pattern))
    except Exception:
        return False
    if not [i for i in parsed if i[0] != sre_constants.AT]:
        return True
    # `^` and `$` anchor a wildcard next to them: `^[^\w]*version` is fine
    starts_anchored = parsed[0][0] == sre_constants.AT
    ends_anchored = parsed[-1][0] == sre_constants.AT

    def wild(item: Any) -> bool:
        op, av = item
        if not (op in _REPEATS and av[1] == _UNBOUNDED and len(av[2]) == 1):
            return False
        inner_op, inner_av = av[2][0]
        if inner_op == sre_constants.IN:  # only a negated class ([^x]) is a wildcard
            return bool(inner_av) and inner_av[0][0] == sre_constants.NEGATE
        return inner_op in _WILD

    return (not starts_anchored and wild(parsed[0])) or (not ends_anchored and wild(parsed[-1]))


def _groups_with_alternatives(pattern: str) -> Iterator[tuple[int, int, list[tuple[int, int]]]]:
    """(content start, content end, alternative spans) for each group with a top-level `|`."""
    stack: list[tuple[int, list[int], bool]] = [(0, [], False)]  # start, bars, is_lookaround
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
            i += 1
            continue
        if ch == "[":
            in_class = True
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            continue
        if ch == "(":
            start, lookaround = i + 1, False
            if pattern.startswith("?", start):
                m = re.match(r"\?(?:P<\w+>|<\w+>|:|=|!|<=|<!|[aiLmsux-]+:|>)", pattern[start:])
                if m:
                    lookaround = m.group(0) in ("?=", "?!", "?<=", "?<!")
                    start += len(m.group(0))
            stack.append((start, [], lookaround))
        elif ch == ")" and len(stack) > 1:
            start, bars, lookaround = stack.pop()
            if bars and not lookaround:
                yield start, i, _spans(start, i, bars)
        elif ch == "|":
            stack[-1][1].append(i)
        i += 1
    start, bars, _ = stack[0]
    if bars:
        yield 0, n, _spans(0, n, bars)


def _spans(start: int, end: int, bars: list[int]) -> list[tuple[int, int]]:
    edges = [start - 1, *bars, end]
    return [(edges[k] + 1, edges[k + 1]) for k in range(len(edges) - 1)]


PROBE = "lw_branch_probe"


def branch_probes(pattern: str) -> Iterator[tuple[str, str]]:
    """(alternative text, pattern with that alternative wrapped in a probe group).

    A branch is exercised when the probe group takes part in a match; optional groups
    cannot fool this the way removing the other alternatives could.
    """
    for _, _, spans in _groups_with_alternatives(pattern):
        for a, b in spans:
            yield pattern[a:b], f"{pattern[:a]}(?P<{PROBE}>{pattern[a:b]}){pattern[b:]}"


def lint_signature(signature: Signature) -> list[LintIssue]:
    issues: list[LintIssue] = []
    messages = [r.message for ex in signature.examples for r in _records(ex.text)]

    def add(kind: str, message: str) -> None:
        issues.append(LintIssue(signature.id, signature.path, kind, message))

    for number, pattern in enumerate(signature.patterns, 1):
        compiled = regex.compile(pattern.regex, regex.MULTILINE)
        try:
            if not any(compiled.search(m, timeout=MATCH_TIMEOUT_S) for m in messages):
                add("untested-pattern", f"pattern {number} matches none of the examples")
        except TimeoutError:
            add("catastrophic", f"pattern {number} ran over the {MATCH_TIMEOUT_S * 1000:g} ms "
                                "match budget on an example")
            continue
        if nested_quantifier(pattern.regex):
            add("catastrophic", f"pattern {number} nests an unbounded quantifier inside "
                                "another; it can backtrack exponentially")
        if unanchored(pattern.regex):
            add("unanchored", f"pattern {number} starts or ends with an unbounded wildcard")
        for alternative, probe in branch_probes(pattern.regex):
            try:
                probed = regex.compile(probe, regex.MULTILINE)
            except regex.error:
                continue
            try:
                exercised = any(m.group(PROBE) is not None for text in messages
                                for m in probed.finditer(text, timeout=MATCH_TIMEOUT_S))
            except TimeoutError:
                add("catastrophic", f"pattern {number}: probing the branch {alternative!r} "
                                    "ran over the match budget on an example")
                continue
            if not exercised:
                add("untested-branch", f"pattern {number}: no example exercises the branch "
                                       f"{alternative!r}")
    return issues


def lint_library(library: Library, progress: Progress = no_progress,
                 traffic: bytes = b"") -> list[LintIssue]:
    """`traffic`: healthy vLLM output to measure the literals on (core.signatures.
    idle_literals); none, none measured."""
    issues: list[LintIssue] = []
    for sig in library.signatures:
        progress(Step(sig.path, None, f"signature {sig.id!r}: linting its patterns"))
        issues.extend(lint_signature(sig))
    matcher = Matcher(library.signatures, engine="python", disable_after=None)
    for sig in library.signatures:
        progress(Step(sig.path, None, f"signature {sig.id!r}: looking for shared examples"))
        for number, example in enumerate(sig.examples, 1):
            # consequence signatures (engine/worker failed) legitimately share lines with
            # causes, and the fallback (generic.*) exists to give way to specific ones
            if sig.category == FALLBACK_CATEGORY:
                continue
            claimed = {f.signature.id for f in matcher.match_records(_records(example.text))
                       if (f.signature.category not in CONSEQUENCE_CATEGORIES
                           or sig.category in CONSEQUENCE_CATEGORIES)
                       # the fallback gives way on a line a specific finding above info
                       # explains (fallback.settle_record): no claim of its own there
                       and not (f.signature.category == FALLBACK_CATEGORY
                                and sig.severity_rank >= 1)}
            others = sorted(claimed - {sig.id})
            if others:
                issues.append(LintIssue(sig.id, sig.path, "shared-example",
                                        f"example {number} is also claimed by "
                                        f"{', '.join(others)}"))
    if traffic:
        progress(Step("", None, f"the literals on {len(traffic) / 1e6:.1f} MB of healthy "
                      "traffic"))
        paths = {sig.id: sig.path for sig in library.signatures}
        for idle in idle_literals(library.signatures, traffic):
            issues.append(LintIssue(idle.signatures[0], paths[idle.signatures[0]],
                                    "idle-literal", idle.describe()))
    return issues
