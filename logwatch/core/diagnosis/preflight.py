"""Pre-flight: the failures a launch will hit, predicted from its snapshot before a single
weight is loaded (the command line, the environment, the model directory's config, the GPU,
the vLLM release).

The model-side predictions are the snapshot's latent problems (core/diagnosis/latent.py: Marlin
tiles at this tensor-parallel size on a weight-only path, FP4 activations below compute capability
10.0, BF16 MTP modules the ignore list misses); the launch-side one is the flags and VLLM_*
variables the release does not know (core/snapshot/vllm_cli.py). A prediction that depends on a fact
the snapshot lacks (the release, the GPU) is `uncertain`, never a failure: pre-flight refuses a
launch only for what it can show.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from logwatch.core.checkpoint.checks import checkpoint_problems
from logwatch.core.checkpoint.files import CheckpointFiles
from logwatch.core.checkpoint.predicted import (
    STAGE_ARGUMENTS,
    STAGE_CONFIG,
    Found,
    PreflightProblem,
)
from logwatch.core.diagnosis.kernel_path import KernelPath, kernel_path
from logwatch.core.diagnosis.latent import LATENT_FP4, LATENT_MARLIN, LATENT_MTP, latent_problems
from logwatch.core.diagnosis.launch_checks import (
    chat_template_problem,
    cpu_build,
    launch_problems,
)
from logwatch.core.diagnosis.model import Diagnosis
from logwatch.core.diagnosis.mtp_coverage import snapshot_release
from logwatch.core.quant.ignore import merge_overrides
from logwatch.core.quant.ignore_rules import Release, parse_release, release_text
from logwatch.core.snapshot.argv import ArgvError, LaunchSpec, Option, parse_launch
from logwatch.core.snapshot.model import Snapshot
from logwatch.core.snapshot.vllm_cli import CliVocabulary, canonical_flag, unknown_names

UNKNOWN_FLAG, UNKNOWN_ENV = "unknown_flag", "unknown_env"
# what huggingface_hub accepts as a repo id: a name, or a namespace and a name
REPO_ID = re.compile(r"[\w.-]{1,96}(/[\w.-]{1,96})?")


class NotRead:
    """The model directory's files were not read (a caller that only has a snapshot)."""


NOT_READ = NotRead()
KINDS = {LATENT_MARLIN: "marlin_tile", LATENT_FP4: "fp4_without_native_kernels",
         LATENT_MTP: "mtp_ignore_list_gap"}


@dataclass(frozen=True, slots=True)
class Prediction:
    problems: tuple[PreflightProblem, ...]  # failures predicted for certain
    uncertain: tuple[PreflightProblem, ...]  # possible, depending on what is not known
    notes: tuple[str, ...]  # what was not checked, and why
    kernel: KernelPath | None = None  # the quantized layers' kernel path (None: unquantized)

    @property
    def clean(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"clean": self.clean, "problems": [p.to_dict() for p in self.problems],
                "uncertain": [p.to_dict() for p in self.uncertain], "notes": list(self.notes),
                "kernel_path": self.kernel.to_dict() if self.kernel else None}


def predict(snapshot: Snapshot, vocab: CliVocabulary | None,
            checkpoint: CheckpointFiles | NotRead | None = NOT_READ,
            is_file: Callable[[str], bool] | None = None) -> Prediction:
    """What this launch runs into; `vocab`: the flags and variables per release (None: those
    are not checked); `checkpoint`: the model directory's files (None: there is no such
    directory; NOT_READ: they were not read, and are not judged); `is_file`: whether a path
    the command line names is a file here (None: not judged)."""
    found = Found()
    release = parse_release(snapshot.vllm_version)
    if checkpoint is None:
        model_missing(snapshot, found)
    elif not isinstance(checkpoint, NotRead):
        spec = _launch(snapshot)
        if spec is not None:  # each flag as the release's parser reads its spelling
            known = _release_flags(vocab, release)
            spec = spec.with_flags_as(lambda flag: canonical_flag(flag, known))
        if spec is not None and spec.hf_overrides and checkpoint.config is not None:
            # vLLM builds the model from config.json with the overrides merged
            checkpoint = replace(checkpoint, config=merge_overrides(checkpoint.config,
                                                                    spec.hf_overrides))
        quant = snapshot.model.quant if snapshot.model else None
        _guarded("the checkpoint's files", found,
                 partial(checkpoint_problems, checkpoint, quant, release))
        if spec is not None and checkpoint.config is not None:
            _guarded("the command line against config.json", found,
                     partial(launch_problems, spec, snapshot.env, checkpoint, quant,
                             snapshot.vllm_version, vocab))
        template = chat_template_problem(spec, is_file) if spec and is_file else None
        if template is not None:
            found.certain.append(template)
    cpu = cpu_build(snapshot.vllm_version)
    for diag in latent_problems(snapshot):
        if cpu and diag.cause in (LATENT_MARLIN, LATENT_FP4):
            continue  # GPU kernels: a CPU build's are judged by launch_checks
        problem = _from_latent(diag)
        (found.certain if _certain(diag, snapshot) else found.uncertain).append(problem)
    notes = found.notes
    if cpu:
        notes.append(f"vLLM {snapshot.vllm_version} is a CPU build: its own kernels are "
                     "judged, not a GPU's (Marlin, native FP4)")
    elif snapshot.gpu.capability is None:
        notes.append("GPU compute capability unknown (give --gpu-capability): whether the "
                     "launch runs through weight-only Marlin, and FP4 support, not judged.")
    if vocab is None:
        notes.append("flags and environment variables not checked (no vocabulary)")
    elif release is None:
        notes.append("vLLM release unknown (give --vllm-version): flags and environment "
                     "variables not checked; release-dependent rules judged on every release.")
    elif not vocab.covers(release):
        notes.append(f"vLLM {release_text(release)} is not among the releases whose flags "
                     f"were extracted ({', '.join(map(release_text, vocab.releases))}): flags "
                     "and environment variables not checked.")
    else:
        for unknown in unknown_names(vocab, release, launch_flags(snapshot),
                                     sorted(snapshot.env)):
            flag = unknown.kind == "flag"
            # an unknown flag stops the parser; an unknown variable is only not read (the
            # setting it meant is not in force: said, never a refusal)
            (found.certain if flag else found.uncertain).append(PreflightProblem(
                UNKNOWN_FLAG if flag else UNKNOWN_ENV,
                f"unknown {'flag' if flag else 'environment variable'}",
                unknown.reason(release), (),
                {"name": unknown.name, "vllm_version": release_text(release),
                 "known_in": list(unknown.known_in)},
                (unknown.hint,) if unknown.hint else (), stage=STAGE_ARGUMENTS,
                signature="config.invalid_argument" if flag else None,
                message=f"vllm: error: unrecognized arguments: {unknown.name}" if flag
                else ""))
    return Prediction(tuple(sorted(found.certain, key=_rank)),
                      tuple(sorted(found.uncertain, key=_rank)), tuple(notes),
                      kernel_path(snapshot))


# what a value of a type or size no rule foresaw raises in a check of files' values
UNFORESEEN = (ArithmeticError, LookupError, TypeError, ValueError, RecursionError)


def _guarded(what: str, found: Found, check: Callable[[], Found]) -> None:
    """A check of values read from files: one it cannot take (a value of a type or size no
    rule foresaw) is said in a note, never a traceback, and judges nothing."""
    try:
        found.extend(check())
    except UNFORESEEN as exc:
        found.notes.append(f"{what} not judged: {type(exc).__name__}: {str(exc)[:200]}")


def _rank(problem: PreflightProblem) -> int:
    """vLLM meets failures in the order of its start-up: the first is the one it prints."""
    return problem.stage


def model_missing(snapshot: Snapshot, found: Found) -> None:
    """The served model is not a directory here: vLLM takes a `--model` that is not a local
    directory for a Hugging Face repo id. One that cannot be a repo id (an absolute path,
    more than one `/`, `..`), or any when the Hub is off (HF_HUB_OFFLINE), fails."""
    served = str(snapshot.launch.get("model") or "")
    offline = snapshot.env.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    not_an_id = not REPO_ID.fullmatch(served) or ".." in served or "--" in served
    problem = PreflightProblem(
        "model_not_found", "the model is not a directory here",
        f"{served or 'the model'} is not a directory on this host, so vLLM takes it for a "
        "Hugging Face repo id" + (
            ", which it cannot be (an absolute path, or more than one '/')" if not_an_id
            else ", and HF_HUB_OFFLINE is set" if offline
            else ": a download follows if the Hub is reachable and the repo exists"),
        stage=STAGE_CONFIG, signature="model.not_found",
        message=("OSError: Repo id must be in the form 'repo_name' or "
                 f"'namespace/repo_name': '{served}'." if not_an_id else ""),
        evidence=(f"--model {served}",),
        fixes=("point --model at the checkpoint's directory (mounted where vLLM runs)",))
    (found.certain if not_an_id or offline else found.uncertain).append(problem)


def _release_flags(vocab: CliVocabulary | None, release: Release | None) -> frozenset[str]:
    """The release's flags (none known: only underscores are read as dashes)."""
    if vocab is None or release is None or not vocab.covers(release):
        return frozenset()
    return vocab.flags_at(release)


def _launch(snapshot: Snapshot) -> LaunchSpec | None:
    try:
        return parse_launch(list(snapshot.argv))
    except ArgvError:
        return None


def launch_flags(snapshot: Snapshot) -> list[str]:
    """The flags of the snapshot's command line, as written (values aside)."""
    spec = _launch(snapshot)
    return [] if spec is None else [item.flag for item in spec.items if isinstance(item, Option)]


def _certain(diag: Diagnosis, snapshot: Snapshot) -> bool:
    """Whether a latent problem happens whatever the facts the snapshot lacks turn out to be."""
    if diag.cause == LATENT_MARLIN:  # releases from 0.33 pad some Marlin tiles
        return diag.config.get("marlin_path") is True \
            and parse_release(snapshot.vllm_version) is not None
    if diag.cause == LATENT_MTP:
        if diag.config.get("mtp_in_use") is not True:
            return False
        layout = snapshot.model.mtp if snapshot.model else None
        if snapshot_release(snapshot) is not None or layout is None:
            return True
        return bool(layout.releases) and all(
            layout.uncovered_at(r) or layout.ignored_quantized_at(r) for r in layout.releases)
    return True


def _from_latent(diag: Diagnosis) -> PreflightProblem:
    return PreflightProblem(
        KINDS.get(diag.cause, diag.cause), diag.title, diag.summary, diag.details, diag.config,
        tuple(r.summary for r in diag.remedies if r.applicable is not False))
