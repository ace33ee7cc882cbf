"""The real-vLLM tier: each case of cases.py started as `logwatch run -- vllm serve ...` with a
real vLLM (installed by install.sh, models built by models.py), and what logwatch recorded in
its history compared with what the case expects. Ends with a table in docs/real-vllm.md.

    .venv/bin/python -m tools.real_vllm.tier [--only NAME ...] [--keep DIR]

Needs no GPU and no network: `make real-vllm` installs what it needs first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from tools.real_vllm.cases import BASE_ARGS, CASES, Case
from tools.real_vllm.common import (
    RELEASE,
    ROOT,
    Outcome,
    ask,
    expected_of,
    free_port,
    history_rows,
    wait_healthy,
)
from tools.real_vllm.loops import daemon_loop, relaunch_loop, systemd_loop

DOC = ROOT / "docs" / "real-vllm.md"
LOOPS = ("relaunch", "daemon-file", "systemd-user")  # the steps beyond one run per case
TABLE_BEGIN, TABLE_END = "<!-- real-vllm table -->", "<!-- end real-vllm table -->"
READY_SECONDS = 240  # readiness on 2 cores is about 30 s with --enforce-eager
END_SECONDS = 240  # a failure ends on its own in 10-40 s


def vllm_argv(venv: Path, case: Case, models: Path, port: int) -> list[str]:
    return [str(venv / "bin" / "vllm"), "serve", str(models / case.model), *BASE_ARGS,
            "--port", str(port), *case.args]


def run_case(case: Case, venv: Path, models: Path, work: Path) -> Outcome:
    """One case under `logwatch run`; its output kept in work/NAME.log."""
    port = free_port()
    db = work / f"{case.name}.duckdb"
    db.unlink(missing_ok=True)
    argv = [str(ROOT / ".venv" / "bin" / "logwatch"), "--no-pager", "run", "--db", str(db),
            "--target", case.name, "--stop-seconds", "30", "--",
            *vllm_argv(venv, case, models, port)]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "NO_COLOR": "1", **case.env}
    started = time.monotonic()
    with open(work / f"{case.name}.log", "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        note = ""
        if case.serve:
            note = serve_then_stop(proc, port, case)
        try:
            code: int | None = proc.wait(timeout=END_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
            note += " (did not end by itself: killed)"
    said, matched = judge(case, db)
    # the run's status: 0 for a launch that stopped as asked, non-zero for one that failed
    # (vLLM itself exits 0 after its engine died while serving; the run does not)
    said += f"; run exit {code}"
    matched = matched and (code == 0) == (case.outcome == "stopped")
    wrong = snapshot_mismatch(db, argv[argv.index("--") + 1:], case)
    if wrong:
        said, matched = f"{said}; snapshot: {wrong}", False
    return Outcome(case.name, said, expected_of(case), matched, time.monotonic() - started,
                   code, note.strip())


def serve_then_stop(proc: subprocess.Popen[bytes], port: int, case: Case) -> str:
    """Wait for readiness, send one completion, then Ctrl-C: SIGINT to the run, which
    forwards it to vLLM's process group. Returns what happened, in words."""
    if not wait_healthy(port, lambda: proc.poll() is None, READY_SECONDS):
        return "never became ready"
    base = f"http://127.0.0.1:{port}"
    if not case.request:
        proc.send_signal(signal.SIGINT)
        return "ready; stopped with SIGINT"
    status = ask(f"{base}/v1/completions", {"prompt": "hello world", "max_tokens": 4},
                 timeout=60)
    if case.request_crashes:  # the engine is dead; the server shuts itself down
        try:
            proc.wait(timeout=30)
            return f"request answered {status}; the server stopped by itself"
        except subprocess.TimeoutExpired:
            pass
    proc.send_signal(signal.SIGINT)
    return f"request answered {status}; stopped with SIGINT"


def judge(case: Case, db: Path) -> tuple[str, bool]:
    """What the history says about the case's launch, and whether that is what it expects."""
    if not db.exists():
        return "no history written", False
    rows = history_rows(db, "SELECT l.outcome, i.category, l.root_signature FROM launches l "
                            "LEFT JOIN incidents i ON i.id = l.root_cause ORDER BY l.number")
    if not rows:
        return "no launch recorded", False
    outcome, cause, signature = rows[-1]
    said = outcome if outcome != "failed" else f"failed: {cause} ({signature})"
    if len(rows) > 1:
        said += f" [{len(rows)} launches]"
    ok = outcome == case.outcome and (case.outcome != "failed" or cause in case.causes)
    return said, ok and len(rows) == 1


def snapshot_mismatch(db: Path, argv: list[str], case: Case) -> str:
    """How the configuration snapshot of the case's launch differs from what was started
    ("" when it is what was started: the argv, the model, --max-model-len, the release)."""
    if not db.exists():
        return "no history"
    rows = history_rows(db, "SELECT s.body FROM launches l JOIN snapshots s "
                            "ON s.hash = l.snapshot_hash ORDER BY l.number LIMIT 1")
    if not rows:
        return "no snapshot linked to the launch"
    body = json.loads(rows[0][0])
    wrong = []
    if body.get("argv") != argv:
        wrong.append("argv differs")
    launch = body.get("launch") or {}
    if launch.get("model") != argv[2]:
        wrong.append(f"model {launch.get('model')!r}")
    lengths = [argv[i + 1] for i, word in enumerate(argv[:-1]) if word == "--max-model-len"]
    if lengths and str(launch.get("max_model_len")) != lengths[-1]:
        wrong.append(f"max_model_len {launch.get('max_model_len')!r}, started {lengths[-1]}")
    if not str(body.get("vllm_version") or "").startswith(RELEASE):
        wrong.append(f"vllm_version {body.get('vllm_version')!r}")
    return ", ".join(wrong)


def release(venv: Path) -> str:
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import importlib.metadata as m; print(m.version('vllm'))"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or "?"


def write_table(outcomes: list[Outcome], rel: str) -> None:
    """The table in docs/real-vllm.md: a row per step run now; the rows of steps not run
    this time (`--only`) are kept as they were. Cases first, in the order of cases.py, then
    the loops."""
    text = DOC.read_text() if DOC.exists() else f"{TABLE_BEGIN}\n{TABLE_END}\n"
    old = text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0] if TABLE_BEGIN in text else ""
    rows: dict[str, str] = {}
    for line in old.splitlines():
        cells = line.split(" | ")
        if line.startswith("| ") and len(cells) > 2 and cells[1] not in ("case", "---"):
            rows[cells[1]] = line
    for o in outcomes:
        said = o.said.replace("|", "\\|")
        rows[o.name] = (f"| {rel} | {o.name} | {said} | {o.expected} | "
                        f"{'yes' if o.matched else '**no**'} |")
    order = [c.name for c in CASES] + list(LOOPS)
    ranked = sorted(rows, key=lambda name: order.index(name) if name in order else len(order))
    table = "\n".join(["| release | case | what logwatch said | expected | match |",
                       "| --- | --- | --- | --- | --- |", *(rows[name] for name in ranked)])
    text = re.sub(re.escape(TABLE_BEGIN) + ".*?" + re.escape(TABLE_END),
                  lambda _: f"{TABLE_BEGIN}\n{table}\n{TABLE_END}", text, flags=re.S)
    DOC.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="real-vllm", description=__doc__)
    parser.add_argument("--venv", type=Path, default=ROOT / ".real-vllm" / "venv-0.32.0")
    parser.add_argument("--models", type=Path, default=ROOT / ".real-vllm" / "models")
    parser.add_argument("--work", type=Path, default=ROOT / ".real-vllm" / "runs")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--no-table", action="store_true")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    rel = release(args.venv)
    cases = [c for c in CASES if not args.only or c.name in args.only]
    outcomes: list[Outcome] = []
    runs: list[Callable[[], Outcome]] = [
        partial(run_case, case, args.venv, args.models, args.work) for case in cases]
    if not args.only or LOOPS[0] in args.only:
        runs.append(partial(relaunch_loop, args.venv, args.work))
    if not args.only or LOOPS[1] in args.only:
        runs.append(partial(daemon_loop, args.venv, args.models, args.work))
    if not args.only or LOOPS[2] in args.only:
        runs.append(partial(systemd_loop, args.venv, args.models, args.work))
    for step in runs:
        o = step()
        outcomes.append(o)
        print(f"{o.name:<20} {'ok ' if o.matched else 'NO '} {o.seconds:5.0f}s "
              f"exit {o.exit_code}  {o.said}  {o.note}", flush=True)
    if not args.no_table:
        write_table(outcomes, rel)
    bad = [o.name for o in outcomes if not o.matched]
    print(f"real vLLM {rel}: {len(outcomes) - len(bad)} of {len(outcomes)} cases as expected"
          + (f"; not: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
