"""`logwatch signatures list|show|test|lint|draft`: look at, check and grow the library."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from logwatch.cli.options import load_library
from logwatch.core.problems import Problem
from logwatch.core.safe_text.visible import visible
from logwatch.core.signatures.library import Library, LibraryError


def _say(text: str, file: TextIO | None = None) -> None:
    """print(), with the control characters of signature files (text, examples, file names)
    shown rather than obeyed by the terminal."""
    print(visible(text, lines=True), file=file)


def list_signatures(library: Library) -> int:
    _say(f"signature library {library.version}: {len(library.signatures)} signatures")
    width = max(len(s.id) for s in library.signatures)
    for sig in sorted(library.signatures, key=lambda s: s.id):
        fatal = "fatal" if sig.fatal else "     "
        _say(f"{sig.id:<{width}}  v{sig.version:<2} {sig.status:<12} {sig.severity:<8} "
             f"{fatal} {sig.category:<24} {sig.title}")
    return 0


def show(library: Library, signature_id: str) -> int:
    sig = library.get(signature_id)
    if sig is None:
        from logwatch.core.problems import did_you_mean

        hint = did_you_mean(signature_id, [s.id for s in library.signatures])
        _say(f"logwatch: no signature {signature_id!r}" + (f"; {hint}" if hint else ""),
             file=sys.stderr)
        return 2
    _say(f"{sig.id} v{sig.version} ({sig.status}) — {sig.title}")
    _say(f"  file:      {sig.path}")
    _say(f"  severity:  {sig.severity}{' (fatal)' if sig.fatal else ''}")
    _say(f"  category:  {sig.category}    remedy: {sig.remedy}")
    if sig.vllm_versions:
        _say(f"  vLLM:      {sig.vllm_versions}")
    if sig.repeats != "every_line":
        _say(f"  repeats:   {sig.repeats} (a run of alike lines is reported on its first)")
    for number, pattern in enumerate(sig.patterns, 1):
        _say(f"  pattern {number}: {pattern.regex}")
        _say(f"    literals: {', '.join(repr(x) for x in pattern.literals)}")
    for cond in sig.conditions:
        _say(f"  condition: {cond.capture} {cond.op} {cond.value:g}")
    _say("  explanation:")
    for line in sig.explanation.splitlines():
        _say(f"    {line}")
    _say(f"  examples: {len(sig.examples)}, counter-examples: {len(sig.counter_examples)}")
    for ref in sig.references:
        _say(f"  see: {ref}")
    return 0


def test(extra: Sequence[Path], base: Path | None) -> int:
    """Load without the built-in check, then run every example and report each result (in a
    child process with a deadline: a pattern that never finishes is named, not waited for)."""
    from logwatch.library.worker import run_examples_bounded

    results = run_examples_bounded(extra, base=base)
    failures = 0
    for signature_id, total, problems in results:
        status = "ok" if not problems else "FAIL"
        _say(f"{status:4} {signature_id} ({total} examples)")
        for problem in problems:
            _say(f"     {problem}")
        failures += bool(problems)
    _say(f"{len(results) - failures} passed, {failures} failed")
    return 1 if failures else 0


# Healthy vLLM output the literals are measured on when no --traffic is given: the samples
# of a checkout (an installed package has none, and says so).
CHECKOUT_TRAFFIC = Path(__file__).resolve().parents[2] / "samples" / "logs"
MAX_TRAFFIC_BYTES = 64 << 20


def lint(extra: Sequence[Path], base: Path | None, traffic: Sequence[Path] = ()) -> int:
    """Load, check and lint the library in a child process with a deadline; its literals
    measured on healthy vLLM output (`traffic`, else a checkout's healthy samples)."""
    from logwatch.library.worker import lint_bounded

    files = list(traffic) or sorted(CHECKOUT_TRAFFIC.glob("healthy_*.log"))
    data = b""
    for path in files:
        try:
            with open(path, "rb") as stream:
                data += stream.read(MAX_TRAFFIC_BYTES - len(data))
        except OSError as error:
            raise LibraryError([Problem(str(path), None, f"cannot read traffic: "
                                        f"{error.strerror or error}", "give a readable file "
                                        "of healthy vLLM output")]) from error
        if data and not data.endswith(b"\n"):
            data += b"\n"
    count, issues = lint_bounded(extra, base=base, traffic=data)
    for issue in issues:
        _say(str(issue))
    if data:
        _say(f"literals measured on {len(data) / 1e6:.1f} MB of healthy traffic "
             f"({', '.join(p.name for p in files)})")
    else:
        _say("literals not measured on traffic: give --traffic FILE (healthy vLLM output)")
    _say(f"{count} signatures linted, {len(issues)} issue(s)")
    return 1 if issues else 0


def _groups_from_log(library: Library, log: str) -> list[Any]:
    from logwatch.scan.offline import resolve_inputs, scan_inputs

    report = scan_inputs(resolve_inputs([log]), library)
    from logwatch.core.signatures.templates import TemplateGroup

    return [TemplateGroup(**g) for g in report["unrecognised"]]


def _groups_from_db(db: Path) -> list[Any]:
    """The unrecognised findings the history recorded (their lines, secrets masked); a
    missing history is an error, not a new empty file."""
    from datetime import datetime

    from logwatch.cli.history import query_history
    from logwatch.core.lines.vllm_format import parse_line
    from logwatch.core.signatures.templates import TemplateGroups

    groups = TemplateGroups()
    # read-only: through the daemon when it holds the file, else the file (never made)
    # the fallback's findings, placed ones too (core.signatures.placed)
    rows = query_history(db, "SELECT text, source_id, line, signature FROM findings WHERE "
                             "starts_with(signature, 'generic.') OR regexp_matches(signature, "
                             "'[.](known|unrecognised)_error(_line)?$') ORDER BY time, "
                             "source_id, line", None).rows
    for text, source, line, signature in rows:
        parsed = parse_line(str(source), int(line), str(text), datetime.now())
        groups.add_line(parsed.message, str(text), str(signature), str(source), int(line),
                        not str(signature).endswith("error_line"))
    return groups.ordered()


def draft(library: Library, log: str | None, db: Path | None, number: int,
          out: Path | None) -> int:
    """Print (or write to `out`) a signature drafted from group `number` of the
    unrecognised errors in `log` or in the history `db`."""
    from logwatch.core.signatures.draft import draft_signature, pattern_template, signature_id
    from logwatch.scan.offline import InputError

    if (log is None) == (db is None):
        _say("logwatch: signatures draft: give a LOG file or --db FILE (one of them)",
             file=sys.stderr)
        return 2
    try:
        groups = (_groups_from_log(library, log) if log is not None
                  else _groups_from_db(db) if db is not None else [])
    except InputError as exc:
        _say(f"logwatch: {exc}", file=sys.stderr)
        return 2
    if not groups:
        _say("logwatch: signatures draft: no unrecognised errors to draft from (every error "
             "there is known to a signature, or there is none)", file=sys.stderr)
        return 1
    if not 1 <= number <= len(groups):
        _say(f"logwatch: signatures draft: --group {number}: there are {len(groups)} "
             "group(s), numbered from 1", file=sys.stderr)
        return 2
    group = groups[number - 1]
    try:
        text = draft_signature(group)
    except ValueError as exc:
        _say(f"logwatch: signatures draft: {exc}", file=sys.stderr)
        return 1
    if out is None:
        sys.stdout.write(text)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{signature_id(pattern_template(group))}.toml"
    try:  # a draft already there may be one the operator has been editing: never replaced
        with open(path, "x", encoding="utf-8") as file:
            file.write(text)
    except FileExistsError:
        _say(f"logwatch: signatures draft: {path} exists and is kept; move it, or draft to "
             "another --out directory", file=sys.stderr)
        return 1
    _say(f"wrote {path}: review it, then `logwatch signatures --signatures {out} test`",
         file=sys.stderr)
    return 0


def signatures_command(args: argparse.Namespace) -> int:
    if args.action == "test":
        return test(args.signatures, args.library)
    if args.action == "lint":
        return lint(args.signatures, args.library, args.traffic)
    if args.action == "draft":
        return draft(load_library(args), args.log, args.db, args.group, args.out)
    library = load_library(args)
    if args.action == "list":
        return list_signatures(library)
    return show(library, args.id)


__all__ = ["LibraryError", "draft", "lint", "list_signatures", "show", "signatures_command",
           "test"]
