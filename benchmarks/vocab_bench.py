"""Measure tools/vllm_vocab: reading one vLLM release cold, the matrix from the cache, and the
coverage run over the curated set.

    LOGWATCH_VLLM_SOURCES=<dir of release trees> python benchmarks/vocab_bench.py [--cold 0.33.0]

The cold read uses a fresh cache directory (ast over vllm/**.py, the TORCH_CHECK tokenizer over
csrc/**); the warm read merges every release of curated.toml's matrix from the user's cache
(filled by the first `python -m tools.vllm_vocab extract`); the coverage run renders and scans
each curated message in this process, as `make vocab` does. Prints seconds and counts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.vllm_vocab import curated  # noqa: E402
from tools.vllm_vocab.coverage import load_signatures, measure  # noqa: E402
from tools.vllm_vocab.sources import default_root, releases  # noqa: E402
from tools.vllm_vocab.vocabulary import release_messages, vocabulary  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", default=str(default_root()))
    parser.add_argument("--cold", default="0.33.0", help="the release read without a cache")
    args = parser.parse_args()
    root = Path(args.sources)
    available = releases(root)
    if args.cold in available:
        with tempfile.TemporaryDirectory() as cache:
            started = time.perf_counter()
            found = release_messages(root / args.cold, Path(cache))
            print(f"cold read of {args.cold}: {time.perf_counter() - started:.1f} s, "
                  f"{len(found)} message sites")
    matrix = [r for r in curated.matrix() if r in available]
    if matrix:
        started = time.perf_counter()
        words = vocabulary(root, matrix, jobs=1)
        print(f"matrix of {len(matrix)} releases (cached after the first run): "
              f"{time.perf_counter() - started:.1f} s, {len(words)} wordings")
    else:
        print(f"no release trees under {root}: extraction not measured")
    entries = curated.load()
    library = load_signatures([])
    started = time.perf_counter()
    measure(entries, library)
    elapsed = time.perf_counter() - started
    print(f"coverage of {len(entries)} curated messages: {elapsed:.1f} s "
          f"({1000 * elapsed / len(entries):.0f} ms a message)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
