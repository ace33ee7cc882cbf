"""`logwatch scan`: the triage report of log files (or stdin), recorded in a history with
--db; exit 0 no fatal incident, 1 one, 2 a usage or input error, 3 no vLLM output."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from logwatch.cli import output
from logwatch.cli.exit_codes import EXIT_FATAL_FOUND, EXIT_NO_VLLM_OUTPUT, EXIT_OK, EXIT_USAGE
from logwatch.cli.options import load_library, snapshot_options
from logwatch.cli.output import warn
from logwatch.core.report.triage import EncodedJson, ReportItems
from logwatch.core.safe_text.visible import json_escaped, visible

JSON_PIECE = 1 << 16  # characters of JSON text written at a time


def write_json(report: dict[str, Any]) -> None:
    """The report as JSON on stdout, written as it is encoded: a backlog's report is
    hundreds of MB of text, never held whole. Each top-level key on a line of its own, and
    each element of a list under it (a launch, an incident, a diagnosis) on one line: each is
    encoded whole by json's C encoder (an indented encoding runs in Python, several times
    slower), and the text written a piece at a time."""
    encode = json.JSONEncoder(ensure_ascii=False).encode
    pieces: list[str] = []
    held = 0

    def put(text: str) -> None:
        nonlocal held, pieces
        pieces.append(text)
        held += len(text)
        if held >= JSON_PIECE:
            sys.stdout.write(json_escaped("".join(pieces)))
            pieces, held = [], 0

    put("{")
    for index, (key, value) in enumerate(report.items()):
        put(("," if index else "") + "\n  " + encode(key) + ": ")
        if isinstance(value, (list, ReportItems)):
            put("[")
            for number, item in enumerate(value):
                put(("," if number else "") + "\n    "
                    + (item if isinstance(item, EncodedJson) else encode(item)))
            put("\n  ]" if len(value) else "]")
        else:
            put(encode(value))
    put("\n}")
    sys.stdout.write(json_escaped("".join(pieces)) + "\n")


def scan_command(args: argparse.Namespace) -> int:
    from logwatch.core.report.text import incomplete_warning, render_text
    from logwatch.scan.offline import InputError, resolve_inputs, run_scan
    from logwatch.scan.report_spool import SpoolError

    try:
        inputs = resolve_inputs(args.paths)
    except InputError as exc:
        warn(f"logwatch: {exc}")
        return EXIT_USAGE
    if sum(1 for i in inputs if i.path is None) > 1:
        print("logwatch: stdin (-) can be given once", file=sys.stderr)
        return EXIT_USAGE
    if args.one_run and args.db:
        print("logwatch: scan: --one-run is not recorded in a history (--db): the history keeps "
              "each file's launches under its own name; scan the streams together without "
              "--db, or record them one by one", file=sys.stderr)
        return EXIT_USAGE
    library = load_library(args)
    if args.db:  # DuckDB loads only for a scan that records, after it
        from logwatch.store.record import ScanRecorder
    from logwatch.store.errors import DatabaseError

    if args.db and Path(args.db).exists():
        from logwatch.store.db import open_store

        try:  # a damaged or locked history is refused now, not after a long scan
            open_store(args.db).close()
        except DatabaseError as exc:
            warn(f"logwatch: {exc} Nothing was scanned.")
            return EXIT_USAGE
    recorder = ScanRecorder() if args.db else None
    try:
        report = run_scan(inputs, library, engine=args.engine, mode=args.mode,
                          snapshot_options=snapshot_options(args), recorder=recorder,
                          jobs=args.jobs, plan=args.plan, one_run=args.one_run,
                          lazy_report=args.json)
    except (InputError, SpoolError) as exc:
        warn(f"logwatch: {exc}")
        return EXIT_USAGE
    not_recorded = None  # the report is printed all the same: a scan's findings are not lost
    if recorder is not None:
        from logwatch.scan.blocks import release_freed_blocks
        from logwatch.store.db import keep_files_private, open_store, scan_settings

        release_freed_blocks()  # the scan's blocks, before DuckDB loads
        keep_files_private()
        try:
            rows = len(report["incidents"]) + len(report["diagnoses"])
            with open_store(args.db, settings=scan_settings(recorder.findings, rows)) as store:
                added = recorder.write(store, report)
        except DatabaseError as exc:
            not_recorded = exc
        else:
            warn(f"recorded in {args.db}: "
                 + ", ".join(f"{n} new {t}" for t, n in added.items()))
    for gap in report["incomplete"]:
        warn(f"logwatch: warning: {incomplete_warning(gap)}")
    if library.vocabulary is not None and library.vocabulary.problem:
        warn(f"logwatch: warning: {library.vocabulary.problem}; errors no signature knows "
             "are placed by their frames and logger tags only")
    for fault in report.get("scan_faults") or []:
        warn(f"logwatch: warning: {visible(fault['source'])}:{fault['line']}: the scan failed "
             f"on this record and passed over it ({visible(fault['error'])}); please report it")
    # what --pid/--unit/--cmdline/--model-dir asked for and could not be read: said here,
    # once, not only in the report's configuration section of each launch
    for problem in dict.fromkeys(p for snapshot in (report.get("snapshots") or {}).values()
                                 for p in snapshot.get("problems", [])):
        warn(f"logwatch: warning: the configuration was not read in full: "
             f"{' '.join(str(problem).split())}")
    if args.json:  # DEL, C1 and bidi controls escaped too; the values load unchanged
        write_json(report)
    else:
        sys.stdout.write(render_text(report, colour=output.colour(sys.stdout),
                                     width=output.width(sys.stdout)))
        if args.plan:
            plan = report.get("plan")
            sys.stdout.write("\n" + visible(plan["text"], lines=True) if plan else
                             "\nNo plan: a relaunch fixes none of the causes found.\n")
    if not_recorded is not None:
        sys.stdout.flush()  # the report first, then why it was not recorded
        warn(f"logwatch: {not_recorded} This scan was not recorded; its report is on "
             "standard output.")
        return EXIT_USAGE
    if any(launch["fatal_incidents"] for launch in report["launches"]):
        return EXIT_FATAL_FOUND
    return EXIT_NO_VLLM_OUTPUT if report["verdict"] == "no_vllm_output" else EXIT_OK
