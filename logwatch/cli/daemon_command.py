"""`logwatch daemon`: follow logs live and record findings in the history, with the
configuration's targets, socket, metrics, [[notify]] and relaunches; and the exit that
waits for no socket query (`logwatch run` ends the same way)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from logwatch.cli.config_command import refused
from logwatch.cli.exit_codes import EXIT_USAGE
from logwatch.cli.options import load_library
from logwatch.cli.output import warn


def daemon_command(args: argparse.Namespace) -> int:
    import asyncio

    from logwatch import own_log

    own_log.configure(fmt=args.log_format)
    _descriptors_to_the_hard_limit()
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
    from logwatch.core.settings.config import is_glob
    from logwatch.daemon.config_file import load_config

    config = load_config(args.config)
    if refused(config, "daemon"):
        return EXIT_USAGE
    folders = [p for p in args.file if Path(p).is_dir()]
    if folders:  # never waited on as if a file would appear there
        warn(f"logwatch: daemon: --file {folders[0]}: a directory, not a log file (give each "
             "file with --file, or a journal directory with --journal-dir)")
        return EXIT_USAGE
    globs = [p for p in args.file if is_glob(p)]
    if args.from_oldest and globs:  # a glob matches rotated files itself, or chose not to
        warn(f"logwatch: daemon: --from-oldest reads one file's rotated files; --file {globs[0]} "
             "is a glob, which follows every file it matches (rotated ones when it matches "
             "them)")
        return EXIT_USAGE
    if not args.file and not args.stdin and not selectors and not config.targets:
        print("logwatch: daemon: give --file PATH, a --journal-* selector, --stdin, or "
              "targets in the configuration", file=sys.stderr)
        return EXIT_USAGE
    args.signatures = [*args.signatures, *(Path(d) for d in config.get("signatures.dirs") or [])]
    args.min_acceptance = config.get("signatures.min_acceptance_percent")
    library = load_library(args)
    db = args.db or configured_db_path(config.get("database.path"))
    with open_store(db, service=True) as store:
        flags = SourceFlags(files=args.file, journals=selectors, stdin=args.stdin,
                            poll_interval=args.poll_interval, use_inotify=not args.no_inotify,
                            start_at="end" if args.from_end else
                            "oldest" if args.from_oldest else "start")
        sources = build_sources(flags, config.targets,
                                LiveWriter(store, library).checkpoints())
        from logwatch.host.targets import TargetSnapshots, unit_targets

        # a unit named on the command line is snapshotted as a configured target's unit is
        targets = TargetSnapshots([*unit_targets([(s.name, s.selector) for s in sources
                                                  if isinstance(s, JournalSource)
                                                  and s.name.startswith("journal:")]),
                                   *config.targets])
        daemon = Daemon(sources, library, store, until_idle=args.until_idle,
                        reload_library=lambda: load_library(args), targets=targets)
        daemon.keep_days = float(config.get("database.keep_days") or 0)
        if config.get("export.dir"):
            from logwatch.store.export import default_host

            daemon.export = (Path(config.get("export.dir")),
                             config.get("export.host") or default_host(),
                             float(config.get("export.every_minutes")))
        notify(daemon, config)
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

            socket_path = args.socket or default_socket_path(config.get("socket.path"))
            daemon.control = control_server(daemon, socket_path, config)
        if args.metrics:
            from logwatch.daemon.metrics import MetricsServer, daemon_samples, parse_listen

            try:
                host, port = parse_listen(args.metrics)
            except ValueError as exc:
                warn(f"logwatch: daemon: --metrics {exc}")
                return EXIT_USAGE
            daemon.metrics = MetricsServer(host, port, lambda: daemon_samples(daemon))
        code = asyncio.run(daemon.run())
        for event in daemon.events + [e for s in sources
                                      if isinstance(s, FileSource | GlobSource | JournalSource)
                                      for e in s.events]:
            warn(f"logwatch daemon: {event}")
        print(f"logwatch daemon: {daemon.lines:,} lines read, {daemon.committed:,} new "
              "findings recorded", file=sys.stderr)
    leave_now(store, code)
    return code


def control_server(daemon: Any, path: Path, config: Any) -> Any:
    """The control socket with the configuration's [socket] settings: who may connect
    and ask what (group, operators_group), idle connections, query limits."""
    from logwatch.daemon.control import ControlServer
    from logwatch.store.operator_sql import QueryLimits

    server = ControlServer(daemon, path, config.get("socket.group") or None,
                           operators_group=config.get("socket.operators_group") or None,
                           idle_seconds=float(config.get("socket.idle_seconds")))
    server.limits = QueryLimits(seconds=float(config.get("socket.query_seconds")),
                                rows=int(config.get("socket.query_rows")))
    return server


def leave_now(store: Any, code: int) -> None:
    """A socket query that no interrupt reached still runs on its thread: what was read is
    committed, so end the process now instead of waiting for the query at exit."""
    if store.left_open:
        warn("logwatch: a query on the control socket did not stop when interrupted; "
             "everything read is committed; exiting without waiting for it")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def notify(daemon: Any, config: Any) -> None:
    """The configuration's [[notify]] entries told what the daemon (or the run) publishes;
    none from a configuration with problems (its alerts would be guesses)."""
    if config.notify and not config.problems:
        from logwatch.daemon.alerts import Alerts, history_page

        daemon.alerts = Alerts(config.notify, daemon.log)
        # what the history says was told lately is not told again after a restart
        window = max(max(n.every_seconds, n.crash_loop_minutes * 60) for n in config.notify)
        daemon.alerts.told_before(daemon.writer.recent_fatal(window),
                                  daemon.writer.recent_failures(window))
        # failures recorded just before the last run stopped, never paged: paged now
        daemon.untold = [history_page(row) for row in daemon.writer.untold_failures(window)]


def _descriptors_to_the_hard_limit() -> None:
    """Open files up to the hard limit (systemd gives a service 1024 soft, 512 Ki hard): each
    client, followed file and journalctl takes some, and a crowd of connections must find the
    daemon with room for its sources and root's connection."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 1 << 16
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
