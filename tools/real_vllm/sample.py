"""Turn what a real-vLLM case printed into a small sample log for samples/logs/.

    .venv/bin/python -m tools.real_vllm.sample .real-vllm/runs/NAME.log > samples/logs/X.log

Keeps vLLM's own lines exactly as it wrote them (process prefixes, `\\r\\n` inside one log call,
tracebacks) and drops what would make the sample large or tied to this machine: logwatch's
own lines (the run's passthrough interleaves them), the API server's list of routes, the
`nanobind: leaked ...` dump at exit, and absolute paths, which become /models/NAME and
/opt/vllm/... as on a host.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

_LOGWATCH = re.compile(
    r"^(?:logwatch run: |logwatch: |\d{4}-\d\d-\d\dT[\d:.]+Z \[)")
_ROUTE = re.compile(r"\[launcher\.py:\d+\] Route: ")
_NANOBIND = re.compile(r"^(?:nanobind: |See https://nanobind| - (?:leaked|\.\.\. skipped))")


def _paths(line: str, root: str) -> str:
    line = re.sub(re.escape(root) + r"/\.real-vllm/venv-[^/]+/lib/", "/opt/vllm/lib/", line)
    line = re.sub(re.escape(root) + r"/\.real-vllm/venv-[^/]+/bin/", "/opt/vllm/bin/", line)
    line = re.sub(re.escape(root) + r"/\.real-vllm/models/", "/models/", line)
    line = re.sub(r"\.real-vllm/models/", "/models/", line)
    return line.replace("/root/.pyenv/versions/3.11.7/lib/", "/usr/lib/")


def clean(lines: Iterable[str], root: str) -> Iterator[str]:
    """vLLM's lines of a case log, made portable; each line keeps its own ending."""
    in_report = False
    for line in lines:
        body = line.rstrip("\r\n")
        if body.startswith("logwatch run: ") and "lines in" in body:
            in_report = True  # the run's closing triage report, to the end
        if in_report:
            continue
        if _LOGWATCH.match(body):  # logwatch's own lines, among vLLM's
            continue
        if _ROUTE.search(body) or _NANOBIND.match(body):
            continue
        yield _paths(line, root)


def main(argv: list[str]) -> int:
    root = str(Path(__file__).resolve().parents[2])
    with open(argv[0], encoding="utf-8", errors="replace", newline="") as src:
        sys.stdout.write("".join(clean(src, root)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
