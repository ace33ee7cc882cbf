"""Every signature example, as real logs mangle it, is still recognised by `logwatch scan`.

For each example of each signature in the library (as the library API loads it, so new
signatures are covered without listing them) and each mutation in tests/mutations.py, the
example is put between healthy lines, mutated, and scanned through `scan_inputs` (the scan's
own path: wrap detection, prefilter, parser, assembler, matcher, report). The mutated log must
give the same signature with the same key captures as the unmutated one, and so must the
daemon's scanner fed the log a line at a time (except for terminal wraps: a followed file is
never terminal-wrapped, and only the scan detects a wrapped paste). A mutation with
nothing to act on in an example is skipped with its reason (`pytest -rs` lists them).
"""

from __future__ import annotations

import io
from datetime import datetime
from typing import Any

import pytest

from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.fallback import NEEDS_WHOLE_RECORD, is_generic
from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from logwatch.core.signatures.placed import rule_of
from logwatch.core.signatures.signature import Signature
from logwatch.library.files import load_signature_dirs
from logwatch.scan.offline import ScanInput, scan_inputs
from tests.mutations import MUTATIONS, Mutation, NotApplicable, in_context, v0_embedded

# Collection needs the examples before fixtures exist; the `library` fixture checks them.
_LIBRARY = load_signature_dirs(check=False)
CASES = [
    pytest.param(signature.id, mutation, id=f"{signature.id}-{mutation.name}")
    for signature in _LIBRARY.signatures
    for mutation in MUTATIONS
]


@pytest.fixture(scope="module")
def matcher(library: Library) -> Matcher:
    return Matcher(library.signatures)


def scan_text(text: str, library: Library, matcher: Matcher) -> list[dict[str, Any]]:
    """The report's incidents for `text` scanned as standard input."""
    report = scan_inputs([ScanInput("<stdin>", None, stream=True)], library,
                         stdin=io.BytesIO(text.encode()), matcher=matcher)
    return list(report["incidents"])


def key_captures(library: Library, signature_id: str,
                 incidents: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The key captures of each incident of one signature."""
    signature = library.get(signature_id)
    assert signature is not None
    out = []
    for incident in incidents:
        found = library.get(incident["signature"])
        # a fallback finding may come placed (core.signatures.placed): its rule is the id
        if found is None or signature_id not in (found.id, rule_of(found)):
            continue
        captures: dict[str, str] = incident["captures"]
        names = signature.key_captures if signature.key_captures is not None else captures
        out.append({name: captures[name] for name in names if name in captures})
    return out


def live_key_captures(signature: Signature, text: str, matcher: Matcher
                      ) -> list[dict[str, str]]:
    """The key captures the daemon's scanner finds, fed a line at a time as a followed file
    delivers it, then settled as after a quiet spell."""
    scanner = BlockScanner(matcher, "followed.log", datetime.now())
    findings = []
    for line in text.encode().splitlines(keepends=True):
        findings += scanner.feed(line)
    findings += scanner.flush()
    names = signature.key_captures
    return [{name: value for name, value in finding.captures.items()
             if names is None or name in names}
            for finding in findings if signature.id in (finding.signature.id,
                                                        rule_of(finding.signature))]


_baselines: dict[tuple[str, int], list[dict[str, str]]] = {}
_wrapper_alone: list[set[str]] = []


def baseline(library: Library, matcher: Matcher, signature_id: str,
             index: int) -> list[dict[str, str]]:
    """What the unmutated example, between the same healthy lines, gives."""
    key = (signature_id, index)
    if key not in _baselines:
        signature = library.get(signature_id)
        assert signature is not None
        text = "\n".join(in_context(signature.examples[index].text)) + "\n"
        _baselines[key] = key_captures(library, signature_id,
                                       scan_text(text, library, matcher))
    return _baselines[key]


def wrapper_signatures(library: Library, matcher: Matcher) -> set[str]:
    """Signatures the V0 embedding's own words match, whatever message it carries."""
    if not _wrapper_alone:
        incidents = scan_text(v0_embedded(in_context("something")), library, matcher)
        _wrapper_alone.append({incident["signature"] for incident in incidents})
    return _wrapper_alone[0]


def not_applicable(signature: Signature, mutation: Mutation, library: Library,
                   matcher: Matcher) -> str | None:
    """Why a mutation cannot apply to any example of this signature, if it cannot."""
    if is_generic(signature):
        if mutation.name == "header-stripped" and signature.id == "generic.error_line":
            return "the fallback for ERROR lines is defined by the header's level"
        if mutation.name == "header-stripped" and signature.id == "generic.traceback_cut":
            return ("printed raw, the line after the last frame (here an INFO line without "
                    "its header) may be the exception: only lines logged at ERROR say where "
                    "the traceback ends")
        if mutation.name == "v0-embedded":
            return ("the fallback captures the line it stands for; embedded, the V0 wrapper "
                    "line is the one it reports")
    if mutation.name == "v0-embedded":
        if signature.severity == "info":
            return "an informational line is logged, never raised: no worker embeds it"
        if signature.id in wrapper_signatures(library, matcher):
            return "the V0 embedding's own words are this signature's message"
    return None


@pytest.mark.parametrize(("signature_id", "mutation"), CASES)
def test_examples_survive_mutation(signature_id: str, mutation: Mutation, library: Library,
                                   matcher: Matcher) -> None:
    signature = library.get(signature_id)
    assert signature is not None
    reason = not_applicable(signature, mutation, library, matcher)
    if reason:
        pytest.skip(reason)
    failures: list[str] = []
    skipped: list[str] = []
    for index, example in enumerate(signature.examples):
        expected = baseline(library, matcher, signature_id, index)
        assert expected, f"example {index + 1} between healthy lines does not match at all"
        try:
            text = mutation.apply(in_context(example.text))
        except NotApplicable as why:
            skipped.append(f"example {index + 1}: {why}")
            continue
        want = [{name: mutation.capture(value) for name, value in found.items()}
                for found in expected]
        paths = [("scan", key_captures(library, signature_id,
                                       scan_text(text, library, matcher)))]
        if mutation.live and signature_id not in NEEDS_WHOLE_RECORD:
            # a live source's record may go on, or have begun before what was read: the
            # daemon never calls a traceback cut
            paths.append(("daemon", live_key_captures(signature, text, matcher)))
        for path, got in paths:
            missing = [found for found in want if found not in got]
            if missing:
                failures.append(f"example {index + 1} ({path}): expected {missing}, got "
                                f"{got or 'no finding'}\n--- mutated log ---\n{text}")
    assert not failures, f"{signature_id} after {mutation.name}:\n" + "\n\n".join(failures)
    if skipped and len(skipped) == len(signature.examples):
        reasons = {why.split(": ", 1)[1] for why in skipped}
        pytest.skip(f"every example: {reasons.pop()}" if len(reasons) == 1
                    else "; ".join(skipped))
