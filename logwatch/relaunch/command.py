"""Relaunch through a site's own command (for hosts that start vLLM some other way): an argv
template from the configuration, run without a shell. Its placeholders name plan fields only,
so nothing read from a log reaches the command line:

  {model}      the model directory the plan serves (the variant, or the overlay)
  {argv}       the whole corrected command line, one word per argument
  {argv_json}  the same as one JSON array; {env_json} the variables the plan sets or unsets
               (unset ones as null)
  {plan}       the plan's id

`{argv}` stands alone as a word; every other placeholder may sit inside a word.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from logwatch.core.remedy.plan import Launch, Plan, apply_plan
from logwatch.core.settings.command_template import check_template

COMMAND_TIMEOUT_S = 300.0


class CommandError(RuntimeError):
    """The template is not usable, or the command failed; the message says which."""


def render(template: Sequence[str], plan: Plan, launch: Launch, overlay_dir: str | None
           ) -> list[str]:
    """The command for this plan: the template's words with the plan's fields put in."""
    problems = check_template(template)
    if problems:
        raise CommandError("; ".join(problems))
    after = apply_plan(plan, launch, overlay_dir)
    argv = after.spec.argv()
    env: dict[str, str | None] = {c.name: c.value for c in plan.changes
                                  if c.kind in ("env", "unset_env")}
    values = {"model": after.spec.model or "", "argv_json": json.dumps(argv),
              "env_json": json.dumps(env, sort_keys=True), "plan": plan.digest}
    out: list[str] = []
    for word in template:
        if word == "{argv}":
            out.extend(argv)
        else:
            out.append(word.format_map(values))
    return out


@dataclass(frozen=True, slots=True)
class SiteCommand:
    """`apply` and `undo` templates; `undo` may use {plan} only of the plan fields that
    make sense after the fact (the others are the plan's, as when it was applied)."""

    apply_template: tuple[str, ...]
    undo_template: tuple[str, ...]
    timeout: float = COMMAND_TIMEOUT_S

    def apply(self, plan: Plan, launch: Launch, overlay_dir: str | None = None) -> Launch:
        self._run(render(self.apply_template, plan, launch, overlay_dir))
        return apply_plan(plan, launch, overlay_dir)

    def undo(self, plan: Plan, launch: Launch, overlay_dir: str | None = None) -> None:
        self._run(render(self.undo_template, plan, launch, overlay_dir))

    def _run(self, argv: list[str]) -> None:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout,
                                  check=False, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CommandError(f"{argv[0]}: {exc}") from exc
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
            raise CommandError(f"{argv[0]} exited {done.returncode}"
                               + (f": {tail[0][:200]}" if tail else ""))
