"""`logwatch snapshot show|diff`: the configuration in force, as text or JSON."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from logwatch.cli.options import snapshot_options
from logwatch.core.diagnosis.latent import latent_problems
from logwatch.core.diagnosis.mtp_coverage import (
    snapshot_release,
    suggest_mtp_entries,
    uncovered_mtp_modules,
)
from logwatch.core.quant.ignore_rules import parse_release, release_ranges
from logwatch.core.safe_text.visible import visible
from logwatch.core.snapshot.model import Snapshot, diff_dicts
from logwatch.host.capture import take_snapshot
from logwatch.scan.triage import SnapshotOptions, gpu_for


def capture(options: SnapshotOptions) -> Snapshot:
    return take_snapshot(argv=options.cmdline, pid=options.pid, unit=options.unit,
                         user_unit=options.user_unit, model_dir=options.model_dir,
                         gpu=gpu_for(options))


def show(options: SnapshotOptions, as_json: bool = False) -> int:
    if not (options.cmdline or options.model_dir or options.pid or options.unit):
        print("logwatch: give --cmdline, --model-dir, --pid or --unit", file=sys.stderr)
        return 2
    snapshot = capture(options)
    if as_json:
        json.dump({"hash": snapshot.content_hash(), **snapshot.to_dict(),
                   "latent_problems": [d.to_dict() for d in latent_problems(snapshot)]},
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_snapshot(snapshot))
    return 0


def render_snapshot(snapshot: Snapshot) -> str:
    d = snapshot.to_dict()
    out = [f"snapshot {snapshot.content_hash()}"]
    if d["argv"]:
        out.append("  argv:    " + " ".join(d["argv"]))
    launch = {k: v for k, v in d["launch"].items() if v not in (None, 1) or k == "model"}
    for key, value in launch.items():
        out.append(f"  {key}: {value}")
    gpu = d["gpu"]
    out.append(f"  gpu:     {gpu['name'] or '?'} x{gpu['count']}, compute capability "
               f"{gpu['capability'] / 10 if gpu['capability'] else '?'} ({gpu['source']})")
    if d["vllm_version"]:
        out.append(f"  vllm:    {d['vllm_version']}")
    model = d["model"]
    if model:
        q = model["quant"]
        marlin = snapshot.model.quant.marlin_path(gpu["capability"]) if snapshot.model else None
        out.append(f"  model:   {model['path']} ({', '.join(model['architectures']) or '?'})")
        out.append(f"  quant:   {q['method'] or 'none'} {q['scheme']}"
                   f"{' (weight-only)' if q['weight_only'] else ''}; Marlin on this GPU: "
                   f"{ {True: 'yes', False: 'no', None: 'unknown'}[marlin] }")
        out.append(f"  ignore:  {model['effective_ignore']}")
        if model["ignore_replaced"]:
            out.append(f"  REPLACED by --hf-overrides: {model['ignore_replaced']}")
        mtp = model["mtp"]
        if mtp:
            out.extend(_mtp_lines(snapshot, mtp))
    if d["env"]:
        out.append("  env:     " + ", ".join(f"{k}={v}" for k, v in sorted(d["env"].items())))
    for problem in d["problems"]:
        out.append(f"  problem: {problem}")
    out += latent_lines(snapshot)
    # argv, environment and model files are the host's: their control characters are shown
    return "\n".join(visible(line) for line in out) + "\n"


def latent_lines(snapshot: Snapshot, width: int = 100) -> list[str]:
    """What this configuration will run into (core/diagnosis/latent.py), wrapped under `LATENT:`."""
    out = []
    for diag in latent_problems(snapshot):
        texts = [f"{diag.title}: {diag.summary}", *(diag.details[:-1] or diag.details)]
        texts += [f"fix: {r.summary}" for r in diag.remedies if r.applicable is not False]
        for number, text in enumerate(texts):
            lines = textwrap.wrap(text, width - 11, break_on_hyphens=False)
            out += [("  LATENT:  " if number == 0 and n == 0 else "           "
                     + ("" if n == 0 or number == 0 else "  ")) + line
                    for n, line in enumerate(lines)]
    return out


def _mtp_lines(snapshot: Snapshot, mtp: dict[str, Any]) -> list[str]:
    """The MTP draft's coverage under the snapshot's vLLM release, or, unknown, under every
    release that runs the model, saying which releases differ."""
    release = snapshot_release(snapshot)
    layout = snapshot.model.mtp if snapshot.model else None
    covered = layout.covered_at(release) if layout else mtp["covered"]
    span = "-".join(release_ranges(layout.releases[:1] + layout.releases[-1:],
                                   layout.releases)) if layout and layout.releases else "?"
    judged = f"under vLLM {snapshot.vllm_version}" if release else (
        f"vLLM {snapshot.vllm_version} predates this architecture; judged on {span}"
        if parse_release(snapshot.vllm_version) else f"vLLM version unknown; judged on {span}")
    out = [f"  mtp:     {mtp['layout']}, {mtp['modules']} modules "
           f"({mtp['stored']['bf16']} BF16, {mtp['stored']['quantized']} quantized), "
           f"ignore list: {'covered' if covered else 'NOT covered'} ({judged})"]
    if release is None:
        for status, ranges in mtp.get("coverage_by_release", {}).items():
            out.append(f"           {status} on {', '.join(ranges)}")
    errors = set(layout.load_errors_at(release)) if layout else set()
    for name in uncovered_mtp_modules(snapshot):
        out.append(f"           {'load error' if name in errors else 'BF16, not ignored'}: "
                   f"{name}")
    for row in mtp["module_list"]:
        if release is None and "built" in row:
            ways = "; ".join(f"{b} on {', '.join(r)}" for b, r in row["built"].items())
            out.append(f"           {row['module']}: {ways}")
    key = snapshot.model.quant.ignore_key if snapshot.model else None
    suggestion = suggest_mtp_entries(snapshot, key or "ignore")
    if suggestion is not None and suggestion.covers:
        out.append(f"           add to {suggestion.key}: {', '.join(suggestion.entries)} "
                   "(checked under the method's rules)")
    elif suggestion is not None:
        out.append(f"           no {suggestion.key} entry covers it on "
                   f"{', '.join(suggestion.failing)}: upgrade vLLM")
    return out


def _fail(message: str) -> SystemExit:
    print(visible(f"logwatch: {message}", lines=True), file=sys.stderr)
    return SystemExit(2)


def _load(ref: str, db: Path | None, socket: Path | None = None) -> dict[str, Any]:
    """A snapshot from a JSON file (`snapshot show --json`), or by hash (prefix) from the
    history."""
    path = Path(ref)
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise _fail(f"{path}: {exc}") from exc
        if not isinstance(data, dict):
            raise _fail(f"{path}: not a snapshot")
        return data
    from logwatch.cli.history import query_history

    if not all(c in "0123456789abcdef" for c in ref) or len(ref) < 4:
        raise _fail(f"{ref}: neither a snapshot file nor a snapshot hash")
    # through the daemon when it holds the history (the socket's SQL takes no parameters:
    # the hash, checked to be hex digits only, is the literal)
    query = f"SELECT hash, body FROM snapshots WHERE starts_with(hash, '{ref}')"
    rows = query_history(db, query, socket).rows
    if len(rows) != 1:
        raise _fail(f"{ref}: {'no' if not rows else 'more than one'} snapshot with that "
                    "hash in the history")
    stored = rows[0][1]
    body: dict[str, Any] = json.loads(stored) if isinstance(stored, str) else stored
    return {"hash": rows[0][0], **body}


def diff(a: str, b: str, db: Path | None = None, socket: Path | None = None) -> int:
    left, right = _load(a, db, socket), _load(b, db, socket)
    changes = diff_dicts(left, right)
    a_hash, b_hash = visible(str(left.get("hash"))), visible(str(right.get("hash")))
    if not changes:
        print(f"no difference ({a_hash} = {b_hash})")
        return 0
    print(f"{a_hash} -> {b_hash}: {len(changes)} change(s)")
    for key, old, new in changes:  # json.dumps escapes the values' control characters
        print(f"  {visible(key)}: {json.dumps(old)} -> {json.dumps(new)}")
    return 1


def snapshot_command(args: argparse.Namespace) -> int:
    if args.action == "diff":
        return diff(args.a, args.b, args.db, args.socket)
    return show(snapshot_options(args), as_json=args.json)
