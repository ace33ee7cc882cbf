"""The guard that keeps the tests off the host's logwatch: nothing a test starts may create,
bind or connect to anything under the system paths a real installation uses (tests run as
root in CI, where the default socket is /run/logwatch/logwatch.sock).

Two checks, both wired in conftest.py: what exists under those paths is compared before and
after every test and over the whole session (this sees subprocesses, systemd units and
DuckDB's own file calls), and an audit hook refuses the test process itself a socket bind or
connect, a directory or a file opened for writing there (with the stack that tried)."""

from __future__ import annotations

import os
import socket
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SYSTEM_PATHS = (Path("/run/logwatch"), Path("/var/lib/logwatch"), Path("/etc/logwatch"))
_PREFIXES = tuple(str(p) for p in SYSTEM_PATHS)


def is_system_path(path: str | os.PathLike[str]) -> bool:
    """`path` is one of the system paths or lies under one (spelled absolutely)."""
    text = os.path.normpath(os.fspath(path))
    return any(text == prefix or text.startswith(prefix + "/") for prefix in _PREFIXES)


def system_state() -> dict[str, tuple[int, int]]:
    """Everything under the system paths: path -> (inode, file type bits). Nothing at all on
    a clean machine; a host with logwatch installed keeps its entries, only changes count."""
    found: dict[str, tuple[int, int]] = {}
    for top in SYSTEM_PATHS:
        for path in (top, *(top.rglob("*") if top.is_dir() else ())):
            try:
                st = path.lstat()
            except OSError:
                continue
            found[str(path)] = (st.st_ino, st.st_mode & 0o170000)
    return found


def changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
            ) -> list[str]:
    """What appeared, went or was replaced under the system paths, one line each."""
    lines = [f"created {p}" for p in sorted(after.keys() - before.keys())]
    lines += [f"removed {p}" for p in sorted(before.keys() - after.keys())]
    lines += [f"replaced {p}" for p in sorted(before.keys() & after.keys())
              if before[p] != after[p]]
    return lines


def holders(paths: list[str]) -> dict[str, list[tuple[int, str, str]]]:
    """The processes that have each path open, as a bound socket or a file:
    path -> [(pid, command line, working directory)]. Read from /proc, as root sees it."""
    wanted = set(paths)
    links = {path: {path} for path in wanted}
    try:
        with open("/proc/net/unix") as table:
            for row in table.read().splitlines()[1:]:
                fields = row.split()
                if len(fields) >= 8 and fields[7] in wanted:
                    links[fields[7]].add(f"socket:[{fields[6]}]")
    except OSError:
        pass
    found: dict[str, list[tuple[int, str, str]]] = {path: [] for path in wanted}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            opened = {_link(fd) for fd in list((proc / "fd").iterdir())}
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace").strip()
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue  # gone, or not ours to read
        for path, names in links.items():
            if opened & names:
                found[path].append((int(proc.name), command, cwd))
    return found


def _link(fd: Path) -> str:
    try:
        return os.readlink(fd)
    except OSError:  # closed meanwhile
        return ""


Holder = tuple[int, str, str]


@dataclass(frozen=True)
class Snapshot:
    """What exists under the system paths, and (where anything does) who holds it open."""

    state: dict[str, tuple[int, int]]
    held: dict[str, list[Holder]]

    @classmethod
    def take(cls) -> Snapshot:
        state = system_state()
        return cls(state, holders(list(state)) if state else {})


def _theirs(held: list[Holder], root: Path) -> bool:
    """Held, and only by processes of another checkout (another engineer's test run on a
    shared machine; never the case in CI, which runs alone)."""
    return bool(held) and not any(sys.executable in command or cwd.startswith(str(root))
                                  for _, command, cwd in held)


def blame(before: Snapshot, after: Snapshot, root: Path) -> tuple[list[str], list[str]]:
    """The changes between two snapshots: (this session's, another checkout's with who).
    A change is another checkout's only where the path is held by its processes alone (now,
    or before it went), or is an entry nobody held that went (the tests make none there to
    remove); a directory only where everything that changed under it is."""
    ours: list[str] = []
    theirs: dict[str, str] = {}
    for line in changes(before.state, after.state):
        path = line.split(" ", 1)[1]
        held = before.held.get(path, []) if line.startswith("removed") else after.held.get(
            path, [])
        if _theirs(held, root):
            theirs[path] = line + "".join(f"\n    by pid {pid}: {command[:200]} (in {cwd})"
                                          for pid, command, cwd in held)
        elif line.startswith("removed") and not held:  # the host's own, or a stale socket
            theirs[path] = line + " (it was there before the test, held by nobody)"
        else:
            ours.append(line)
    for line in list(ours):
        path = line.split(" ", 1)[1]
        under = [p for p in theirs if p.startswith(path + "/")]
        if under and not any(o.split(" ", 1)[1].startswith(path + "/") for o in ours):
            ours.remove(line)
            theirs[path] = line + " (for the above)"
    return ours, list(theirs.values())


class SystemPathTouched(PermissionError):
    """A test process tried to use a system path (raised by the audit hook)."""


# what the audit hook refused, with where: read and cleared by the per-test check
refused: list[str] = []
_PATH_EVENTS = frozenset({"os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink",
                          "os.link", "os.chmod", "os.chown"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _audit(event: str, args: tuple[Any, ...]) -> None:
    target: Any = None
    if event in ("socket.bind", "socket.connect"):
        sock, address = args[0], args[1]
        if getattr(sock, "family", None) == socket.AF_UNIX and isinstance(address,
                                                                            str | bytes):
            target = os.fsdecode(address)
    elif event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS)
        if writing and isinstance(path, str | bytes):
            target = os.fsdecode(path)
    elif event in _PATH_EVENTS and isinstance(args[0], str | bytes):
        target = os.fsdecode(args[0])
    if target is None or not target.startswith("/") or not is_system_path(target):
        return
    where = "".join(traceback.format_stack(limit=12)[:-1])
    refused.append(f"{event} {target}\n{where}")
    raise SystemPathTouched(f"hermetic tests: {event} on {target} refused (a system path)")


_installed = False


def install_audit_hook() -> None:
    """Once per process (audit hooks cannot be removed)."""
    global _installed
    if not _installed:
        sys.addaudithook(_audit)
        _installed = True
