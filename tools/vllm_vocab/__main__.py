"""`python -m tools.vllm_vocab`: extract vLLM's vocabulary, check the curated set against the
sources, and measure logwatch's coverage of it."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from tools.vllm_vocab import curated as curated_set
from tools.vllm_vocab.readme import COMMAND, replaced
from tools.vllm_vocab.sources import default_root, release_key, releases

if TYPE_CHECKING:
    from tools.vllm_vocab.coverage import Outcome

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.md"
MISSES = ROOT / "docs" / "vocab-misses.md"
MISSES_TITLE = "# Curated vLLM messages logwatch does not recognise specifically\n\n"


def _releases(root: Path, wanted: str | None) -> list[str]:
    available = releases(root)
    if not available:
        raise SystemExit(f"no unpacked vLLM release trees under {root} "
                         "(set LOGWATCH_VLLM_SOURCES or pass --sources)")
    if not wanted:
        return available
    chosen = [r.strip() for r in wanted.split(",") if r.strip()]
    missing = [r for r in chosen if r not in available]
    if missing:
        raise SystemExit(f"not under {root}: {', '.join(missing)}")
    return sorted(chosen, key=release_key)


def cmd_extract(args: argparse.Namespace) -> int:
    from tools.vllm_vocab.vocabulary import vocabulary

    root = Path(args.sources)
    words = vocabulary(root, _releases(root, args.releases), jobs=args.jobs,
                       progress=lambda r: print(f"read {r}", file=sys.stderr))
    pattern = re.compile(args.grep, re.I) if args.grep else None
    shown = [w for w in words
             if (not args.area or w.area == args.area) and (not args.kind or w.kind == args.kind)
             and (pattern is None or pattern.search(w.template) or pattern.search(w.file))]
    if args.toml:
        from tools.vllm_vocab.stubs import slug, stub

        print("\n".join(stub(word, slug(word)) for word in shown))
        return 0
    for word in shown:
        if args.json:
            print(json.dumps(asdict(word)))
        else:
            span = f"{word.releases[0]}..{word.releases[-1]} ({len(word.releases)})"
            print(f"[{word.area}] {word.kind} {word.label} {word.file}:{word.function} "
                  f"{span}\n    {word.template}")
    print(f"{len(shown)} of {len(words)} wordings", file=sys.stderr)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from tools.vllm_vocab.generated import GENERATED, HALVES, file_index, half_of, to_data, write
    from tools.vllm_vocab.vocabulary import vocabulary

    root = Path(args.sources)
    if not releases(root):  # sdists (`make vllm-sources`): unpacked once, as the tests do
        from tests.vllm_sources import release_trees

        root = release_trees()[0]
    names = _releases(root, args.releases)
    words = vocabulary(root, names, jobs=args.jobs,
                       progress=lambda r: print(f"read {r}", file=sys.stderr))
    entries = to_data(words)
    write(entries, file_index(root, names))
    halves = {h: sum(1 for e in entries if half_of(e["id"]) == h) for h in HALVES}
    print(f"wrote {GENERATED.name}: {len(entries)} failure wordings of {len(words)} "
          f"({', '.join(f'{n} {h}' for h, n in halves.items())})", file=sys.stderr)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from tools.vllm_vocab.verify import verify

    root = Path(args.sources)
    wanted = set(curated_set.matrix(Path(args.curated)))
    available = [r for r in releases(root) if not wanted or r in wanted]
    problems = verify(curated_set.load(Path(args.curated)), root, available, jobs=args.jobs)
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


def cmd_coverage(args: argparse.Namespace) -> int:
    from logwatch.core.signatures.library import LibraryError
    from tools.vllm_vocab.coverage import coverage_body, load_signatures, misses

    entries = curated_set.load(Path(args.curated))
    try:
        library = load_signatures([Path(d) for d in args.signatures])
    except LibraryError as exc:
        raise SystemExit(f"cannot load {' + '.join(args.signatures) or 'the signatures'}: "
                         f"{exc}\n(a branch whose signatures need its own code: run this "
                         "command from that worktree with PYTHONPATH pointing at this one)"
                         ) from None
    body, outcomes = coverage_body(entries, library, generated=not args.no_generated)
    print(body)
    if args.write_readme:
        README.write_text(replaced(README.read_text(encoding="utf-8"), body), encoding="utf-8")
        print(f"wrote the coverage section of {README.name}", file=sys.stderr)
    if args.misses or args.write_readme:
        target = Path(args.misses) if args.misses else MISSES
        target.write_text(misses_page(outcomes), encoding="utf-8")
        print(f"wrote {target}", file=sys.stderr)
    if args.list_misses:
        print("\n" + misses(outcomes))
    return 0


def misses_page(outcomes: Sequence[Outcome]) -> str:
    """docs/vocab-misses.md: every curated message not recognised specifically, by area."""
    from tools.vllm_vocab.coverage import misses

    return (MISSES_TITLE + f"Generated by `{COMMAND}` with the README's coverage table; each "
            "entry: its id in tools/vllm_vocab/curated.toml, what logwatch reported, the vLLM "
            "site and releases, the template and the line as rendered.\n\n"
            + misses(outcomes, detail=True))


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m tools.vllm_vocab", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)
    extract = sub.add_parser("extract", help="every message template with its releases")
    extract.add_argument("--sources", default=str(default_root()),
                         help="directory of unpacked release trees named <version>")
    extract.add_argument("--releases", help="comma-separated releases (default: all found)")
    extract.add_argument("--area", help="only this area")
    extract.add_argument("--kind", choices=curated_set.KINDS, help="only this kind")
    extract.add_argument("--grep", help="only templates or files matching this regex")
    extract.add_argument("--json", action="store_true", help="one JSON object per line")
    extract.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                         help="processes reading releases not cached yet (default: CPUs)")
    extract.add_argument("--toml", action="store_true",
                         help="as curated.toml entries, to review and paste")
    extract.set_defaults(run=cmd_extract)
    generate = sub.add_parser("generate", help="write the generated vocabulary (every failure "
                              "message of the domain areas, every release) as data")
    generate.add_argument("--sources", default=str(default_root()),
                          help="directory of unpacked release trees")
    generate.add_argument("--releases", help="comma-separated releases (default: all found)")
    generate.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                          help="processes reading releases not cached yet")
    generate.set_defaults(run=cmd_generate)

    verify = sub.add_parser("verify", help="check the curated set against the sources")
    verify.add_argument("--sources", default=str(default_root()))
    verify.add_argument("--curated", default=str(curated_set.CURATED))
    verify.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="processes reading releases not cached yet (default: CPUs)")
    verify.set_defaults(run=cmd_verify)
    coverage = sub.add_parser("coverage", help="measure logwatch on the curated set")
    coverage.add_argument("--signatures", action="append", default=[], metavar="DIR",
                          help="signature directory (repeatable: later ones layered on top; "
                               "default: the repository's)")
    coverage.add_argument("--curated", default=str(curated_set.CURATED))
    coverage.add_argument("--no-generated", action="store_true",
                          help="the curated set only, not the generated vocabulary's halves")
    coverage.add_argument("--write-readme", action="store_true",
                          help="replace the README's coverage section and "
                               "docs/vocab-misses.md")
    coverage.add_argument("--misses", metavar="FILE",
                          help="write the misses (templates, releases, files) here instead "
                               "of docs/vocab-misses.md")
    coverage.add_argument("--list-misses", action="store_true",
                          help="print the misses per area")
    coverage.set_defaults(run=cmd_coverage)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except curated_set.CuratedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
