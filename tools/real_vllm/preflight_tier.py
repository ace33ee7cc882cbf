"""The real-vLLM tier's pre-flight table: `logwatch preflight` on every case of cases.py,
before any vLLM starts, against what the real vLLM did (docs/real-vllm.md). A failure the
configuration decides must be predicted with the right reason: the first `FAIL` of the
prediction is the case's `preflight` kind. A launch that starts (or fails for a reason its
configuration does not decide) must not be refused: no `FAIL` at all.

    .venv/bin/python -m tools.real_vllm.preflight_tier [--models DIR] [--release 0.32.0+cpu]

Needs the case models (`make real-vllm` builds them with the real vLLM's interpreter), not a
running vLLM: it takes a few seconds. Writes its table into docs/real-vllm.md and README.md
between their markers.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.real_vllm.cases import BASE_ARGS, CASES, Case
from tools.real_vllm.common import LOGWATCH, RELEASE, ROOT

DOCS = (ROOT / "docs" / "real-vllm.md", ROOT / "README.md")
BEGIN, END = "<!-- preflight table -->", "<!-- end preflight table -->"
PORT = "8000"  # in the command line only: nothing is started


@dataclass(frozen=True)
class Predicted:
    case: Case
    first: str  # the first FAIL's kind ("" when none)
    fails: tuple[str, ...]
    maybes: tuple[str, ...]

    @property
    def determined(self) -> bool:
        """A failure the configuration decides (what preflight is measured on)."""
        return bool(self.case.preflight)

    @property
    def right(self) -> bool:
        return self.first == self.case.preflight if self.determined else not self.fails

    def said(self) -> str:
        fails = ", ".join(self.fails) or "a clean start"
        return fails + (f" (MAYBE: {', '.join(self.maybes)})" if self.maybes else "")


def cmdline(case: Case, models: Path) -> str:
    argv = ["vllm", "serve", str(models / case.model), *BASE_ARGS, "--port", PORT, *case.args]
    env = [f"{k}={shlex.quote(v)}" for k, v in sorted(case.env.items())]
    return " ".join([*env, shlex.join(argv)])


def predict(case: Case, models: Path, release: str) -> Predicted:
    done = subprocess.run(
        [str(LOGWATCH), "preflight", "--model-dir", str(models / case.model), "--cmdline",
         cmdline(case, models), "--vllm-version", release, "--json"],
        capture_output=True, text=True, check=False, timeout=120)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{case.name}: preflight exited {done.returncode}: {done.stderr}")
    body = json.loads(done.stdout)
    fails = tuple(p["kind"] for p in body["problems"])
    return Predicted(case, fails[0] if fails else "", fails,
                     tuple(p["kind"] for p in body["uncertain"]))


def table(results: list[Predicted], release: str) -> str:
    determined = [r for r in results if r.determined]
    starts = [r for r in results if r.case.outcome == "stopped"]
    other = [r for r in results if not r.determined and r.case.outcome == "failed"]
    rows = ["| case | what vLLM did | preflight said | expected | right |",
            "| --- | --- | --- | --- | --- |"]
    for r in results:
        did = "started" if r.case.outcome == "stopped" else "failed: " + "/".join(r.case.causes)
        want = r.case.preflight or "nothing refused"
        rows.append(f"| {r.case.name} | {did} | {r.said()} | {want} | "
                    f"{'yes' if r.right else '**no**'} |")
    summary = (f"vLLM {release}: {sum(r.right for r in determined)} of {len(determined)} "
               "failures its configuration decides predicted with the right reason; "
               f"{sum(bool(r.fails) for r in starts)} of {len(starts)} launches that start "
               f"refused; {sum(bool(r.fails) for r in other)} of {len(other)} failure(s) the "
               "configuration does not decide refused.")
    return "\n".join([summary, "", *rows])


def write(text: str, docs: tuple[Path, ...] = DOCS) -> None:
    for doc in docs:
        content = doc.read_text(encoding="utf-8")
        if BEGIN not in content:
            raise SystemExit(f"{doc}: no {BEGIN} marker")
        doc.write_text(re.sub(re.escape(BEGIN) + ".*?" + re.escape(END),
                              lambda _: f"{BEGIN}\n{text}\n{END}", content, flags=re.S),
                       encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="preflight-tier", description=__doc__)
    parser.add_argument("--models", type=Path, default=ROOT / ".real-vllm" / "models")
    parser.add_argument("--release", default=f"{RELEASE}+cpu",
                        help="the vLLM the cases ran on (default: %(default)s, the tier's)")
    parser.add_argument("--no-table", action="store_true")
    args = parser.parse_args(argv)
    if not args.models.is_dir():
        print(f"{args.models}: no case models (make real-vllm builds them)", file=sys.stderr)
        return 2
    results = [predict(case, args.models, args.release) for case in CASES]
    for r in results:
        print(f"{r.case.name:<22} {'ok ' if r.right else 'NO '} {r.said()}")
    text = table(results, args.release)
    print(text.splitlines()[0])
    if not args.no_table:
        write(text)
    return 0 if all(r.right for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
