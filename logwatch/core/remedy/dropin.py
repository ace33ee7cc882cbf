"""The systemd drop-in that relaunches a unit with a plan's argv and environment, written so
that systemd hands the process exactly these words.

systemd reads a unit line with its own rules (systemd.syntax(7), systemd.service(5)
"Command lines"): `%` starts a specifier and `$` a variable in ExecStart=, a double-quoted
word takes C escapes. Every word is therefore double-quoted, with `\\`, `"` and control
characters escaped, `%` doubled everywhere and `$` doubled in the command line; nothing in
it is left for systemd to interpret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

DROPIN_NAME = "90-logwatch-relaunch.conf"
HOLD_NAME = "91-logwatch-hold-restarts.conf"  # a runtime drop-in: gone at the next boot
MARKER = "# Written by logwatch"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class DropinError(ValueError):
    """A word or a variable systemd could not be given exactly."""


def _escaped(text: str, dollar: bool) -> str:
    if "\x00" in text:
        raise DropinError("a NUL cannot be passed through a unit file")
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "%":
            out.append("%%")
        elif ch == "$" and dollar:
            out.append("$$")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def exec_line(argv: Sequence[str]) -> str:
    """`ExecStart=` for this argv, every word quoted for systemd."""
    if not argv or not argv[0]:
        raise DropinError("an empty command line")
    return "ExecStart=" + " ".join(_escaped(word, dollar=True) for word in argv)


def environment_line(name: str, value: str) -> str:
    if not _ENV_NAME.fullmatch(name):
        raise DropinError(f"{name!r} is not a variable name systemd accepts")
    return "Environment=" + _escaped(f"{name}={value}", dollar=False)


def relaunch_dropin(argv: Sequence[str], env: Mapping[str, str], unset: Sequence[str],
                    plan_id: str, causes: Sequence[str]) -> str:
    """The drop-in's text: the command line replaced (an empty ExecStart= first, so the
    unit's own is dropped), variables set or unset, and a header saying whose it is."""
    for name in unset:
        if not _ENV_NAME.fullmatch(name):
            raise DropinError(f"{name!r} is not a variable name systemd accepts")
    lines = [f"{MARKER} for plan {plan_id} ({', '.join(causes)}).",
             "# Removed by logwatch's rollback; deleting this file and running",
             "# `systemctl daemon-reload` undoes it by hand. Other drop-ins are not touched.",
             "[Service]", "ExecStart=", exec_line(argv)]
    lines += [environment_line(name, value) for name, value in sorted(env.items())]
    lines += [f"UnsetEnvironment={name}" for name in unset]
    return "\n".join(lines) + "\n"


def hold_dropin(action: str) -> str:
    """A drop-in that keeps the manager from restarting the unit by itself while logwatch's
    action `action` stops, restarts and verifies it (the unit's own Restart= comes back when
    the action ends and the file goes)."""
    return (f"{MARKER} while action {action} runs: the unit's own Restart= comes back when\n"
            "# it ends (this file is under /run and goes at the next boot in any case).\n"
            "[Service]\nRestart=no\n")


def without_own_dropin(cat_text: str, keep_relaunch: bool = False) -> str:
    """`systemctl cat UNIT` output without logwatch's drop-ins: the unit as the operator
    wrote it (each file there starts with a `# /path` line); `keep_relaunch` keeps the
    relaunch drop-in (the launch in force) and leaves out only the restart hold."""
    own = ("/" + HOLD_NAME,) if keep_relaunch else ("/" + DROPIN_NAME, "/" + HOLD_NAME)
    out: list[str] = []
    skipping = False
    for line in cat_text.splitlines():
        if line.startswith("# /"):
            skipping = line.rstrip().endswith(own)
        if not skipping:
            out.append(line)
    return "\n".join(out) + "\n"
