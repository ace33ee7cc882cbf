"""`python -m tools.vllm_cli [--sources DIR] [--out FILE] [RELEASE ...]`: extract each release's
`vllm serve` flags and VLLM_* variables from its sdist (`vllm-<release>.tar.gz`, as
tools.fetch_vllm_sdists stores them) and write logwatch's data file: for each name, the
releases of the extracted matrix that know it, as ranges of that matrix.

The releases are those the data file already lists plus those named: a missing sdist is an
error, so regenerating never silently drops a release."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from logwatch.core.quant.ignore_rules import parse_release, release_ranges
from logwatch.host.vllm_cli_data import DATA_FILE
from tools.fetch_vllm_sdists import default_dest
from tools.vllm_cli.extract import PATHS, CliFacts, extract
from tools.vllm_cli.sdist import read_sdist
from tools.vllm_cli.transformers_names import from_wheel


def table(facts: dict[str, CliFacts]) -> dict[str, object]:
    """The data file's content: names -> release ranges over the extracted releases."""
    order = sorted(facts, key=lambda r: parse_release(r) or (0, 0, 0))
    among = [parse_release(r) or (0, 0, 0) for r in order]

    def ranges(kind: str) -> dict[str, list[str]]:
        names = sorted(set().union(*(getattr(facts[r], kind) for r in order)))
        return {name: release_ranges([among[i] for i, r in enumerate(order)
                                      if name in getattr(facts[r], kind)], among)
                for name in names}

    return {"about": "vllm serve flags, VLLM_* environment variables, the architectures of "
                     "the model registry and the speculative methods per vLLM release, "
                     "extracted from vLLM's sources by `python -m tools.vllm_cli`; ranges run "
                     "over `releases` only",
            "releases": order, "flags": ranges("flags"), "env": ranges("env"),
            "architectures": ranges("architectures"),
            "speculative_methods": ranges("speculative_methods")}


def compact_json(data: dict[str, object]) -> str:
    """One line per name: small diffs when a release is added."""
    lines = []
    for key, value in data.items():
        if isinstance(value, dict):
            rows = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items()]
            lines.append(f"{json.dumps(key)}: {{\n" + ",\n".join(rows) + "\n}")
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.vllm_cli", description=__doc__)
    parser.add_argument("releases", nargs="*",
                        help="releases to add to those the data file lists")
    parser.add_argument("--sources", type=Path, default=default_dest(),
                        help="directory of vllm-<release>.tar.gz (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=DATA_FILE, help="default: %(default)s")
    parser.add_argument("--transformers", type=Path, metavar="WHEEL",
                        help="a transformers wheel (pip download --no-deps transformers==X): "
                             "its model classes replace those the data file holds")
    args = parser.parse_args(argv)
    old = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    listed = old.get("releases", [])
    wanted = sorted(set(listed) | set(args.releases),
                    key=lambda r: parse_release(r) or (0, 0, 0))
    facts: dict[str, CliFacts] = {}
    for release in wanted:
        sdist = args.sources / f"vllm-{release}.tar.gz"
        if not sdist.is_file():
            print(f"{sdist}: not found (python -m tools.fetch_vllm_sdists --dest "
                  f"{args.sources} {release})", file=sys.stderr)
            return 2
        facts[release] = extract(read_sdist(sdist, PATHS))
        print(f"{release}: {len(facts[release].flags)} flags, "
              f"{len(facts[release].env)} variables, "
              f"{len(facts[release].architectures)} architectures, "
              f"{len(facts[release].speculative_methods)} speculative methods", file=sys.stderr)
    if not facts:
        print("no releases: name some", file=sys.stderr)
        return 2
    data = table(facts)
    if args.transformers is not None:
        version, classes = from_wheel(args.transformers)
        data["transformers"] = {"version": version, "architectures": sorted(classes)}
    elif "transformers" in old:
        data["transformers"] = old["transformers"]
    args.out.write_text(compact_json(data), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
