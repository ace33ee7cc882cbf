"""`logwatch tui`: start the terminal dashboard on the daemon's socket, or on its history
read-only while no daemon answers."""

from __future__ import annotations

import argparse
from pathlib import Path

from logwatch.cli.exit_codes import EXIT_CRASHED, EXIT_OK


def tui_command(args: argparse.Namespace) -> int:
    from logwatch.daemon.config_file import default_socket_path, load_config
    from logwatch.paths import configured_db_path
    from logwatch.tui.app import LogwatchApp

    config = load_config(args.config)
    socket_path = args.socket or default_socket_path(config.get("socket.path"))
    db = args.db or configured_db_path(config.get("database.path"))
    dirs = [Path(d) for d in config.get("signatures.dirs") or []]
    app = LogwatchApp(socket_path, db, read_only=args.read_only, library_dirs=dirs)
    app.run()
    # Textual prints a crash's traceback and returns: a service manager or a script that
    # started the TUI must not read that as a clean quit
    return EXIT_OK if not app.return_code else EXIT_CRASHED
