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
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tools.real_vllm.cases import BASE_ARGS, CASES, Case

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "real-vllm.md"
TABLE_BEGIN, TABLE_END = "<!-- real-vllm table -->", "<!-- end real-vllm table -->"
READY_SECONDS = 240  # readiness on 2 cores is about 30 s with --enforce-eager
END_SECONDS = 240  # a failure ends on its own in 10-40 s


@dataclass
class Outcome:
    case: Case
    said: str  # what logwatch recorded: outcome, root cause, signature
    matched: bool
    seconds: float
    exit_code: int | None
    note: str = ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ask(url: str, body: dict[str, object] | None = None, timeout: float = 5) -> int:
    """The HTTP status of a GET (or a POST of `body`); 0 when nothing answers."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data,
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except OSError:
        return 0


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
    return Outcome(case, said, matched, time.monotonic() - started, code, note.strip())


def serve_then_stop(proc: subprocess.Popen[bytes], port: int, case: Case) -> str:
    """Wait for readiness, send one completion, then Ctrl-C: SIGINT to the run, which
    forwards it to vLLM's process group. Returns what happened, in words."""
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline and proc.poll() is None:
        if ask(f"{base}/health", timeout=1) == 200:
            break
        time.sleep(0.5)
    else:
        return "never became ready"
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
    import duckdb

    if not db.exists():
        return "no history written", False
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT l.outcome, i.category, l.root_signature FROM launches l "
            "LEFT JOIN incidents i ON i.id = l.root_cause ORDER BY l.number").fetchall()
    finally:
        con.close()
    if not rows:
        return "no launch recorded", False
    outcome, cause, signature = rows[-1]
    said = outcome if outcome != "failed" else f"failed: {cause} ({signature})"
    if len(rows) > 1:
        said += f" [{len(rows)} launches]"
    ok = outcome == case.outcome and (case.outcome != "failed" or cause in case.causes)
    return said, ok and len(rows) == 1


def release(venv: Path) -> str:
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import importlib.metadata as m; print(m.version('vllm'))"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or "?"


def write_table(outcomes: list[Outcome], rel: str) -> None:
    rows = ["| release | case | what logwatch said | expected | match |",
            "| --- | --- | --- | --- | --- |"]
    for o in outcomes:
        expected = (o.case.outcome if o.case.outcome != "failed"
                    else "failed: " + " or ".join(o.case.causes))
        rows.append(f"| {rel} | {o.case.name} | {o.said} | {expected} | "
                    f"{'yes' if o.matched else '**no**'} |")
    text = DOC.read_text() if DOC.exists() else f"{TABLE_BEGIN}\n{TABLE_END}\n"
    table = "\n".join(rows)
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
    outcomes = []
    for case in cases:
        o = run_case(case, args.venv, args.models, args.work)
        outcomes.append(o)
        print(f"{case.name:<20} {'ok ' if o.matched else 'NO '} {o.seconds:5.0f}s "
              f"exit {o.exit_code}  {o.said}  {o.note}", flush=True)
    if not args.no_table:
        write_table(outcomes, rel)
    bad = [o.case.name for o in outcomes if not o.matched]
    print(f"real vLLM {rel}: {len(outcomes) - len(bad)} of {len(outcomes)} cases as expected"
          + (f"; not: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
