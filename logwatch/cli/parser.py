"""The `logwatch` argument parser: every command, its flags and their help, and what a usage
error prints (exit 2)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from logwatch import __version__
from logwatch.cli import output
from logwatch.cli.exit_codes import EXIT_USAGE
from logwatch.core.safe_text.visible import visible


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
    scan.add_argument("--one-run", action="store_true",
                      help="the inputs are the streams of one run (vLLM's stdout, then its "
                           "stderr): one source's launches")
    scan.add_argument("--min-acceptance", type=_acceptance_target, metavar="PERCENT",
                      help="draft-acceptance target: a speculative-decoding reading under it "
                           "is a warning (default 50; under 10 is a garbage draft)")
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
    pre.add_argument("--vllm-python", metavar="PYTHON", type=Path,
                     help="an interpreter with that vLLM installed: its own `vllm serve` "
                          "parser judges the command line's arguments (vLLM's import takes "
                          "some seconds)")
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
    daemon.add_argument("--log-format", choices=("auto", "text", "json"), default="auto",
                        help="logwatch's own log on stderr: text lines (each relaunch move "
                        "one sentence), JSON, or auto: JSON to journald, text on a terminal, "
                        "JSON otherwise (default)")
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
    start = daemon.add_mutually_exclusive_group()
    start.add_argument("--from-end", action="store_true",
                       help="on a first run (no checkpoint yet), start --file and --journal-* "
                            "sources at the end of what they hold; a checkpoint always wins")
    start.add_argument("--from-oldest", action="store_true",
                       help="on a first run (no checkpoint yet), read each --file's rotated "
                            "files (vllm.log.1, .2.gz, dated names) first, oldest first")
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
    run.add_argument("--log-format", choices=("text", "json"), default=None,
                     help="logwatch's own log on stderr, among vLLM's: text lines (each "
                          "relaunch move one sentence; the default) or JSON (the default "
                          "under journald)")
    run.add_argument("--stop-seconds", type=_positive_seconds, metavar="S", default=None,
                     help="after SIGTERM/SIGINT is forwarded, kill vLLM's process group "
                          "(SIGKILL) if it still runs S seconds later; a second signal kills "
                          "it at once (default: [run] stop_seconds, 30)")
    run.add_argument("--signatures", action="append", type=Path, default=[], metavar="DIR",
                        help=SIGNATURES_HELP)
    run.add_argument("--library", type=Path, metavar="DIR", help=LIBRARY_HELP)
    run.add_argument("--preflight", choices=("off", "warn", "strict"), default="warn",
                     help="before starting vLLM, predict its failures from the command line "
                          "and the model directory (`logwatch preflight`): say them and start "
                          "it anyway (warn, the default), start nothing (strict, exit 1), or "
                          "do not look (off)")
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
    lint = sigs_sub.add_parser("lint", help="flag untested branches, risky patterns, shared "
                               "examples, literals ordinary traffic holds")
    lint.add_argument("--traffic", type=Path, action="append", default=[], metavar="FILE",
                      help="healthy vLLM output to measure the literals on (repeatable; "
                           "default: a checkout's samples/logs/healthy_*.log)")
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


def _positive_seconds(text: str) -> float:
    """A number of seconds more than 0 (argparse says so when it is not)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a number of seconds more than 0")
    return value


def _acceptance_target(text: str) -> float:
    """A draft-acceptance target in percent: more than 10 (the garbage line), at most 100."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        value = 0.0
    if not 10 < value <= 100:
        raise argparse.ArgumentTypeError(f"{text!r}: a percentage more than 10, at most 100")
    return value
