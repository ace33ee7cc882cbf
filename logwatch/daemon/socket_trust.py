"""Whether the control socket's path can be trusted, checked the same way by the daemon that
binds it and by the clients that connect to it.

A path is trusted when every directory on it belongs to us or to root and nobody else can write
to it (a sticky directory such as /tmp is allowed above the socket's own directory: others
cannot rename or remove what we own there), the socket's directory is not a symbolic link, and
the socket is a socket owned by us or root. Anyone else able to write on the path could swap
in a server of their own, read our queries and answer with whatever they like.
"""

from __future__ import annotations

import os
import pwd
import socket
import stat
import struct
from pathlib import Path

from logwatch.paths import fallback_runtime_dir as fallback_runtime_dir  # re-exported


class UnsafePath(Exception):
    """A directory logwatch would write in could be controlled by someone else."""


class UnsafeSocketPath(UnsafePath):
    """The socket or a directory on its path could be controlled by someone else."""


def trusted_uids() -> frozenset[int]:
    return frozenset({os.geteuid(), 0})


def _owner(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _refuse(path: str, why: str, remedy: str, label: str = "") -> UnsafePath:
    if label:
        return UnsafePath(f"{label}: {path} {why}; {remedy}")
    return UnsafeSocketPath(f"control socket: {path} {why}; {remedy}")


def _check_entry(path: str, st: os.stat_result, last: bool, label: str) -> None:
    if st.st_uid not in trusted_uids():
        raise _refuse(path, f"belongs to {_owner(st.st_uid)}, not to you or root",
                      "someone else may have made it to catch what is written there: remove "
                      "it, or choose a directory of your own" if label else
                      "someone else may have made it to catch your queries: remove it, or "
                      "point XDG_RUNTIME_DIR or --socket at a directory of your own", label)
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, "is not a directory", "move it away", label)
    writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and (last or not st.st_mode & stat.S_ISVTX):
        raise _refuse(path, f"is writable by others (mode {stat.S_IMODE(st.st_mode):04o})",
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
                raise _refuse(path, f"is a symbolic link owned by {_owner(st.st_uid)}",
                              "the directory must be a real directory: remove the link", label)
            if st.st_uid not in trusted_uids():  # its owner can point it elsewhere later
                raise _refuse(path, f"is a symbolic link owned by {_owner(st.st_uid)}",
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


def check_socket(path: Path) -> None:
    """Before a client connects: the directory as above, and the socket itself a socket (not a
    link) owned by us or root. FileNotFoundError if either does not exist."""
    check_directory(path.parent)
    st = os.lstat(path)
    if not stat.S_ISSOCK(st.st_mode):
        raise _refuse(str(path), "is not a socket", "is the daemon running? (see --socket)")
    if st.st_uid not in trusted_uids():
        raise _refuse(str(path), f"belongs to {_owner(st.st_uid)}, not to you or root",
                      "refusing to talk to a daemon someone else started there")


def who_may_connect(path: Path) -> str:
    """Who the file modes let connect to the socket at `path` (its directory's when the
    socket itself cannot be seen), for a client that was refused."""
    import grp

    for place in (path, path.parent):
        try:
            st = os.stat(place)
        except OSError:
            continue
        try:
            group = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            group = str(st.st_gid)
        names = ["root"] if st.st_uid == 0 else ["root", _owner(st.st_uid)]
        bits = (stat.S_IWGRP if place == path else stat.S_IXGRP)
        if st.st_mode & bits:
            names.append(f"members of group {group}")
        who = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
        return f"{who} may connect"
    return "ask the daemon's operator to add you to its socket.group"


def peer_uid(sock: socket.socket | None) -> int | None:
    """The uid of the process at the other end of a Unix socket, as the kernel says
    (SO_PEERCRED); None where it cannot be asked."""
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    return int(struct.unpack("3i", creds)[1])


def check_peer(uid: int, path: Path) -> None:
    """The process that accepted our connection must run as us or root."""
    if uid not in trusted_uids():
        raise _refuse(str(path), f"is served by a process of {_owner(uid)}",
                      "refusing to talk to a daemon someone else started")


def prepare_directory(directory: Path, gid: int | None = None) -> None:
    """For the daemon: make the missing directories of the socket's path, mode 0700; the
    socket's own directory 0750 and in group `gid` when a group may connect (members must be
    able to reach the socket, whose own mode and group decide who may connect). A directory
    that exists is checked, not changed. Then the whole path is checked."""
    written = Path(os.path.abspath(directory))
    missing = []
    for path in (written, *written.parents):
        if os.path.lexists(path):
            break
        missing.append(path)
    for path in reversed(missing):
        check_directory(path.parent, holds_socket=False)  # never create inside theirs
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:  # someone was faster: the check below decides
            continue
        # O_NOFOLLOW: never change the mode of whatever a link put there could point to
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            if path == written and gid is not None:
                os.fchown(fd, -1, gid)
                os.fchmod(fd, 0o750)
            else:
                os.fchmod(fd, 0o700)  # whatever the umask
        finally:
            os.close(fd)
    check_directory(written)


def group_cannot_reach(directory: Path, gid: int) -> bool:
    """Whether members of group `gid` lack search permission on the socket's directory (a
    RuntimeDirectoryMode=0750 owned by root:root, say)."""
    st = os.stat(directory)
    if st.st_mode & stat.S_IXOTH:
        return False
    return not (st.st_gid == gid and st.st_mode & stat.S_IXGRP)
