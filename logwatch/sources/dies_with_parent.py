"""Start a child that dies with the process that started it, even when that one is killed
with SIGKILL: on Linux, the child is started through a tiny Python shim that sets
PR_SET_PDEATHSIG to SIGKILL on itself and then execs the command (same pid, so the child is
the command itself). No `preexec_fn` runs in a process that has threads.

SIGKILL, not SIGTERM: a vLLM stuck in NCCL teardown ignores SIGTERM, and a supervisor
restarted by systemd must not find the last vLLM still holding the GPUs and the port.

The death signal reaches the command only, not what it started (vLLM's EngineCore and its
workers, in the command's process group). A watcher (`GroupWatch`) covers them: a tiny process
of its own session holding the read end of a pipe only we write to; when we die, however, the
pipe closes and it kills the command's whole process group. We stop it before we reap the
command, so it never outlives the group it watches.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
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


# argv: PGID. Reads its stdin (a pipe only the run writes to) until the run is gone, then
# kills the group. A marker line first: a test tells the watcher from the command by it.
WATCHER = """\
# logwatch: the run's child group watcher
import os, signal, sys
group = int(sys.argv[1])
while os.read(0, 4096):
    pass
try:
    os.killpg(group, signal.SIGKILL)
except OSError:
    pass
"""


class GroupWatch:
    """Kill process group `group` with SIGKILL if this process dies before `stop()`."""

    def __init__(self, group: int) -> None:
        read_end, self._write_end = os.pipe()  # neither inherited by the command
        try:
            self._watcher: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", WATCHER, str(group)], stdin=read_end,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            self._watcher = None  # the death signal still covers the command itself
        finally:
            os.close(read_end)

    def stop(self) -> None:
        """The group is ours to end now: the watcher goes first (before the command is
        reaped, so that a pid of the group is never another's when it acts)."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            with contextlib.suppress(ProcessLookupError):
                watcher.kill()
            watcher.wait()
        if self._write_end >= 0:
            os.close(self._write_end)
            self._write_end = -1
