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
import socket
import stat
import struct
from pathlib import Path

from logwatch.host.trusted_dirs import (
    check_directory,
    owner_name,
    refusal,
    trusted_uids,
)
from logwatch.paths import fallback_runtime_dir as fallback_runtime_dir  # re-exported


def check_socket(path: Path) -> None:
    """Before a client connects: the directory as above, and the socket itself a socket (not a
    link) owned by us or root. FileNotFoundError if either does not exist."""
    check_directory(path.parent)
    st = os.lstat(path)
    if not stat.S_ISSOCK(st.st_mode):
        raise refusal(str(path), "is not a socket", "is the daemon running? (see --socket)")
    if st.st_uid not in trusted_uids():
        raise refusal(str(path), f"belongs to {owner_name(st.st_uid)}, not to you or root",
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
        names = ["root"] if st.st_uid == 0 else ["root", owner_name(st.st_uid)]
        bits = (stat.S_IWGRP if place == path else stat.S_IXGRP)
        if st.st_mode & bits:
            names.append(f"members of group {group}")
        who = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
        return f"{who} may connect"
    return "ask the daemon's operator to add you to its socket.group"


def peer_credentials(sock: socket.socket | None) -> tuple[int, int] | None:
    """(uid, gid) of the process at the other end of a Unix socket, as the kernel says
    (SO_PEERCRED); None where it cannot be asked."""
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    _, uid, gid = struct.unpack("3i", creds)
    return int(uid), int(gid)


def peer_uid(sock: socket.socket | None) -> int | None:
    """The uid of the process at the other end of a Unix socket; None where it cannot be
    asked."""
    creds = peer_credentials(sock)
    return creds[0] if creds is not None else None


def check_peer(uid: int, path: Path) -> None:
    """The process that accepted our connection must run as us or root."""
    if uid not in trusted_uids():
        raise refusal(str(path), f"is served by a process of {owner_name(uid)}",
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
