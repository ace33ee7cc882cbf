"""`logwatch prune` and `logwatch export`: the history's upkeep by hand, old launches
removed or the history written out as Parquet for a fleet (a daemon does both itself)."""

from __future__ import annotations

import argparse

from logwatch.cli.exit_codes import EXIT_USAGE
from logwatch.cli.output import warn


def prune_command(args: argparse.Namespace) -> int:
    from logwatch.store.db import default_db_path, open_store
    from logwatch.store.retention import prune

    if args.keep_days <= 0:
        warn("logwatch prune: --keep-days must be more than 0")
        return EXIT_USAGE
    db = args.db or default_db_path()
    if not db.exists():
        warn(f"logwatch prune: {db}: no database")
        return EXIT_USAGE
    from logwatch.store.errors import DatabaseInUse

    try:
        with open_store(db) as store:
            print(prune(store, args.keep_days).describe())
    except DatabaseInUse:
        warn(f"logwatch prune: {db} is held by a running daemon, which prunes it itself: "
             "set [database] keep_days in its configuration (then reload or restart it), "
             "or prune after it stops")
        return EXIT_USAGE
    return 0


def export_command(args: argparse.Namespace) -> int:
    from datetime import date

    from logwatch.store.db import default_db_path
    from logwatch.store.errors import DatabaseInUse
    from logwatch.store.export import default_host, export_parquet

    db = args.db or default_db_path()
    try:
        since = date.fromisoformat(args.since) if args.since else None
        written = export_parquet(db, args.parquet, args.host or default_host(), since)
    except ValueError as exc:
        warn(f"logwatch export: {exc}")
        return EXIT_USAGE
    except DatabaseInUse:
        warn(f"logwatch export: {db} is held by a running daemon, which exports it itself: "
             "give its configuration an [export] section (dir, host, every_minutes; "
             "docs/fleet.md), or export after it stops")
        return EXIT_USAGE
    for item in written:
        print(f"{item.table}: {item.rows:,} row(s)")
    return 0
