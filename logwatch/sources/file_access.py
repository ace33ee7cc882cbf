"""Read a log file only if whoever could have put it there could read it themselves.

The daemon usually runs as root; the log directory often belongs to the user vLLM runs as.
Anyone who can write that directory can replace `vllm.log` with a symbolic (or hard) link to
`/etc/shadow` or another user's private file, and logwatch would read it for them and hand
its lines to the history and the socket's `lines` events. So a file is read only if every
user who can write a directory on its way (the followed path's directory, and the directory
of each link it resolves through) could read that file without logwatch. Directories that
only root or the daemon's own user can write put no condition. A link the operator made in
a root-owned directory to the real log (`current.log -> vllm-DATE.log`) passes: vLLM's user
can read its own log.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

MAX_LINKS = 40  # as the kernel's limit on a path's symbolic links


def _in_group(uid: int, gid: int) -> bool:
    try:
        user = pwd.getpwuid(uid)
    except KeyError:
        return False
    if user.pw_gid == gid:
        return True
    try:
        return user.pw_name in grp.getgrgid(gid).gr_mem
    except KeyError:
        return False


def _user_can_read(uid: int, file: os.stat_result) -> bool:
    if file.st_uid == uid:
        return bool(file.st_mode & stat.S_IRUSR)
    if _in_group(uid, file.st_gid) and file.st_mode & stat.S_IRGRP:
        return True
    return bool(file.st_mode & stat.S_IROTH)


def _members(gid: int) -> set[int]:
    """The users whose primary group is `gid` and those the group lists."""
    members = {user.pw_uid for user in pwd.getpwall() if user.pw_gid == gid}
    try:
        names = grp.getgrgid(gid).gr_mem
    except KeyError:
        return members
    for name in names:
        try:
            members.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            continue
    return members


def writers_could_read(directory: os.stat_result, file: os.stat_result,
                       me: int | None = None) -> str | None:
    """None when everyone who can write `directory` could read `file`; else who cannot."""
    trusted = {0, os.geteuid() if me is None else me}
    if directory.st_mode & stat.S_IWOTH and not file.st_mode & stat.S_IROTH:
        return "its directory is writable by every user, and the file is not readable by all"
    writers: set[int] = set()
    if directory.st_mode & stat.S_IWUSR:
        writers.add(directory.st_uid)
    if directory.st_mode & stat.S_IWGRP:
        writers |= _members(directory.st_gid)
    for uid in sorted(writers - trusted):
        if not _user_can_read(uid, file):
            return f"uid {uid} can write its directory and could not read the file itself"
    return None


def link_directories(path: Path) -> list[Path]:
    """The directory of `path` and of every symbolic link it resolves through, the final
    file's directory last."""
    directories = [path.parent]
    current = path
    for _ in range(MAX_LINKS):
        try:
            target = os.readlink(current)
        except OSError:  # not a link (or gone): the end of the chain
            break
        current = current.parent / target
        directories.append(current.parent)
    return directories


def refusal(path: Path, file: os.stat_result) -> str | None:
    """Why the file at `path` (`file`: its fstat) must not be read for its directories'
    writers, or None."""
    for directory in link_directories(path):
        try:
            st = os.stat(directory)
        except OSError:
            continue
        why = writers_could_read(st, file)
        if why is not None:
            return (f"{path}: not read: {why} (uid {file.st_uid}, mode "
                    f"{stat.S_IMODE(file.st_mode):04o}; see docs/security.md)")
    return None
