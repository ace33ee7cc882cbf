"""Start a child that dies with the process that started it, even when that one is killed
with SIGKILL: on Linux, the child is started through a tiny Python shim that sets
PR_SET_PDEATHSIG to SIGKILL on itself and then execs the command (same pid, so the child is
the command itself). No `preexec_fn` runs in a process that has threads.

SIGKILL, not SIGTERM: a vLLM stuck in NCCL teardown ignores SIGTERM, and a supervisor
restarted by systemd must not find the last vLLM still holding the GPUs and the port.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Mapping, Sequence

# argv: PARENT_PID SIGNAL LC_CTYPE_WAS ARGV... (LC_CTYPE_WAS: "-" unset, else "+" and its value:
# Python may coerce a C locale at start-up, and the command must get the environment given)
SHIM = """\
import ctypes, os, signal, sys
parent, death, ctype, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
env = dict(os.environ)
if ctype == "-":
    env.pop("LC_CTYPE", None)
else:
    env["LC_CTYPE"] = ctype[1:]
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, death)
except (OSError, AttributeError):
    pass
if os.getppid() != parent:
    os._exit(128 + death)
try:
    os.execvpe(argv[0], argv, env)
except OSError as exc:
    sys.stderr.write("cannot start %s: %s\\n" % (argv[0], exc.strerror or exc))
    os._exit(127)
"""


def shim_available() -> bool:
    return sys.platform.startswith("linux") and bool(sys.executable)


def wrapped(argv: Sequence[str], env: Mapping[str, str] | None,
            death: int = signal.SIGKILL) -> list[str]:
    """The command line that starts `argv` through the shim (`argv` itself where there is
    no shim), `death` sent to it when we die. Raises FileNotFoundError/PermissionError as
    starting `argv` would, so that a missing command is said before anything starts."""
    if not shim_available():
        return list(argv)
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    if shutil.which(argv[0], path=path) is None:
        error = PermissionError if os.sep in argv[0] and os.path.exists(argv[0]) \
            else FileNotFoundError
        raise error(13 if error is PermissionError else 2,
                    "Permission denied" if error is PermissionError
                    else "No such file or directory")
    ctype = (env if env is not None else os.environ).get("LC_CTYPE")
    return [sys.executable, "-I", "-S", "-c", SHIM, str(os.getpid()), str(int(death)),
            "-" if ctype is None else "+" + ctype, *argv]
