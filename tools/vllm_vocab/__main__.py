"""`python -m tools.vllm_vocab`: extract vLLM's vocabulary, check the curated set against the
sources, and measure logwatch's coverage of it."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from tools.vllm_vocab import curated as curated_set
from tools.vllm_vocab.readme import replaced
from tools.vllm_vocab.sources import default_root, release_key, releases

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.md"


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
    words = vocabulary(root, _releases(root, args.releases),
                       progress=lambda r: print(f"reading {r}", file=sys.stderr))
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


def cmd_verify(args: argparse.Namespace) -> int:
    from tools.vllm_vocab.verify import verify

    root = Path(args.sources)
    wanted = set(curated_set.matrix(Path(args.curated)))
    available = [r for r in releases(root) if not wanted or r in wanted]
    problems = verify(curated_set.load(Path(args.curated)), root, available)
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


def cmd_coverage(args: argparse.Namespace) -> int:
    from logwatch.core.library import LibraryError
    from tools.vllm_vocab.coverage import load_signatures, markdown, measure, misses

    entries = curated_set.load(Path(args.curated))
    try:
        library = load_signatures([Path(d) for d in args.signatures])
    except LibraryError as exc:
        raise SystemExit(f"cannot load {' + '.join(args.signatures) or 'the signatures'}: "
                         f"{exc}\n(a branch whose signatures need its own code: run this "
                         "command from that worktree with PYTHONPATH pointing at this one)"
                         ) from None
    outcomes = measure(entries, library)
    body = markdown(outcomes)
    print(body)
    if args.write_readme:
        README.write_text(replaced(README.read_text(encoding="utf-8"), body), encoding="utf-8")
        print(f"wrote the coverage section of {README.name}", file=sys.stderr)
    if args.misses:
        text = "# Curated vLLM messages not recognised specifically\n\n" + misses(
            outcomes, detail=True)
        Path(args.misses).write_text(text, encoding="utf-8")
        print(f"wrote {args.misses}", file=sys.stderr)
    elif args.list_misses:
        print("\n" + misses(outcomes))
    return 0


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
    extract.add_argument("--toml", action="store_true",
                         help="as curated.toml entries, to review and paste")
    extract.set_defaults(run=cmd_extract)
    verify = sub.add_parser("verify", help="check the curated set against the sources")
    verify.add_argument("--sources", default=str(default_root()))
    verify.add_argument("--curated", default=str(curated_set.CURATED))
    verify.set_defaults(run=cmd_verify)
    coverage = sub.add_parser("coverage", help="measure logwatch on the curated set")
    coverage.add_argument("--signatures", action="append", default=[], metavar="DIR",
                          help="signature directory (repeatable: later ones layered on top; "
                               "default: the repository's)")
    coverage.add_argument("--curated", default=str(curated_set.CURATED))
    coverage.add_argument("--write-readme", action="store_true",
                          help="replace the README's coverage section")
    coverage.add_argument("--misses", metavar="FILE",
                          help="write the misses, with templates, releases and files")
    coverage.add_argument("--list-misses", action="store_true",
                          help="print the misses per area")
    coverage.set_defaults(run=cmd_coverage)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
