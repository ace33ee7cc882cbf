"""The `logwatch` entry point: parse the command line, run the command it names, and turn
what escapes a command (a damaged history, an unsafe socket, a broken library, a closed pipe,
an interrupt) into an exit code. Each command lives in its own module, imported only when it
runs, so that `--help` and usage errors load nothing more (cli/parser.py has the flags)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from logwatch.cli import output
from logwatch.cli.exit_codes import EXIT_OK, EXIT_USAGE
from logwatch.cli.output import warn
from logwatch.cli.parser import build_parser

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
    from logwatch.host.trusted_dirs import UnsafePath
    from logwatch.store.errors import DatabaseError

    try:
        if args.command in CONFIGURED_PATHS:
            _configured_paths(args)
        if args.command == "scan":
            from logwatch.cli.scan_command import scan_command

            return scan_command(args)
        if args.command == "snapshot":
            from logwatch.cli.snapshot import snapshot_command

            return snapshot_command(args)
        if args.command in ("sql", "history", "status"):
            from logwatch.cli.history import history_command

            return history_command(args)
        if args.command == "demo":
            from logwatch.cli.demo_command import demo_command

            return demo_command(args)
        if args.command == "tui":
            from logwatch.cli.tui_command import tui_command

            return tui_command(args)
        if args.command == "export":
            from logwatch.cli.maintenance import export_command

            return export_command(args)
        if args.command == "prune":
            from logwatch.cli.maintenance import prune_command

            return prune_command(args)
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
            from logwatch.cli.daemon_command import daemon_command

            return daemon_command(args)
        if args.command == "preflight":
            from logwatch.cli.preflight import preflight_command

            return preflight_command(args)
        if args.command == "run":
            from logwatch.cli.run_command import run_command

            return run_command(args)
        if args.command in ("check-config", "show-config"):
            from logwatch.cli.config_command import config_command

            return config_command(args)
        from logwatch.cli.signatures import signatures_command

        return signatures_command(args)
    except (DatabaseError, UnsafePath) as exc:  # a socket or export directory refused
        warn(f"logwatch: {exc}")
        return EXIT_USAGE
    except LibraryError as exc:
        print("logwatch: the signature library did not load:", file=sys.stderr)
        for problem in exc.problems:
            warn(f"  {problem}")
        return EXIT_USAGE
    except BrokenPipeError:
        sys.stderr.close()  # `logwatch scan x | head` is fine
        return EXIT_OK
    except KeyboardInterrupt:
        output.finish(page=False)  # the operator stopped it: what it wrote, not a pager
        return 130
    finally:
        output.finish()  # paged or printed: what a long command wrote to a terminal
