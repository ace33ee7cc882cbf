"""The parsed options the commands share, made into what they take: the signature library,
the GPU's compute capability and the configuration snapshot to read (usage errors exit 2)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logwatch.cli.exit_codes import EXIT_USAGE
from logwatch.cli.output import warn

if TYPE_CHECKING:  # the library, duckdb and regex load only for commands that use them
    from logwatch.core.signatures.library import Library


def snapshot_options(args: argparse.Namespace) -> Any:
    from logwatch.scan.triage import SnapshotOptions

    capability = parse_gpu_capability(args.gpu_capability)
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
        warn(f"logwatch: --model-dir {text}: {why}")
        raise SystemExit(EXIT_USAGE)
    return text


def parse_gpu_capability(text: str | None) -> int | None:
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


def load_library(args: argparse.Namespace, check: bool = True) -> Library:
    """The library, loaded and checked in a child process with a deadline."""
    from logwatch.core.signatures.library import DEFAULT_ACCEPTANCE_TARGET, with_acceptance_target
    from logwatch.library.worker import load_bounded

    library = load_bounded(args.signatures, base=args.library, check=check)
    target = getattr(args, "min_acceptance", None)
    if target is not None and target != DEFAULT_ACCEPTANCE_TARGET:
        library = with_acceptance_target(library, float(target))
    return library
