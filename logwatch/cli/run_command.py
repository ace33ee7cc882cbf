"""`logwatch run -- cmd ...`: run vLLM as a child and watch it as the daemon watches a
target, relaunching it with --relaunch ask|auto; exits with the verdict: the child's status,
unless a relaunch that did not verify was stopped (then the failure's), or 1 when the child
exited 0 but its launch failed (vLLM 0.32 does when its engine dies while serving), or when
`--preflight strict` predicted a failure and nothing was started."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from logwatch.cli import output
from logwatch.cli.config_command import refused
from logwatch.cli.daemon_command import control_server, leave_now, notify
from logwatch.cli.exit_codes import EXIT_FATAL_FOUND, EXIT_USAGE
from logwatch.cli.options import load_library
from logwatch.cli.output import warn
from logwatch.cli.run_preflight import run_preflight


def run_command(args: argparse.Namespace) -> int:
    """`logwatch run -- cmd ...`: exits with the verdict (the child's status, 128+N if a
    signal ended it; see the module docstring)."""
    import asyncio
    import os

    from logwatch import own_log
    from logwatch.core.launches.lifecycle import FAILED
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
        warn(f"logwatch: run: --target {args.target!r}: letters, digits, '.', '_' and '-', "
             "at most 64 characters, starting with a letter or digit")
        return EXIT_USAGE
    # text among vLLM's lines (each relaunch move one sentence); JSON to journald or on request
    own_log.configure(fmt=args.log_format or ("auto" if own_log.under_journald(sys.stderr)
                                              else "text"), prefix="logwatch run: ")
    own_log.bind(target=args.target)  # every event of this run names its target
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        print("logwatch: run: give the command after --, e.g. logwatch run -- vllm serve "
              "MODEL", file=sys.stderr)
        return EXIT_USAGE
    library = load_library(args)
    gpu = (GpuFacts(capability=parse_capability(args.gpu_capability), source="--gpu-capability")
           if args.gpu_capability else capture_gpu())
    snapshot = take_snapshot(argv=argv, env=dict(os.environ), gpu=gpu)  # what is started
    predicted = run_preflight(snapshot, args.preflight)
    if predicted is not None and predicted.problems and args.preflight == "strict":
        return EXIT_FATAL_FOUND
    # the history's path, [[notify]], [relaunch], [run]
    config = load_config(args.config, {"run.stop_seconds": args.stop_seconds})
    if args.config is not None and refused(config, "run"):  # the one asked for: as given
        return EXIT_USAGE
    db = args.db or configured_db_path(config.get("database.path"))
    relaunch = _run_relaunch_settings(args, argv, config, db)
    if isinstance(relaunch, int):
        return relaunch
    if config.problems and config.notify:  # a plain run goes on; its alerts would be guesses
        warn("logwatch: run: the configuration has problems: its [[notify]] entries are "
             "not used (`logwatch check-config` says what)")
    umask = keep_files_private()  # for the history; vLLM keeps the umask it was given
    source = ProcessSource(argv, name=f"run:{args.target}", passthrough=not args.quiet,
                           umask=umask, stop_seconds=float(config.get("run.stop_seconds")))
    child: Any = None  # the relaunching child, with --relaunch
    with _run_store(db, args) as store:
        digest = snapshot.content_hash()
        daemon = Daemon([source], library, store, on_signal=source.forward,
                        snapshots={source.name: digest})
        notify(daemon, config)
        daemon.writer.record_snapshot(digest, snapshot.to_dict())
        daemon.launches.snapshots.configure(source.name, snapshot)  # exactly what is started
        if args.socket:  # who may connect and ask what: the configuration's [socket]
            daemon.control = control_server(daemon, args.socket, config)
            if args.relaunch == "ask":
                daemon.needs_socket = ("--relaunch ask waits for `logwatch approve`, which "
                                       "reaches this run only through its socket")

        async def supervise() -> int:
            nonlocal child
            if relaunch is not None:
                child = _relaunching_run(daemon, source, args.target, args.relaunch, relaunch,
                                         gpu)
            return await daemon.run()

        watched = asyncio.run(supervise())
    for event in source.events + daemon.events:
        warn(f"logwatch run: {event}")
    if daemon.needs_socket and daemon.control is None:  # refused before anything started
        return EXIT_USAGE
    print(f"logwatch run: {daemon.lines:,} lines read, {daemon.committed:,} new findings "
          f"recorded (snapshot {daemon.snapshots.get(source.name, digest)})", file=sys.stderr)
    code = source.returncode if source.returncode is not None else 1
    code = 128 - code if code < 0 else code
    if child is not None and not source.interrupted and child.failed_status(code) != code:
        code = child.failed_status(code)
        warn(f"logwatch run: the relaunch did not verify and was stopped, with no launch "
             f"that verified to return to: exit {code}")
    if code == 0 and watched != 0:  # the child was fine, its watching was not: say so
        code = watched
        warn(f"logwatch run: the child ended well, but what it printed was not all recorded "
             f"(see above): exit {code}")
    analysis = daemon.launches.newest(source.name)
    if code == 0 and analysis is not None and analysis.launch.outcome == FAILED:
        # vLLM exits 0 when its engine died while serving and its API server shut down
        code = 1
        warn(f"logwatch run: vLLM exited 0, but its launch failed: exit {code}")
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
    warn(f"logwatch: run: {db} is held by a running daemon; this run records into {own} "
         "(give --db PATH to choose)")
    return open_store(own, service=True)


def _relaunching_run(daemon: Any, source: Any, target: str, mode: str, settings: Any,
                     gpu: Any) -> Any:
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
    return child


def _run_relaunch_settings(args: argparse.Namespace, argv: list[str], config: Any,
                           db: Path) -> Any:
    """`run --relaunch`: the [relaunch] settings (None when off), or an exit code when the
    request cannot work (said why)."""
    if args.relaunch == "off":
        if args.dry_run:
            warn("logwatch: run: --dry-run goes with --relaunch ask|auto (without it nothing "
                 "is ever relaunched)")
            return EXIT_USAGE
        return None
    from logwatch.core.snapshot.argv import ArgvError, parse_launch
    from logwatch.daemon.relaunch_settings import settings_from_config

    if args.relaunch == "ask" and not args.socket:
        warn("logwatch: run: --relaunch ask needs --socket PATH: `logwatch approve` "
             "reaches this run there")
        return EXIT_USAGE
    try:
        parse_launch(argv)
    except ArgvError as exc:
        warn(f"logwatch: run: --relaunch: logwatch cannot edit this command line ({exc})")
        return EXIT_USAGE
    if refused(config, "run"):
        return EXIT_USAGE
    return settings_from_config(config.values, db.parent, args.dry_run)
