"""`logwatch preflight`: the failures a launch will hit, predicted from its configuration
(core/diagnosis/preflight.py) before vLLM loads a weight. Exit 0: a clean start predicted; 1:
failures predicted (listed with their reasons); 2: a usage or input error."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

from logwatch.cli.options import parse_gpu_capability
from logwatch.core.checkpoint.files import CheckpointFiles
from logwatch.core.checkpoint.predicted import STAGE_ARGUMENTS, PreflightProblem
from logwatch.core.diagnosis.preflight import (
    UNFORESEEN,
    UNKNOWN_FLAG,
    NotRead,
    Prediction,
    predict,
)
from logwatch.core.quant.ignore_rules import parse_release
from logwatch.core.safe_text.redact import redact
from logwatch.core.safe_text.visible import visible
from logwatch.core.snapshot.argv import ArgvError, parse_launch
from logwatch.core.snapshot.model import Snapshot
from logwatch.core.snapshot.vllm_cli import CliVocabulary
from logwatch.host.capture import take_snapshot
from logwatch.host.checkpoint_files import model_files
from logwatch.host.vllm_cli_data import DATA_FILE, VocabularyUnreadable
from logwatch.host.vllm_cli_data import load_vocabulary as read_vocabulary
from logwatch.host.vllm_parser import ParserVerdict, release_parser
from logwatch.scan.triage import SnapshotOptions, gpu_for

EXIT_CLEAN, EXIT_FAILURES, EXIT_USAGE = 0, 1, 2
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class InputError(ValueError):
    """What the operator gave cannot be checked: said with what and where."""


def split_command(cmdline: str) -> tuple[list[str], dict[str, str]]:
    """A shell-style `[env] NAME=value ... vllm serve ...` line: argv and the assignments."""
    try:
        tokens = shlex.split(cmdline)
    except ValueError as exc:
        raise InputError(f"--cmdline: cannot split it: {exc}") from exc
    env: dict[str, str] = {}
    while tokens and (tokens[0] == "env" or ASSIGNMENT.match(tokens[0])):
        token = tokens.pop(0)
        if token != "env":
            name, _, value = token.partition("=")
            env[name] = value
    return tokens, env


def load_vocabulary(path: Path = DATA_FILE) -> CliVocabulary:
    try:
        return read_vocabulary(path)
    except VocabularyUnreadable as exc:
        raise InputError(str(exc)) from exc


def capture(options: SnapshotOptions, vllm_version: str | None
            ) -> tuple[Snapshot, CheckpointFiles | NotRead | None]:
    """The launch's snapshot, the operator's --vllm-version in force over what was found, and
    the model directory's files (None: nothing is there, which is a prediction of its own,
    not an error of the operator's; NOT_READ: a file, a GGUF checkpoint, not judged)."""
    if vllm_version is not None and parse_release(vllm_version) is None:
        raise InputError(f"--vllm-version {vllm_version!r}: expected a release like 0.26.0")
    argv, env = split_command(options.cmdline) if options.cmdline else (None, {})
    snapshot = take_snapshot(argv=argv, env=env, unit=options.unit,
                             user_unit=options.user_unit, model_dir=options.model_dir,
                             gpu=gpu_for(options))
    if not snapshot.launch:
        raise InputError("no vLLM launch to check: " + ("; ".join(snapshot.problems)
                                                        or "the command line is empty"))
    if vllm_version is not None:
        snapshot = replace(snapshot, vllm_version=vllm_version,
                           sources={**snapshot.sources, "vllm_version": "--vllm-version"})
    checkpoint = model_files(options.model_dir) if options.model_dir else None
    served = snapshot.launch.get("model")
    if checkpoint is None and options.model_dir is not None \
            and Path(options.model_dir) != Path(str(served)):
        raise InputError(f"--model-dir {options.model_dir}: not a directory (and not the "
                         f"model the command line serves, {served})")
    return snapshot, checkpoint


def preflight(options: SnapshotOptions, vllm_version: str | None, as_json: bool,
              vllm_python: Path | None = None) -> int:
    try:
        snapshot, checkpoint = capture(options, vllm_version)
        verdict = None
        if vllm_python is not None:
            words = serve_words(options, snapshot)
            verdict = release_parser(vllm_python, words)
            # what vLLM refused is quoted: a misspelled --api-keys value would be in it
            verdict = replace(verdict, error=masked(verdict.error, words))
            if verdict.accepted is not None and vllm_version is None:
                snapshot = replace(snapshot, vllm_version=verdict.release, sources={
                    **snapshot.sources, "vllm_version": str(vllm_python)})
        prediction = predict(snapshot, load_vocabulary(), checkpoint, os.path.isfile)
        if verdict is not None:
            prediction = with_parser(prediction, verdict, vllm_python)
    except InputError as exc:
        print(visible(f"logwatch: preflight: {exc}", lines=True), file=sys.stderr)
        return EXIT_USAGE
    except UNFORESEEN as exc:
        # an input no rule foresaw: said as such, never a traceback that reads as exit 1
        print(visible(f"logwatch: preflight: could not judge this launch ({type(exc).__name__}"
                      f": {str(exc)[:300]})", lines=True), file=sys.stderr)
        return EXIT_USAGE
    if as_json:
        json.dump({"snapshot": snapshot.content_hash(), "vllm_version": snapshot.vllm_version,
                   "gpu": snapshot.gpu.to_dict(), **prediction.to_dict()},
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(snapshot, prediction))
    return EXIT_CLEAN if prediction.clean else EXIT_FAILURES


def serve_words(options: SnapshotOptions, snapshot: Snapshot) -> list[str]:
    """The command line from `serve` on, as the operator wrote it (a unit's, redacted)."""
    argv = split_command(options.cmdline)[0] if options.cmdline else list(snapshot.argv)
    try:
        spec = parse_launch(argv)
    except ArgvError as exc:
        raise InputError(str(exc)) from exc
    words = ["serve"]
    for item in spec.items:
        words += [item] if isinstance(item, str) else item.tokens()
    return words


def masked(said: str, words: list[str]) -> str:
    """vLLM's refusal with every value of the command line long enough to be a secret (8
    characters) masked, but those it names as an invalid choice: a refusal quotes the words
    it could not take, and a misspelled `--api-keys sk-...` is one of them. Secrets the
    patterns know are masked too."""
    for index, word in enumerate(words[2:], start=2):
        if len(word) >= 8 and not word.startswith("-") and words[index - 1].startswith("-") \
                and f"invalid choice: '{word}'" not in said:
            said = said.replace(word, "***")
    return redact(said)


def with_parser(prediction: Prediction, verdict: ParserVerdict, python: Path | None
                ) -> Prediction:
    """The release's own parser's verdict in place of the flag names logwatch extracted: it
    is the ground truth for what the command line's arguments are."""
    said = verdict.error
    if verdict.accepted is None:
        return replace(prediction, notes=(*prediction.notes,
                                          f"vLLM's own parser not run: {said}"))
    kept = tuple(p for p in prediction.problems if p.kind != UNKNOWN_FLAG)
    if verdict.accepted:
        return replace(prediction, problems=kept, notes=(
            *prediction.notes, f"vLLM {verdict.release}'s own parser ({python}) accepts the "
                               "command line"))
    refused = PreflightProblem(
        "parser_refused", "vLLM's own parser refuses the command line",
        f"vLLM {verdict.release}'s `vllm serve` parser ({python}): {said}",
        stage=STAGE_ARGUMENTS, message=said, signature="config.invalid_argument",
        evidence=(str(python),), fixes=("correct the argument it names",))
    return replace(prediction, problems=(refused, *kept))


def render(snapshot: Snapshot, prediction: Prediction, width: int = 100) -> str:
    cap = snapshot.gpu.capability
    gpu = f"{snapshot.gpu.name or 'GPU'} {cap / 10:.1f}" if cap else "GPU unknown"
    out = [f"preflight: vLLM {snapshot.vllm_version or 'unknown'}, {gpu}, "
           f"tensor-parallel {snapshot.tensor_parallel_size}, model "
           f"{snapshot.model.path if snapshot.model else snapshot.launch.get('model')}"]
    kernel = prediction.kernel
    if kernel is not None:
        texts = [f"kernel path: {kernel.summary}"] + ([kernel.advice] if kernel.advice else [])
        for number, text in enumerate(texts):
            for n, line in enumerate(textwrap.wrap(text, width - 10, break_on_hyphens=False)):
                out.append(("  " if number == 0 and n == 0 else "    ") + line)
    for label, problems in (("FAIL", prediction.problems), ("MAYBE", prediction.uncertain)):
        for problem in problems:
            out += _problem_lines(label, problem, width)
    out += [f"  note: {n}" for n in prediction.notes]
    out.append(f"{len(prediction.problems)} failure(s) predicted: the launch will not start "
               "cleanly" if prediction.problems else "a clean start predicted")
    return "\n".join(visible(line) for line in out) + "\n"


def _problem_lines(label: str, problem: PreflightProblem, width: int) -> list[str]:
    texts = [f"{problem.title}: {problem.reason}", *problem.details]
    if problem.message:
        texts.append(f"vLLM says: {problem.message}")
    texts += [f"evidence: {e}" for e in problem.evidence[:3]]
    texts += [f"fix: {f}" for f in problem.fixes]
    out = []
    for number, text in enumerate(texts):
        for n, line in enumerate(textwrap.wrap(text, width - 10, break_on_hyphens=False)):
            lead = f"  {label:<6}  " if number == 0 and n == 0 else " " * 10
            out.append(lead + ("  " if n and number else "") + line)
    return out


def preflight_command(args: argparse.Namespace) -> int:
    capability = parse_gpu_capability(args.gpu_capability)
    options = SnapshotOptions(cmdline=args.cmdline, model_dir=args.model_dir,
                              unit=args.unit or args.user_unit, user_unit=bool(args.user_unit),
                              gpu_capability=capability, gpu_name=args.gpu_name)
    return preflight(options, args.vllm_version, args.json, args.vllm_python)
