"""The `logwatch` command line: argument parsing and exit codes, nothing clever."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logwatch import __version__
from logwatch.cli import output
from logwatch.core.safe_text.visible import json_escaped, visible

if TYPE_CHECKING:  # the library, duckdb and regex load only for commands that use them
    from logwatch.core.signatures.library import Library

EXIT_OK = 0
EXIT_FATAL_FOUND = 1
EXIT_USAGE = 2
EXIT_NO_VLLM_OUTPUT = 3  # scan: no line of the input was written by vLLM (not "healthy")


def _warn(message: str) -> None:
    """A line for the operator on stderr. What it quotes (file names, log text, SQL, database
    values) is shown visibly, never obeyed by the terminal."""
    print(visible(message, lines=True), file=sys.stderr)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        if "required: command" in message or "required: action" in message:
            # bare `logwatch` (or `logwatch snapshot`): what there is to run, not one line
            self.print_help(sys.stderr)
        self.exit(EXIT_USAGE, visible(f"{self.prog}: error: {message}", lines=True) + "\n")


def _defaults() -> tuple[str, str]:
    """--help's words for --db and --socket, naming the paths actually used here."""
    from logwatch.paths import default_db_path, default_socket_path

    return (f"the history database (default: {default_db_path()})",
            f"the daemon's control socket (default: {default_socket_path()})")


SIGNATURES_HELP = "an extra signature directory layered over the shipped library (repeatable)"
LIBRARY_HELP = "use this library directory instead of the shipped one"
CONFIG_HELP = ("configuration file (default: $LOGWATCH_CONFIG, else "
               "/etc/logwatch/logwatch.toml when it exists)")


def build_parser() -> argparse.ArgumentParser:
    db_help, socket_help = _defaults()
    parser = _Parser(prog="logwatch", description="Explain and fix vLLM failures from its logs.",
                     epilog="scan exits 0 with no fatal incident, 1 with one (a specific cause "
                            "or an unrecognised fatal error), 2 on a usage or input error, 3 "
                            "when no line of the input was written by vLLM.")
    parser.add_argument("--version", action="version", version=f"logwatch {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    scan = sub.add_parser("scan", help="scan log files (or - for stdin) and print a triage report")
    scan.add_argument("paths", nargs="+", metavar="PATH", help="log file, .gz file, or - for stdin")
    scan.add_argument("--json", action="store_true", help="print the report as one JSON object")
    scan.add_argument("--signatures", action="append", type=Path, default=[], metavar="DIR",
                      help="extra signature directory layered over the shipped library")
    scan.add_argument("--library", type=Path, metavar="DIR",
                      help="use this library directory instead of the shipped one")
    scan.add_argument("--engine", choices=("auto", "hyperscan", "python"), default="auto",
                      help="literal prefilter engine (default: hyperscan when installed)")
    scan.add_argument("--mode", choices=("auto", "prefilter", "full"), default="auto",
                      help="full: run the per-line pipeline on every line (slower)")
    scan.add_argument("--db", type=Path, metavar="PATH",
                      help="record the scan in this DuckDB history (re-scanning adds nothing)")
    scan.add_argument("--jobs", type=int, choices=(1, 2), default=None,
                      help="processes per large file (default: 2 when two cores are idle)")
    scan.add_argument("--plan", action="store_true",
                      help="add the corrected launch for the newest launch (a W4A4 variant "
                           "beside --model-dir, the MTP ignore list merged); nothing is run")
    _snapshot_arguments(scan)

    snap = sub.add_parser("snapshot", help="the configuration in force: show it, or diff two")
    snap_sub = snap.add_subparsers(dest="action", required=True, parser_class=_Parser)
    show_snap = snap_sub.add_parser("show", help="capture and print a snapshot")
    _snapshot_arguments(show_snap)
    show_snap.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    diff = snap_sub.add_parser("diff", help="what changed between two snapshots: JSON files "
                                            "from `snapshot show --json`, or hashes in the "
                                            "history")
    diff.add_argument("a", help="a snapshot: a JSON file or a hash in the history")
    diff.add_argument("b", help="the snapshot to compare it with")
    diff.add_argument("--db", type=Path, metavar="PATH", default=None, help=db_help)
    diff.add_argument("--socket", type=Path, metavar="PATH", default=None, help=socket_help)

    pre = sub.add_parser("preflight", help="predict, before vLLM loads a weight, the failures a "
                                           "launch will hit (exit 0: clean start, 1: failures)")
    pre.add_argument("--model-dir", metavar="DIR", required=True,
                     help="the model directory the launch serves")
    launch = pre.add_mutually_exclusive_group(required=True)
    launch.add_argument("--cmdline", metavar="ARGV",
                        help="the `[VLLM_X=1 ...] vllm serve ...` command line, quoted as one "
                             "string")
    launch.add_argument("--unit", metavar="UNIT", help="read ExecStart/Environment of a unit")
    launch.add_argument("--user-unit", metavar="UNIT", help="the same, of a systemd --user unit")
    pre.add_argument("--gpu-capability", metavar="X.Y",
                     help="compute capability of the GPU it will run on (9.0, 10.0, 12.0 or "
                          "90/100/120); read with nvidia-smi for --unit/--user-unit")
    pre.add_argument("--gpu-name", metavar="NAME", help="the GPU's name, for the report")
    pre.add_argument("--vllm-version", metavar="V",
                     help="the vLLM release that will run it (default: the one installed for "
                          "the command line's interpreter, when found)")
    pre.add_argument("--json", action="store_true", help="print the prediction as JSON")

    status = sub.add_parser("status", help="what the daemon is doing (or, with none running, "
                                           "what the history holds); exit 0 healthy, 1 when a "
                                           "target's newest launch failed, 3 with no daemon")
    status.add_argument("--socket", type=Path, metavar="PATH", default=None,
                        help=socket_help)
    status.add_argument("--db", type=Path, metavar="PATH", default=None, help=db_help)
    status.add_argument("--json", action="store_true",
                        help="print the status as one JSON object")

    sql = sub.add_parser("sql", help="run a read-only SQL query on the history")
    sql.add_argument("--socket", type=Path, metavar="PATH", default=None,
                        help=socket_help)
    sql.add_argument("query", help='e.g. "SELECT * FROM failures_by_config"; - reads it '
                     "from stdin")
    sql.add_argument("--db", type=Path, metavar="PATH", help=db_help, default=None)
    fmt = sql.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true",
                     help='{"columns": [...], "rows": [{column: value}], "truncated": null or '
                          'why the rows were cut}')
    fmt.add_argument("--csv", action="store_true",
                     help="rows as CSV with a header (\\n line ends, lists as JSON)")
    fmt.add_argument("--jsonl", action="store_true",
                     help="one JSON object a row, {column: value}, for pipelines")
    hist = sub.add_parser("history", help="recent incidents with their diagnoses")
    hist.add_argument("--db", type=Path, metavar="PATH", default=None, help=db_help)
    hist.add_argument("--socket", type=Path, metavar="PATH", default=None, help=socket_help)
    hist.add_argument("--limit", type=int, default=20,
                      help="at most this many incidents (default: %(default)s)")

    plan = sub.add_parser("plan", help="the corrected launch for the newest failed launch in "
                          "the history (a diff of argv, environment, model); nothing is started")
    plan.add_argument("--db", type=Path, metavar="PATH", default=None, help=db_help)
    plan.add_argument("--launch", metavar="ID", help="this launch (an id from the launches "
                      "table) instead of the newest failed one")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.add_argument("--dry-run", action="store_true",
                      help="accepted for scripts that pass it to every command: a plan is "
                           "always only shown (the daemon and `run` take --dry-run too)")

    for verb, what in (("approve", "let an action awaiting approval go on (the guardrails "
                                   "still decide when it runs)"),
                       ("reject", "drop an action that has not started")):
        act = sub.add_parser(verb, help=what)
        act.add_argument("id", metavar="ID", help="the action's id (`logwatch status` lists "
                                                  "the open ones)")
        _operator_arguments(act, socket_help)
    reset = sub.add_parser("reset-breaker", help="close a target's circuit breaker after "
                           "repeated failed relaunches (only an operator can)")
    reset.add_argument("target", metavar="TARGET", help="the target's name")
    _operator_arguments(reset, socket_help)

    demo = sub.add_parser("demo", help="the whole loop with a vLLM stand-in in a scratch "
                          "workspace: failure, diagnosis, plan, pre-flight, relaunch, "
                          "verification, the history in SQL")
    demo.add_argument("--gpu", choices=("b200", "h200", "rtx-pro-6000"), default="b200",
                      help="the simulated GPU (h200: no native FP4, the plan is refused)")
    demo.add_argument("--json", action="store_true", help="print a summary as one JSON object")
    demo.add_argument("--executor", choices=("child", "systemd"), default="child",
                      help="child: relaunch as `logwatch run` does (default); systemd: the "
                           "stand-in as a unit of your systemd --user manager, relaunched "
                           "by the real daemon through its drop-in")
    demo.add_argument("--keep", type=Path, metavar="DIR",
                      help="build the workspace in DIR (new, empty) and keep it")
    demo.add_argument("--no-tui", action="store_true",
                      help="print the loop's timeline even in a terminal (default there: "
                           "run it live under `logwatch run` and show it in the TUI)")

    prune = sub.add_parser("prune", help="remove from the history the launches that started "
                           "more than --keep-days ago, with their incidents and findings (a "
                           "daemon does it itself with [database] keep_days)")
    prune.add_argument("--keep-days", type=float, metavar="N", required=True,
                       help="what started in the last N days stays")
    prune.add_argument("--db", type=Path, metavar="PATH", default=None, help=db_help)
    export = sub.add_parser("export", help="the history as Parquet partitioned by host and "
                            "day, for querying a fleet's histories together (docs/fleet.md)")
    export.add_argument("--parquet", type=Path, metavar="DIR", required=True,
                        help="the dataset's directory (one per fleet: every host's export "
                             "goes beside the others)")
    export.add_argument("--db", type=Path, metavar="PATH", default=None, help=db_help)
    export.add_argument("--host", metavar="NAME", default=None,
                        help="this host's name in the dataset (default: the hostname)")
    export.add_argument("--since", metavar="YYYY-MM-DD", default=None,
                        help="only the days from this one on (default: every day)")
    tui = sub.add_parser("tui", help="the live dashboard, log, incidents, history and "
                                     "signatures in the terminal (a client of the daemon)")
    tui.add_argument("--socket", type=Path, metavar="PATH", default=None,
                     help="the daemon's control socket (default: the config's socket.path)")
    tui.add_argument("--db", type=Path, metavar="PATH", default=None,
                     help="the history to read, read-only, while no daemon answers "
                          "(default: the config's database.path, else the XDG data dir)")
    tui.add_argument("--config", type=Path, metavar="PATH", default=None,
                     help=CONFIG_HELP)
    tui.add_argument("--read-only", action="store_true",
                     help="show, never send: approve and reject are hidden")

    daemon = sub.add_parser("daemon", help="follow logs live and record findings in the history")
    daemon.add_argument("--file", action="append", default=[], metavar="PATH",
                        help="a log file to follow across rotations, or a quoted glob (every "
                        "file it matches, now or later; repeatable)")
    daemon.add_argument("--metrics", metavar="HOST:PORT",
                        help="serve Prometheus metrics on a loopback address, e.g. "
                        "127.0.0.1:9464")
    daemon.add_argument("--stdin", action="store_true",
                        help="read standard input until it ends (`vllm serve ... 2>&1 | "
                             "logwatch daemon --stdin`)")
    daemon.add_argument("--journal-unit", action="append", default=[], metavar="UNIT",
                        help="follow journald for a unit (journalctl -u UNIT)")
    daemon.add_argument("--journal-user-unit", action="append", default=[], metavar="UNIT",
                        help="follow a systemd --user unit's journal")
    daemon.add_argument("--journal-file", action="append", default=[], metavar="PATH",
                        help="follow a journal file (journalctl --file)")
    daemon.add_argument("--journal-dir", action="append", default=[], metavar="DIR",
                        help="follow a journal directory (journalctl -D)")
    daemon.add_argument("--db", type=Path, metavar="PATH", default=None,
                        help=db_help.replace("(default: ", "(default: the configuration's "
                                             "database.path, else "))
    daemon.add_argument("--socket", type=Path, metavar="PATH", default=None,
                        help=socket_help.replace("(default: ", "(default: the "
                                                 "configuration's socket.path, else "))
    daemon.add_argument("--no-socket", action="store_true", help="no control socket")
    daemon.add_argument("--config", type=Path, metavar="PATH", default=None,
                        help="configuration file with targets (default: "
                             "$LOGWATCH_CONFIG, else /etc/logwatch/logwatch.toml when it exists)")
    daemon.add_argument("--poll-interval", type=float, default=1.0, metavar="S",
                        help="polling period where inotify is not available")
    daemon.add_argument("--no-inotify", action="store_true", help="poll only")
    daemon.add_argument("--from-end", action="store_true",
                        help="on a first run (no checkpoint yet), start --file and --journal-* "
                             "sources at the end of what they hold; a checkpoint always wins")
    daemon.add_argument("--dry-run", action="store_true",
                        help="relaunches are proposed, decided and approved, then dropped "
                             "before any change ([relaunch] dry_run)")
    daemon.add_argument("--until-idle", type=float, metavar="S", default=None,
                        help="catch up, then exit once no source has written for S seconds")
    daemon.add_argument("--signatures", action="append", type=Path, default=[], metavar="DIR",
                        help=SIGNATURES_HELP)
    daemon.add_argument("--library", type=Path, metavar="DIR", help=LIBRARY_HELP)

    check = sub.add_parser("check-config", help="list every problem in the configuration")
    check.add_argument("--config", type=Path, metavar="PATH", default=None, help=CONFIG_HELP)
    show_cfg = sub.add_parser("show-config", help="the merged configuration and where each "
                                                  "value came from")
    show_cfg.add_argument("--config", type=Path, metavar="PATH", default=None, help=CONFIG_HELP)
    show_cfg.add_argument("--db", type=Path, metavar="PATH", default=None, help=db_help)

    run = sub.add_parser("run", help="run vLLM as a child and watch it: "
                                     "logwatch run -- vllm serve MODEL ...")
    run.add_argument("--db", type=Path, metavar="PATH", default=None, help=db_help)
    run.add_argument("--target", default="vllm", help="a name for this vLLM (default: vllm)")
    run.add_argument("--quiet", action="store_true", help="do not pass vLLM's output through")
    run.add_argument("--socket", type=Path, metavar="PATH", default=None,
                     help="serve the control socket here while it runs (status, sql, "
                     "snapshot, subscribe)")
    run.add_argument("--gpu-capability", metavar="X.Y", default=None,
                     help="state the GPU's compute capability instead of asking nvidia-smi")
    run.add_argument("--relaunch", choices=("off", "ask", "auto"), default="off",
                     help="when vLLM fails on something a plan fixes, start the corrected "
                          "launch: after `logwatch approve` (ask, needs --socket) or when "
                          "the guardrails allow (auto); default off")
    run.add_argument("--config", type=Path, metavar="PATH", default=None,
                     help="configuration file: its database.path, [[notify]] and, with "
                          "--relaunch, [relaunch] settings (default: "
                          "$LOGWATCH_CONFIG, else /etc/logwatch/logwatch.toml when it exists)")
    run.add_argument("--dry-run", action="store_true",
                     help="with --relaunch: propose, decide and approve, then change nothing")
    run.add_argument("--signatures", action="append", type=Path, default=[], metavar="DIR",
                        help=SIGNATURES_HELP)
    run.add_argument("--library", type=Path, metavar="DIR", help=LIBRARY_HELP)
    run.add_argument("argv", nargs=argparse.REMAINDER, help="-- then the command to run")

    sigs = sub.add_parser("signatures", help="inspect and test the signature library")
    sigs.add_argument("--signatures", action="append", type=Path, default=[], metavar="DIR",
                        help=SIGNATURES_HELP)
    sigs.add_argument("--library", type=Path, metavar="DIR", help=LIBRARY_HELP)
    sigs_sub = sigs.add_subparsers(dest="action", required=True, parser_class=_Parser)
    sigs_sub.add_parser("list", help="one line per signature")
    show = sigs_sub.add_parser("show", help="everything about one signature")
    show.add_argument("id", help="a signature's id (`logwatch signatures list`)")
    sigs_sub.add_parser("test", help="run every example and counter-example")
    sigs_sub.add_parser("lint", help="flag untested branches, risky patterns, shared examples")
    draft = sigs_sub.add_parser("draft", help="draft a signature (TOML) from a group of "
                                              "unrecognised errors, from a log or the history")
    draft.add_argument("log", nargs="?", metavar="LOG", help="a log file to scan for groups")
    draft.add_argument("--db", type=Path, metavar="PATH", default=None,
                       help="draft from the unrecognised findings recorded in this history")
    draft.add_argument("--group", type=int, default=1, metavar="N",
                       help="which group, as numbered in the scan's UNRECOGNISED ERRORS "
                            "(default: 1, the most frequent)")
    draft.add_argument("--out", type=Path, metavar="DIR", default=None,
                       help="write DIR/<id>.toml instead of printing it")
    output.add_arguments(parser)  # --color and --no-pager, on every subcommand too
    return parser


def _operator_arguments(parser: argparse.ArgumentParser, socket_help: str) -> None:
    parser.add_argument("--reason", metavar="TEXT", help="recorded with the move")
    parser.add_argument("--socket", type=Path, metavar="PATH", default=None,
                        help=socket_help)
    parser.add_argument("--json", action="store_true", help="print the daemon's answer")


def _snapshot_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("configuration snapshot (for the diagnosis)")
    group.add_argument("--cmdline", metavar="ARGV",
                       help="the `vllm serve ...` command line that ran (quoted as one string)")
    group.add_argument("--model-dir", metavar="DIR", help="the model directory that was served")
    group.add_argument("--pid", type=int, help="read argv and environment of a running vLLM")
    group.add_argument("--unit", metavar="UNIT", help="read ExecStart/Environment of a unit")
    group.add_argument("--user-unit", action="store_true", help="--unit is a systemd --user unit")
    group.add_argument("--gpu-capability", metavar="X.Y",
                       help="compute capability of the GPU vLLM ran on (e.g. 9.0 for H100/H200, "
                            "10.0 for B200); read with nvidia-smi when --pid/--unit is given")


def _snapshot_options(args: argparse.Namespace) -> Any:
    from logwatch.scan.triage import SnapshotOptions

    capability = _capability(args.gpu_capability)
    return SnapshotOptions(cmdline=args.cmdline, model_dir=_model_dir(args.model_dir),
                           pid=args.pid,
                           unit=args.unit, user_unit=args.user_unit,
                           gpu_capability=capability)


def _model_dir(text: str | None) -> str | None:
    """--model-dir: a directory holding a config.json, else a usage error (a mistyped path
    must not give a snapshot that silently lacks the model)."""
    if text is None:
        return None
    path = Path(text)
    why = ("no such directory" if not path.exists() else
           "not a directory" if not path.is_dir() else
           "no config.json in it: not a model directory"
           if not (path / "config.json").is_file() else "")
    if why:
        _warn(f"logwatch: --model-dir {text}: {why}")
        raise SystemExit(EXIT_USAGE)
    return text


def _capability(text: str | None) -> int | None:
    """--gpu-capability as 90/100/120; a usage error when it is not a number."""
    from logwatch.scan.triage import parse_capability

    if not text:
        return None
    try:
        return parse_capability(text)
    except ValueError as exc:
        print(f"logwatch: --gpu-capability {text!r}: expected a number like 9.0",
              file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from exc


def _load(args: argparse.Namespace, check: bool = True) -> Library:
    """The library, loaded and checked in a child process with a deadline."""
    from logwatch.library.worker import load_bounded

    return load_bounded(args.signatures, base=args.library, check=check)


def _cmd_scan(args: argparse.Namespace) -> int:
    from logwatch.core.report.text import incomplete_warning, render_text
    from logwatch.scan.offline import InputError, resolve_inputs, run_scan

    try:
        inputs = resolve_inputs(args.paths)
    except InputError as exc:
        _warn(f"logwatch: {exc}")
        return EXIT_USAGE
    if sum(1 for i in inputs if i.path is None) > 1:
        print("logwatch: stdin (-) can be given once", file=sys.stderr)
        return EXIT_USAGE
    library = _load(args)
    if args.db:  # DuckDB loads only for a scan that records, after it
        from logwatch.store.record import ScanRecorder
    from logwatch.store.errors import DatabaseError

    if args.db and Path(args.db).exists():
        from logwatch.store.db import open_store

        try:  # a damaged or locked history is refused now, not after a long scan
            open_store(args.db).close()
        except DatabaseError as exc:
            _warn(f"logwatch: {exc} Nothing was scanned.")
            return EXIT_USAGE
    recorder = ScanRecorder() if args.db else None
    try:
        report = run_scan(inputs, library, engine=args.engine, mode=args.mode,
                          snapshot_options=_snapshot_options(args), recorder=recorder,
                          jobs=args.jobs, plan=args.plan)
    except InputError as exc:
        _warn(f"logwatch: {exc}")
        return EXIT_USAGE
    not_recorded = None  # the report is printed all the same: a scan's findings are not lost
    if recorder is not None:
        from logwatch.scan.blocks import release_freed_blocks
        from logwatch.store.db import keep_files_private, open_store, scan_settings

        release_freed_blocks()  # the scan's blocks, before DuckDB loads
        keep_files_private()
        try:
            with open_store(args.db, settings=scan_settings(recorder.findings)) as store:
                added = recorder.write(store, report)
        except DatabaseError as exc:
            not_recorded = exc
        else:
            _warn(f"recorded in {args.db}: "
                  + ", ".join(f"{n} new {t}" for t, n in added.items()))
    for gap in report["incomplete"]:
        _warn(f"logwatch: warning: {incomplete_warning(gap)}")
    # what --pid/--unit/--cmdline/--model-dir asked for and could not be read: said here,
    # once, not only in the report's configuration section of each launch
    for problem in dict.fromkeys(p for snapshot in (report.get("snapshots") or {}).values()
                                 for p in snapshot.get("problems", [])):
        _warn(f"logwatch: warning: the configuration was not read in full: "
              f"{' '.join(str(problem).split())}")
    if args.json:  # DEL, C1 and bidi controls escaped too; the values load unchanged
        sys.stdout.write(json_escaped(json.dumps(report, indent=2, ensure_ascii=False)) + "\n")
    else:
        sys.stdout.write(render_text(report, colour=output.colour(sys.stdout),
                                     width=output.width(sys.stdout)))
        if args.plan:
            plan = report.get("plan")
            sys.stdout.write("\n" + visible(plan["text"], lines=True) if plan else
                             "\nNo plan: a relaunch fixes none of the causes found.\n")
    if not_recorded is not None:
        sys.stdout.flush()  # the report first, then why it was not recorded
        _warn(f"logwatch: {not_recorded} This scan was not recorded; its report is on "
              "standard output.")
        return EXIT_USAGE
    if any(i["fatal"] for i in report["incidents"]):
        return EXIT_FATAL_FOUND
    return EXIT_NO_VLLM_OUTPUT if report["verdict"] == "no_vllm_output" else EXIT_OK


def _cmd_signatures(args: argparse.Namespace) -> int:
    from logwatch.cli import signatures as signature_cmds

    if args.action == "test":
        return signature_cmds.test(args.signatures, args.library)
    if args.action == "lint":
        return signature_cmds.lint(args.signatures, args.library)
    if args.action == "draft":
        return signature_cmds.draft(_load(args), args.log, args.db, args.group, args.out)
    library = _load(args)
    if args.action == "list":
        return signature_cmds.list_signatures(library)
    return signature_cmds.show(library, args.id)


def _cmd_snapshot(args: argparse.Namespace) -> int:
    from logwatch.cli import snapshot as snapshot_cmds

    if args.action == "diff":
        return snapshot_cmds.diff(args.a, args.b, args.db, args.socket)
    return snapshot_cmds.show(_snapshot_options(args), as_json=args.json)


def _cmd_preflight(args: argparse.Namespace) -> int:
    from logwatch.cli.preflight import preflight
    from logwatch.scan.triage import SnapshotOptions

    capability = _capability(args.gpu_capability)
    options = SnapshotOptions(cmdline=args.cmdline, model_dir=args.model_dir,
                              unit=args.unit or args.user_unit, user_unit=bool(args.user_unit),
                              gpu_capability=capability, gpu_name=args.gpu_name)
    return preflight(options, args.vllm_version, args.json)


def _cmd_daemon(args: argparse.Namespace) -> int:
    import asyncio

    from logwatch import own_log

    own_log.configure()
    from logwatch.daemon.builder import SourceFlags, build_sources
    from logwatch.daemon.service import Daemon
    from logwatch.paths import configured_db_path
    from logwatch.sources.files import FileSource
    from logwatch.sources.globbed import GlobSource
    from logwatch.sources.journald import JournalSource
    from logwatch.store.db import keep_files_private, open_store
    from logwatch.store.live import LiveWriter

    keep_files_private()
    selectors = ([["-u", u] for u in args.journal_unit]
                 + [["--user-unit", u] for u in args.journal_user_unit]
                 + [["--file", str(Path(p).resolve())] for p in args.journal_file]
                 + [["-D", str(Path(d).resolve())] for d in args.journal_dir])
    from logwatch.daemon.config_file import load_config

    config = load_config(args.config)
    if _refused(config, "daemon"):
        return EXIT_USAGE
    folders = [p for p in args.file if Path(p).is_dir()]
    if folders:  # never waited on as if a file would appear there
        _warn(f"logwatch: daemon: --file {folders[0]}: a directory, not a log file (give each "
              "file with --file, or a journal directory with --journal-dir)")
        return EXIT_USAGE
    if not args.file and not args.stdin and not selectors and not config.targets:
        print("logwatch: daemon: give --file PATH, a --journal-* selector, --stdin, or "
              "targets in the configuration", file=sys.stderr)
        return EXIT_USAGE
    args.signatures = [*args.signatures, *(Path(d) for d in config.get("signatures.dirs") or [])]
    library = _load(args)
    db = args.db or configured_db_path(config.get("database.path"))
    with open_store(db, service=True) as store:
        flags = SourceFlags(files=args.file, journals=selectors, stdin=args.stdin,
                            poll_interval=args.poll_interval, use_inotify=not args.no_inotify,
                            start_at="end" if args.from_end else "start")
        sources = build_sources(flags, config.targets,
                                LiveWriter(store, library).checkpoints())
        from logwatch.host.targets import TargetSnapshots

        targets = TargetSnapshots(config.targets)
        daemon = Daemon(sources, library, store, until_idle=args.until_idle,
                        reload_library=lambda: _load(args), targets=targets)
        daemon.keep_days = float(config.get("database.keep_days") or 0)
        if config.get("export.dir"):
            from logwatch.store.export import default_host

            daemon.export = (Path(config.get("export.dir")),
                             config.get("export.host") or default_host(),
                             float(config.get("export.every_minutes")))
        _notify(daemon, config)
        if any(t.relaunch.get("policy") in ("ask", "auto") for t in config.targets):
            from logwatch.daemon.relaunch_settings import settings_from_config
            from logwatch.daemon.relaunches import Relaunches

            daemon.relaunches = Relaunches(
                config.targets, settings_from_config(config.values, db.parent, args.dry_run),
                daemon.in_store, daemon, daemon.current_launch, daemon.signature_status,
                retake=daemon.retake_snapshots)
        for snapshot in targets.take_all():  # what each target runs with, before READY
            daemon.record_snapshot(snapshot)
        from logwatch.library.files import default_signature_dir

        daemon.watch_dirs = [args.library or default_signature_dir(), *args.signatures]
        if not args.no_socket:
            from logwatch.daemon.config_file import default_socket_path
            from logwatch.daemon.control import ControlServer

            socket_path = args.socket or default_socket_path(config.get("socket.path"))
            from logwatch.store.operator_sql import QueryLimits

            daemon.control = ControlServer(daemon, socket_path,
                                           config.get("socket.group") or None)
            daemon.control.limits = QueryLimits(seconds=float(config.get("socket.query_seconds")),
                                                rows=int(config.get("socket.query_rows")))
        if args.metrics:
            from logwatch.daemon.metrics import MetricsServer, daemon_samples, parse_listen

            try:
                host, port = parse_listen(args.metrics)
            except ValueError as exc:
                _warn(f"logwatch: daemon: --metrics {exc}")
                return EXIT_USAGE
            daemon.metrics = MetricsServer(host, port, lambda: daemon_samples(daemon))
        code = asyncio.run(daemon.run())
        for event in daemon.events + [e for s in sources
                                      if isinstance(s, FileSource | GlobSource | JournalSource)
                                      for e in s.events]:
            _warn(f"logwatch daemon: {event}")
        print(f"logwatch daemon: {daemon.lines:,} lines read, {daemon.committed:,} new "
              "findings recorded", file=sys.stderr)
    leave_now(store, code)
    return code


def leave_now(store: Any, code: int) -> None:
    """A socket query that no interrupt reached still runs on its thread: what was read is
    committed, so end the process now instead of waiting for the query at exit."""
    if store.left_open:
        _warn("logwatch: a query on the control socket did not stop when interrupted; "
              "everything read is committed; exiting without waiting for it")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _cmd_config(args: argparse.Namespace) -> int:
    from logwatch.daemon.config_file import load_config, render

    overrides = {"database.path": str(args.db)} if getattr(args, "db", None) else None
    config = load_config(args.config, overrides)
    if args.command == "show-config":
        sys.stdout.write(visible(render(config), lines=True))
    for problem in config.problems:
        _warn(f"  {problem}")
    if args.command == "check-config":
        if config.problems:
            print(f"logwatch: {len(config.problems)} problem(s) in the configuration",
                  file=sys.stderr)
            return 1
        where = config.origins.get("file", "?")
        print(f"configuration OK: {len(config.targets)} target(s)"
              + ("" if where.startswith("none") else f" in {where}"))
        if where.startswith("none"):  # no file is not a checked file: say which was looked for
            from logwatch.daemon.config_file import default_config

            print(f"  no configuration file at {default_config()}: the defaults are in force "
                  "(`logwatch show-config` prints them)")
    return 1 if config.problems else 0


def _cmd_run(args: argparse.Namespace) -> int:
    """`logwatch run -- cmd ...`: exits with the child's status (128+N if a signal ended it)."""
    import asyncio
    import os

    from logwatch import own_log
    from logwatch.core.settings.config import valid_name
    from logwatch.core.snapshot.model import GpuFacts
    from logwatch.daemon.config_file import load_config
    from logwatch.daemon.service import Daemon
    from logwatch.host.capture import capture_gpu, take_snapshot
    from logwatch.paths import configured_db_path
    from logwatch.scan.triage import parse_capability
    from logwatch.sources.process import ProcessSource
    from logwatch.store.db import keep_files_private

    if not valid_name(args.target):
        _warn(f"logwatch: run: --target {args.target!r}: letters, digits, '.', '_' and '-', "
              "at most 64 characters, starting with a letter or digit")
        return EXIT_USAGE
    own_log.configure()
    own_log.bind(target=args.target)  # every event of this run names its target
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        print("logwatch: run: give the command after --, e.g. logwatch run -- vllm serve "
              "MODEL", file=sys.stderr)
        return EXIT_USAGE
    library = _load(args)
    gpu = (GpuFacts(capability=parse_capability(args.gpu_capability), source="--gpu-capability")
           if args.gpu_capability else capture_gpu())
    snapshot = take_snapshot(argv=argv, env=dict(os.environ), gpu=gpu)  # what is started
    config = load_config(args.config)  # the history's path, [[notify]], [relaunch]
    if args.config is not None and _refused(config, "run"):  # the one asked for: as given
        return EXIT_USAGE
    db = args.db or configured_db_path(config.get("database.path"))
    relaunch = _run_relaunch_settings(args, argv, config, db)
    if isinstance(relaunch, int):
        return relaunch
    if config.problems and config.notify:  # a plain run goes on; its alerts would be guesses
        _warn("logwatch: run: the configuration has problems: its [[notify]] entries are "
              "not used (`logwatch check-config` says what)")
    umask = keep_files_private()  # for the history; vLLM keeps the umask it was given
    source = ProcessSource(argv, name=f"run:{args.target}", passthrough=not args.quiet,
                           umask=umask)
    with _run_store(db, args) as store:
        digest = snapshot.content_hash()
        daemon = Daemon([source], library, store, on_signal=source.forward,
                        snapshots={source.name: digest})
        _notify(daemon, config)
        daemon.writer.record_snapshot(digest, snapshot.to_dict())
        daemon.launches.snapshots.configure(source.name, snapshot)  # exactly what is started
        if args.socket:
            from logwatch.daemon.control import ControlServer

            daemon.control = ControlServer(daemon, args.socket)
            if args.relaunch == "ask":
                daemon.needs_socket = ("--relaunch ask waits for `logwatch approve`, which "
                                       "reaches this run only through its socket")

        async def supervise() -> int:
            if relaunch is not None:
                _relaunching_run(daemon, source, args.target, args.relaunch, relaunch, gpu)
            return await daemon.run()

        asyncio.run(supervise())
    for event in source.events + daemon.events:
        _warn(f"logwatch run: {event}")
    if daemon.needs_socket and daemon.control is None:  # refused before anything started
        return EXIT_USAGE
    print(f"logwatch run: {daemon.lines:,} lines read, {daemon.committed:,} new findings "
          f"recorded (snapshot {daemon.snapshots.get(source.name, digest)})", file=sys.stderr)
    code = source.returncode if source.returncode is not None else 1
    code = 128 - code if code < 0 else code
    analysis = daemon.launches.newest(source.name)
    if code != 0 and analysis is not None:  # the moment the operator wants the triage
        from logwatch.core.report.text import render_text
        from logwatch.core.report.triage import report_dict

        report = report_dict(library.version, [analysis], {"lines": daemon.lines, "files": 1},
                             lambda snap: snap.content_hash())
        report["snapshots"] = {d["snapshot"]: analysis.snapshot.to_dict()
                               for d in report["launches"]}
        sys.stderr.write(render_text(report, colour=output.colour(sys.stderr),
                                     width=output.width(sys.stderr), title="logwatch run"))
    leave_now(store, code)
    return code


def _refused(config: Any, command: str) -> bool:
    """A configuration with problems: said, each one, and the start refused."""
    if not config.problems:
        return False
    _warn(f"logwatch: {command}: the configuration has problems; not starting:")
    for problem in config.problems:
        _warn(f"  {problem}")
    return True


def _notify(daemon: Any, config: Any) -> None:
    """The configuration's [[notify]] entries told what the daemon (or the run) publishes;
    none from a configuration with problems (its alerts would be guesses)."""
    if config.notify and not config.problems:
        from logwatch.daemon.alerts import Alerts

        daemon.alerts = Alerts(config.notify, daemon.log)


def _run_store(db: Path, args: argparse.Namespace) -> Any:
    """The history `logwatch run` records into: `db`; when that is the default (no --db)
    and a running daemon holds it, a history of the run's own beside it (said), so that a
    host whose daemon runs can still supervise vLLM with `logwatch run`."""
    from logwatch.store.db import open_store
    from logwatch.store.errors import DatabaseInUse

    try:
        return open_store(db, service=True)
    except DatabaseInUse:
        if args.db is not None:  # --db X means X
            raise
    own = db.with_name(f"run-{args.target}.duckdb")
    _warn(f"logwatch: run: {db} is held by a running daemon; this run records into {own} "
          "(give --db PATH to choose)")
    return open_store(own, service=True)


def _relaunching_run(daemon: Any, source: Any, target: str, mode: str, settings: Any,
                     gpu: Any) -> None:
    """`run --relaunch`: the daemon's relaunches, with the run's child as the executor
    (called on the event loop, before the daemon runs)."""
    import asyncio
    import os

    from logwatch.core.remedy.plan import Launch
    from logwatch.core.settings.config import TargetConfig
    from logwatch.core.snapshot.argv import parse_launch
    from logwatch.daemon.relaunches import Relaunches
    from logwatch.host.capture import take_snapshot
    from logwatch.host.targets import TargetSnapshot
    from logwatch.relaunch.run_child import RunChild

    def snapshot_of(launch: Launch) -> TargetSnapshot:
        taken = take_snapshot(argv=launch.spec.argv(), env=launch.env, gpu=gpu)
        return TargetSnapshot(source.name, taken.content_hash(), taken.to_dict(), None, taken)

    config = TargetConfig(target, {"kind": "process"}, {"argv": list(source.argv)},
                          relaunch={"policy": mode})
    relaunches: Relaunches | None = None

    def settled() -> bool:
        return bool(daemon.written_all()) and relaunches is not None \
            and not relaunches.busy(target)

    child = RunChild(source, Launch(parse_launch(source.argv), dict(os.environ)),
                     asyncio.get_running_loop(), snapshot_of, daemon.record_snapshot, settled)
    relaunches = Relaunches([config], settings, daemon.in_store, daemon, daemon.current_launch,
                            daemon.signature_status, executor=lambda *_: child,
                            sources={source.name: target})
    daemon.relaunches = relaunches


def _run_relaunch_settings(args: argparse.Namespace, argv: list[str], config: Any,
                           db: Path) -> Any:
    """`run --relaunch`: the [relaunch] settings (None when off), or an exit code when the
    request cannot work (said why)."""
    if args.relaunch == "off":
        if args.dry_run:
            _warn("logwatch: run: --dry-run goes with --relaunch ask|auto (without it nothing "
                  "is ever relaunched)")
            return EXIT_USAGE
        return None
    from logwatch.core.snapshot.argv import ArgvError, parse_launch
    from logwatch.daemon.relaunch_settings import settings_from_config

    if args.relaunch == "ask" and not args.socket:
        _warn("logwatch: run: --relaunch ask needs --socket PATH: `logwatch approve` "
              "reaches this run there")
        return EXIT_USAGE
    try:
        parse_launch(argv)
    except ArgvError as exc:
        _warn(f"logwatch: run: --relaunch: logwatch cannot edit this command line ({exc})")
        return EXIT_USAGE
    if _refused(config, "run"):
        return EXIT_USAGE
    return settings_from_config(config.values, db.parent, args.dry_run)


def _cmd_history(args: argparse.Namespace) -> int:
    from logwatch.cli import history as history_cmds

    if args.command == "sql":
        fmt = ("json" if args.json else "jsonl" if args.jsonl else "csv" if args.csv
               else "table")
        return history_cmds.sql(args.db, args.query, fmt, args.socket)
    if args.command == "status":
        return history_cmds.status(args.db, args.socket, args.json)
    return history_cmds.history(args.db, args.limit, args.socket)


def _cmd_prune(args: argparse.Namespace) -> int:
    from logwatch.store.db import default_db_path, open_store
    from logwatch.store.retention import prune

    if args.keep_days <= 0:
        _warn("logwatch prune: --keep-days must be more than 0")
        return EXIT_USAGE
    db = args.db or default_db_path()
    if not db.exists():
        _warn(f"logwatch prune: {db}: no database")
        return EXIT_USAGE
    from logwatch.store.errors import DatabaseInUse

    try:
        with open_store(db) as store:
            print(prune(store, args.keep_days).describe())
    except DatabaseInUse:
        _warn(f"logwatch prune: {db} is held by a running daemon, which prunes it itself: "
              "set [database] keep_days in its configuration (then reload or restart it), "
              "or prune after it stops")
        return EXIT_USAGE
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from datetime import date

    from logwatch.store.db import default_db_path
    from logwatch.store.errors import DatabaseInUse
    from logwatch.store.export import default_host, export_parquet

    db = args.db or default_db_path()
    try:
        since = date.fromisoformat(args.since) if args.since else None
        written = export_parquet(db, args.parquet, args.host or default_host(), since)
    except ValueError as exc:
        _warn(f"logwatch export: {exc}")
        return EXIT_USAGE
    except DatabaseInUse:
        _warn(f"logwatch export: {db} is held by a running daemon, which exports it itself: "
              "give its configuration an [export] section (dir, host, every_minutes; "
              "docs/fleet.md), or export after it stops")
        return EXIT_USAGE
    for item in written:
        print(f"{item.table}: {item.rows:,} row(s)")
    return 0


def _cmd_tui(args: argparse.Namespace) -> int:
    from logwatch.daemon.config_file import default_socket_path, load_config
    from logwatch.paths import configured_db_path
    from logwatch.tui.app import LogwatchApp

    config = load_config(args.config)
    socket_path = args.socket or default_socket_path(config.get("socket.path"))
    db = args.db or configured_db_path(config.get("database.path"))
    dirs = [Path(d) for d in config.get("signatures.dirs") or []]
    LogwatchApp(socket_path, db, read_only=args.read_only, library_dirs=dirs).run()
    return EXIT_OK


def _demo_tui(args: argparse.Namespace) -> int:
    """`logwatch demo` in a terminal: live, in the TUI."""
    import shutil
    import tempfile

    from logwatch.demo.live import run_live
    from logwatch.demo.scenario import DemoError

    root = args.keep or Path(tempfile.mkdtemp(prefix="logwatch-demo-"))
    try:
        healthy, summary = run_live(root, args.gpu)
    except DemoError as exc:
        _warn(f"logwatch demo: {exc}")
        return EXIT_USAGE
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"logwatch demo: {'healthy' if healthy else 'NOT healthy'} "
          f"(actions: {', '.join(summary['actions']) or 'none'})")
    return EXIT_OK if healthy else 1


def _cmd_demo(args: argparse.Namespace) -> int:
    from logwatch.demo.scenario import DemoError, run_demo
    from logwatch.library.worker import load_bounded

    if args.keep is not None and args.keep.exists() and (
            not args.keep.is_dir() or any(args.keep.iterdir())):
        print(f"logwatch demo: --keep {args.keep}: not an empty directory", file=sys.stderr)
        return EXIT_USAGE
    from logwatch.demo.systemd_loop import SystemdUnavailable

    if (sys.stdin.isatty() and sys.stdout.isatty() and not args.json and not args.no_tui
            and args.executor == "child"):
        return _demo_tui(args)
    try:
        healthy, summary = run_demo(load_bounded([]), args.gpu, args.json, args.keep,
                                    args.executor)
    except SystemdUnavailable as exc:
        _warn(f"logwatch demo --executor systemd: {exc}; `logwatch demo` runs the loop "
              "without systemd")
        return EXIT_USAGE
    except DemoError as exc:
        _warn(f"logwatch demo: {exc}")
        return EXIT_USAGE
    if args.json:
        sys.stdout.write(json_escaped(json.dumps(summary, indent=2, ensure_ascii=False)) + "\n")
    else:
        print(f"logwatch demo: {'healthy' if healthy else 'NOT healthy'} after "
              f"{summary['seconds']} s")
    return EXIT_OK if healthy else 1


# commands that read the daemon's history or talk to its socket: where neither --db nor
# --socket is given they use the configuration's, as the daemon does
CONFIGURED_PATHS = ("sql", "history", "status", "snapshot", "plan", "export", "prune",
                    "approve", "reject", "reset-breaker")


def _configured_paths(args: argparse.Namespace) -> None:
    """--db and --socket, when not given, from the configuration's database.path and
    socket.path (the daemon's own resolution: a monitor reads what the daemon writes)."""
    from logwatch.daemon.config_file import load_config

    if getattr(args, "db", None) is not None and getattr(args, "socket", None) is not None:
        return
    config = load_config(getattr(args, "config", None))
    if hasattr(args, "db") and args.db is None and config.get("database.path"):
        args.db = Path(config.get("database.path"))
    if hasattr(args, "socket") and args.socket is None and config.get("socket.path"):
        args.socket = Path(config.get("socket.path"))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # --help and usage errors import nothing more
    output.configure(args)  # the colour choice; stdout gathered for a pager
    from logwatch.core.signatures.library import LibraryError
    from logwatch.daemon.socket_trust import UnsafeSocketPath
    from logwatch.store.errors import DatabaseError

    try:
        if args.command in CONFIGURED_PATHS:
            _configured_paths(args)
        if args.command == "scan":
            return _cmd_scan(args)
        if args.command == "snapshot":
            return _cmd_snapshot(args)
        if args.command in ("sql", "history", "status"):
            return _cmd_history(args)
        if args.command == "demo":
            return _cmd_demo(args)
        if args.command == "tui":
            return _cmd_tui(args)
        if args.command == "export":
            return _cmd_export(args)
        if args.command == "prune":
            return _cmd_prune(args)
        if args.command == "plan":
            from logwatch.cli.plan import plan_command

            return plan_command(args.db, args.launch, args.json)
        if args.command in ("approve", "reject", "reset-breaker"):
            from logwatch.cli.actions import operator_request

            if args.command == "reset-breaker":
                return operator_request("reset_breaker", args.socket, args.json,
                                        target=args.target, reason=args.reason)
            return operator_request(args.command, args.socket, args.json, id=args.id,
                                    reason=args.reason)
        if args.command == "daemon":
            return _cmd_daemon(args)
        if args.command == "preflight":
            return _cmd_preflight(args)
        if args.command == "run":
            return _cmd_run(args)
        if args.command in ("check-config", "show-config"):
            return _cmd_config(args)
        return _cmd_signatures(args)
    except (DatabaseError, UnsafeSocketPath) as exc:
        _warn(f"logwatch: {exc}")
        return EXIT_USAGE
    except LibraryError as exc:
        print("logwatch: the signature library did not load:", file=sys.stderr)
        for problem in exc.problems:
            _warn(f"  {problem}")
        return EXIT_USAGE
    except BrokenPipeError:
        sys.stderr.close()  # `logwatch scan x | head` is fine
        return EXIT_OK
    except KeyboardInterrupt:
        output.finish(page=False)  # the operator stopped it: what it wrote, not a pager
        return 130
    finally:
        output.finish()  # paged or printed: what a long command wrote to a terminal
