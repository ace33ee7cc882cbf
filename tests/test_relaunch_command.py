"""Relaunch through a site's own command: the template's placeholders filled from the plan
only, run without a shell, as a real child process that records what it was given."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from logwatch.core.remedy.plan import Change, Launch, Plan
from logwatch.core.settings.command_template import check_template
from logwatch.core.snapshot.argv import parse_launch
from logwatch.relaunch.command import CommandError, SiteCommand

RECORD = "import json, sys; json.dump(sys.argv[1:], open(sys.argv[1], 'w'))"
HOSTILE_MODEL = "/models/$(touch {pwned}); `id` 'q' \"d\" %n"


def plan_to(model: str) -> Plan:
    return Plan(("marlin_weight_only_tile",), changes=(
        Change("model", "model", model, "the variant"),
        Change("flag", "--linear-backend", "flashinfer_cutlass", "native FP4"),
        Change("env", "VLLM_NVFP4_GEMM_BACKEND", "flashinfer-cutlass", "native FP4"),
        Change("unset_env", "VLLM_USE_FLASHINFER_MOE_FP4", None, "a flag now")))


def test_the_command_gets_the_plans_fields_as_words_and_runs_no_shell(tmp_path: Path) -> None:
    pwned = tmp_path / "pwned"
    model = HOSTILE_MODEL.format(pwned=pwned)  # a directory name an operator could have
    record = tmp_path / "record.json"
    command = SiteCommand(
        (sys.executable, "-c", RECORD, str(record), "--model={model}", "{argv}", "{env_json}",
         "plan {plan}"), (sys.executable, "-c", RECORD, str(record), "undo", "{plan}"))
    launch = Launch(parse_launch(["vllm", "serve", "/models/a16", "-tp", "4"]))
    plan = plan_to(model)
    started = command.apply(plan, launch)
    got = json.loads(record.read_text())
    argv = started.spec.argv()
    assert got == [str(record), f"--model={model}", *argv,
                   json.dumps({"VLLM_NVFP4_GEMM_BACKEND": "flashinfer-cutlass",
                               "VLLM_USE_FLASHINFER_MOE_FP4": None}, sort_keys=True),
                   f"plan {plan.digest}"]
    assert argv[2] == model and "--linear-backend" in argv
    assert not pwned.exists()
    command.undo(plan, launch)
    assert json.loads(record.read_text()) == [str(record), "undo", plan.digest]


@pytest.mark.parametrize(("template", "problem"), [
    ((), "the command is empty"),
    (("restart", "{unit}"), "{unit} is not one of"),
    (("restart", "--argv={argv}"), "{argv} must be a word of its own"),
    (("restart", "{model"), "expected '}'"),
])
def test_a_template_naming_anything_else_is_refused(template: tuple[str, ...],
                                                    problem: str) -> None:
    assert any(problem in p for p in check_template(template))
    with pytest.raises(CommandError):
        SiteCommand(template, ("x",)).apply(plan_to("/m"), Launch(parse_launch(
            ["vllm", "serve", "/m"])))


def test_a_failing_command_says_how(tmp_path: Path) -> None:
    command = SiteCommand((sys.executable, "-c", "import sys; sys.exit('no such unit')"),
                          ("true",))
    with pytest.raises(CommandError, match="exited 1: no such unit"):
        command.apply(plan_to("/m"), Launch(parse_launch(["vllm", "serve", "/m"])))
    missing = SiteCommand((str(tmp_path / "nope"),), ("true",))
    with pytest.raises(CommandError, match="nope"):
        missing.apply(plan_to("/m"), Launch(parse_launch(["vllm", "serve", "/m"])))
