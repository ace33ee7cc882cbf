"""The placeholders a site's relaunch command may use, and the check of a template (the
configuration checks it before the daemon starts; relaunch/command.py fills it in)."""

from __future__ import annotations

import string
from collections.abc import Sequence

PLACEHOLDERS = frozenset({"model", "argv", "argv_json", "env_json", "plan"})


def check_template(template: Sequence[str]) -> list[str]:
    """The problems of a command template (empty: usable)."""
    problems = []
    if not template or not template[0]:
        problems.append("the command is empty")
    for word in template:
        if not isinstance(word, str):
            problems.append(f"{word!r} is not a string")
            continue
        try:
            fields = [name for _, name, _, _ in string.Formatter().parse(word) if name is not None]
        except ValueError as exc:
            problems.append(f"{word!r}: {exc}")
            continue
        for name in fields:
            if name not in PLACEHOLDERS:
                problems.append(f"{word!r}: {{{name}}} is not one of "
                                + ", ".join(f"{{{p}}}" for p in sorted(PLACEHOLDERS)))
        if "argv" in fields and word != "{argv}":
            problems.append(f"{word!r}: {{argv}} must be a word of its own")
    return problems
