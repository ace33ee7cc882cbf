"""Fetch vLLM's source distributions from PyPI into the tests' cache, checked by their sha256.

The oracle and vocabulary tests read vLLM's own sources (docs/vllm-messages.md#source-checks,
docs/ignore-rules.md); they skip with a reason when a release is absent. `pip download` cannot
fetch a vLLM sdist (preparing its metadata needs torch), so this reads PyPI's simple JSON index
(PEP 691) directly. Offline, it says so and exits 0: the tests then skip.

    python -m tools.fetch_vllm_sdists [--dest DIR] 0.25.1 0.26.0 ...
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import urllib.request
from pathlib import Path

INDEX = "https://pypi.org/simple/vllm/"
TIMEOUT_S = 60


def default_dest() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("LOGWATCH_VLLM_SOURCES")
                or cache / "logwatch-tests" / "vllm-sdist")


def index_files() -> dict[str, dict[str, str]]:
    """File name -> {url, sha256} for every vLLM file on PyPI."""
    request = urllib.request.Request(
        INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
        files = json.load(answer)["files"]
    return {f["filename"]: {"url": f["url"], "sha256": f.get("hashes", {}).get("sha256", "")}
            for f in files}


def fetch(release: str, files: dict[str, dict[str, str]], dest: Path) -> str:
    """Download one release's sdist unless it is there; what happened, in a few words."""
    name = f"vllm-{release}.tar.gz"
    target = dest / name
    if target.is_file() or (dest / release).is_dir():
        return "cached"
    entry = files.get(name)
    if entry is None:
        return "no sdist on PyPI"
    partial = target.with_name(name + ".partial")
    digest = hashlib.sha256()
    with urllib.request.urlopen(entry["url"], timeout=TIMEOUT_S) as answer, \
            open(partial, "wb") as out:
        while chunk := answer.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if entry["sha256"] and digest.hexdigest() != entry["sha256"]:
        partial.unlink()
        return "sha256 mismatch: discarded"
    partial.rename(target)
    return f"fetched ({target.stat().st_size >> 20} MiB)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.fetch_vllm_sdists",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("releases", nargs="+", help="vLLM releases, e.g. 0.25.1")
    parser.add_argument("--dest", type=Path, default=None,
                        help="where the sdists go (default: the tests' cache)")
    args = parser.parse_args(argv)
    dest = args.dest or default_dest()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        files = index_files()
    except OSError as exc:
        print(f"vLLM sources: PyPI not reachable ({exc}); the tests that need them will skip")
        return 0
    for release in args.releases:
        try:
            print(f"vLLM {release}: {fetch(release, files, dest)}")
        except OSError as exc:
            print(f"vLLM {release}: not fetched ({exc})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
