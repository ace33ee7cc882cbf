"""Whether a directory logwatch writes in can be trusted: every directory on its path belongs
to us or to root and nobody else can write to it (a sticky directory such as /tmp is allowed
above the last one: others cannot rename or remove what we own there), and the last one is not
a symbolic link. Anyone else able to write on the path could swap in a link and have logwatch
write where they chose. The control socket's directory (daemon/socket_trust.py), the export
directory and the relaunch state directory are checked here.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path


class UnsafePath(Exception):
    """A directory logwatch would write in could be controlled by someone else."""


class UnsafeSocketPath(UnsafePath):
    """The socket or a directory on its path could be controlled by someone else."""


def trusted_uids() -> frozenset[int]:
    return frozenset({os.geteuid(), 0})


def owner_name(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def refusal(path: str, why: str, remedy: str, label: str = "") -> UnsafePath:
    if label:
        return UnsafePath(f"{label}: {path} {why}; {remedy}")
    return UnsafeSocketPath(f"control socket: {path} {why}; {remedy}")


def _check_entry(path: str, st: os.stat_result, last: bool, label: str) -> None:
    if st.st_uid not in trusted_uids():
        raise refusal(path, f"belongs to {owner_name(st.st_uid)}, not to you or root",
                      "someone else may have made it to catch what is written there: remove "
                      "it, or choose a directory of your own" if label else
                      "someone else may have made it to catch your queries: remove it, or "
                      "point XDG_RUNTIME_DIR or --socket at a directory of your own", label)
    if not stat.S_ISDIR(st.st_mode):
        raise refusal(path, "is not a directory", "move it away", label)
    writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and (last or not st.st_mode & stat.S_ISVTX):
        raise refusal(path, f"is writable by others (mode {stat.S_IMODE(st.st_mode):04o})",
                      f"anyone could put a link there: chmod go-w {path}" if label else
                      f"anyone could replace the socket: chmod go-w {path}", label)


def _walk(directory: str, holds_socket: bool, label: str = "") -> None:
    parts = Path(directory).parts
    for depth in range(1, len(parts) + 1):
        path = os.path.join(*parts[:depth])
        last = holds_socket and depth == len(parts)
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            if last:
                raise refusal(path, f"is a symbolic link owned by {owner_name(st.st_uid)}",
                              "the directory must be a real directory: remove the link", label)
            if st.st_uid not in trusted_uids():  # its owner can point it elsewhere later
                raise refusal(path, f"is a symbolic link owned by {owner_name(st.st_uid)}",
                              "remove it", label)
            st = os.stat(path)
        _check_entry(path, st, last, label)


def check_directory(directory: Path, holds_socket: bool = True, label: str = "") -> None:
    """Refuse (UnsafeSocketPath) a socket directory someone else could control; every directory
    on the path is checked as written and as resolved. FileNotFoundError if it does not exist.
    `holds_socket` False: a directory above it, which may be sticky like /tmp. `label`: what
    the directory is for, when not the socket (UnsafePath then): the export's, say."""
    written = os.path.abspath(directory)
    _walk(written, holds_socket, label)
    resolved = os.path.realpath(written)
    if resolved != written:
        _walk(resolved, holds_socket, label)
