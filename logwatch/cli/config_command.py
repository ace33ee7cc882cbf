"""`logwatch check-config` and `show-config`: the configuration's problems and where each
value came from; and the refusal to start the daemon or a run on a configuration with
problems."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from logwatch.cli.output import warn
from logwatch.core.safe_text.visible import visible


def config_command(args: argparse.Namespace) -> int:
    from logwatch.daemon.config_file import load_config, render

    overrides = {"database.path": str(args.db)} if getattr(args, "db", None) else None
    config = load_config(args.config, overrides)
    if args.command == "show-config":
        sys.stdout.write(visible(render(config), lines=True))
    for problem in config.problems:
        warn(f"  {problem}")
    if args.command == "check-config":
        if config.problems:
            print(f"logwatch: {len(config.problems)} problem(s) in the configuration",
                  file=sys.stderr)
            return 1
        where = config.origins.get("file", "?")
        print(f"configuration OK: {len(config.targets)} target(s)"
              + ("" if where.startswith("none") else f" in {where}"))
        from logwatch.daemon.config_file import host_notes

        for note in host_notes(config):
            print(f"  note: {note}")
        if where.startswith("none"):  # no file is not a checked file: say which was looked for
            from logwatch.daemon.config_file import default_config

            print(f"  no configuration file at {default_config()}: the defaults are in force "
                  "(`logwatch show-config` prints them)")
    return 1 if config.problems else 0


def refused(config: Any, command: str) -> bool:
    """A configuration with problems: said, each one, and the start refused."""
    if not config.problems:
        return False
    warn(f"logwatch: {command}: the configuration has problems; not starting:")
    for problem in config.problems:
        warn(f"  {problem}")
    return True
