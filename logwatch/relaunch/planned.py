"""The configuration a plan leads to, read back as a launch would read it, so that the plan is
checked by the same prediction as any launch before anything is started: the variant's or the
overlay's model directory, the planned argv and environment, the same GPU and vLLM release.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import replace

from logwatch.core.checkpoint.files import CheckpointFiles
from logwatch.core.diagnosis.model import Diagnosis
from logwatch.core.diagnosis.preflight import NOT_READ, NotRead, predict
from logwatch.core.remedy.plan import Check, Launch, Plan, apply_plan, plan_relaunch
from logwatch.core.snapshot.argv import ArgvError, launch_from_summary, parse_launch
from logwatch.core.snapshot.model import Snapshot
from logwatch.core.snapshot.vllm_cli import CliVocabulary
from logwatch.host.capture import take_snapshot
from logwatch.host.checkpoint_files import read_checkpoint
from logwatch.host.overlay import make_overlay
from logwatch.host.variants import variant_candidates
from logwatch.host.vllm_cli_data import shipped_vocabulary


def planned_snapshot(plan: Plan, snapshot: Snapshot, state_dir: str | None = None
                     ) -> Planned | None:
    """The snapshot after the plan and its model directory's files, read while they are there
    (its overlay made under `state_dir`, or in a directory of its own that is removed
    afterwards); None when the launch's argv is not known."""
    try:
        spec = parse_launch(list(snapshot.argv))
    except ArgvError:
        if snapshot.model is None:
            return None
        spec = launch_from_summary(snapshot.launch, snapshot.model.path)
    if plan.overlay is None:
        return _read(plan, snapshot, Launch(spec, dict(snapshot.env)), None)
    if state_dir is not None:
        overlay = str(make_overlay(state_dir, plan))
        return _read(plan, snapshot, Launch(spec, dict(snapshot.env)), overlay)
    with tempfile.TemporaryDirectory(prefix="logwatch-plan-") as scratch:
        overlay = str(make_overlay(scratch, plan))
        return _read(plan, snapshot, Launch(spec, dict(snapshot.env)), overlay)


Planned = tuple[Snapshot, CheckpointFiles | NotRead | None]


def _read(plan: Plan, snapshot: Snapshot, launch: Launch, overlay: str | None) -> Planned:
    after = apply_plan(plan, launch, overlay)
    changed = next((c for c in plan.changes if c.kind == "model"), None)
    # the directory read is the one the plan serves, or the one the snapshot read (the
    # argv may name the model as another host or the hub knows it)
    model_dir = (overlay if changed is not None and changed.value is None else
                 changed.value if changed is not None else
                 snapshot.model.path if snapshot.model else after.spec.model)
    new = take_snapshot(argv=after.spec.argv(), env=after.env, model_dir=model_dir,
                        gpu=snapshot.gpu)
    # an overlay links the checkpoint's own files; nothing read without a model directory
    files = read_checkpoint(new.model.path) if new.model is not None else NOT_READ
    return replace(new, vllm_version=snapshot.vllm_version), files


def with_preflight(plan: Plan, snapshot: Snapshot, vocab: CliVocabulary | None = None) -> Plan:
    """The plan with a `preflight` check: `logwatch preflight`'s prediction
    (core.diagnosis.preflight)
    for the configuration it leads to, read back, finds no failure; unknown when it cannot be
    read back. `vocab`: the releases' flags (default: the shipped ones)."""
    planned = planned_snapshot(plan, snapshot)
    if planned is None:
        check = Check("preflight", None, "neither the launch's command line nor its model "
                      "directory is known: the planned configuration could not be read back")
    else:
        after, files = planned
        found = predict(after, vocab if vocab is not None else shipped_vocabulary(), files,
                        os.path.isfile)
        check = Check("preflight", not found.problems, "the planned configuration, read "
                      "back, is predicted to start" if not found.problems else "the planned "
                      "configuration would still hit: " + "; ".join(
                          p.title for p in found.problems))
    return replace(plan, checks=(*plan.checks, check))


def checked_plan(diagnoses: Sequence[Diagnosis], snapshot: Snapshot) -> Plan | None:
    """The plan for these diagnoses with the variants beside the snapshot's model and the
    shipped flags of each release, pre-flight checked when it changes something and nothing
    refused it; None when a relaunch fixes none of them."""
    model = snapshot.model
    vocab = shipped_vocabulary()
    plan = plan_relaunch(diagnoses, snapshot,
                         variant_candidates(model.path) if model is not None else {},
                         vocab=vocab)
    if plan is not None and plan.changes and not plan.refused:
        plan = with_preflight(plan, snapshot, vocab)
    return plan
