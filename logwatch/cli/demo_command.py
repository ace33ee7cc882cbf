"""`logwatch demo`: the whole loop with a vLLM stand-in in a scratch workspace, live in the
TUI on a terminal, else as a timeline or a JSON summary."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from logwatch.cli.exit_codes import EXIT_OK, EXIT_USAGE
from logwatch.cli.output import warn
from logwatch.core.safe_text.visible import json_escaped


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
        warn(f"logwatch demo: {exc}")
        return EXIT_USAGE
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"logwatch demo: {'healthy' if healthy else 'NOT healthy'} "
          f"(actions: {', '.join(summary['actions']) or 'none'})")
    return EXIT_OK if healthy else 1


def demo_command(args: argparse.Namespace) -> int:
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
        warn(f"logwatch demo --executor systemd: {exc}; `logwatch demo` runs the loop "
             "without systemd")
        return EXIT_USAGE
    except DemoError as exc:
        warn(f"logwatch demo: {exc}")
        return EXIT_USAGE
    if args.json:
        sys.stdout.write(json_escaped(json.dumps(summary, indent=2, ensure_ascii=False)) + "\n")
    else:
        print(f"logwatch demo: {'healthy' if healthy else 'NOT healthy'} after "
              f"{summary['seconds']} s")
    return EXIT_OK if healthy else 1
