"""Who is at the other end of a control connection and what they may ask: the kernel's word
for the peer (SO_PEERCRED and SO_PEERGROUPS, taken once when it connects) matched against the
trust table, which each request declares (`protocol.Request.who`).

Three kinds of peer are let in: the owner (root and the user the daemon runs as), members of
`socket.operators_group` (operators) and members of `socket.group` (readers). Approve, reject
and reset-breaker are the owner's and the operators'; the other requests everyone's let in.
Anyone else is refused at once, with who may connect. The socket's own mode and group keep
most of them out before that; this check holds even when the file's mode is changed.
"""

from __future__ import annotations

import grp
import os
import pwd
import socket
import struct
from dataclasses import dataclass

from logwatch.daemon.protocol import OPERATORS, READERS, Request
from logwatch.daemon.socket_trust import peer_credentials
from logwatch.host.trusted_dirs import owner_name, trusted_uids

OWNER, OPERATOR, READER = "owner", "operator", "reader"
MAY = {OWNER: frozenset({OPERATORS, READERS}), OPERATOR: frozenset({OPERATORS, READERS}),
       READER: frozenset({READERS})}
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux 4.13+; Python lacks the name
GROUPS_BUFFER = 1024  # bytes: the most getsockopt takes in Python, 256 groups


@dataclass(frozen=True, slots=True)
class Peer:
    uid: int | None  # None: the kernel did not say
    groups: frozenset[int]  # the primary group and the supplementary ones
    role: str | None  # OWNER, OPERATOR, READER; None: not let in

    @property
    def name(self) -> str:
        return user_text(self.uid)


@dataclass(frozen=True, slots=True)
class Groups:
    """The groups the configuration names, resolved: (name, gid) or None when not set."""

    readers: tuple[str, int] | None = None
    operators: tuple[str, int] | None = None

    @classmethod
    def named(cls, readers: str | None, operators: str | None) -> Groups:
        """KeyError-free: OSError naming the setting when a group does not exist."""
        return cls(_resolve("socket.group", readers), _resolve("socket.operators_group",
                                                                operators))


def _resolve(key: str, name: str | None) -> tuple[str, int] | None:
    if not name:
        return None
    try:
        return name, grp.getgrnam(name).gr_gid
    except KeyError:
        raise OSError(f"{key} {name!r}: no such group") from None


def user_text(uid: int | None) -> str:
    return "an unknown user" if uid is None else owner_name(uid)


def _supplementary(sock: socket.socket, uid: int, gid: int) -> frozenset[int]:
    """The peer's groups when it connected (SO_PEERGROUPS); else the group database's."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, GROUPS_BUFFER)
        return frozenset(struct.unpack(f"{len(raw) // 4}I", raw[:len(raw) // 4 * 4]))
    except OSError:  # an older kernel, or more groups than fit
        try:
            return frozenset(os.getgrouplist(pwd.getpwuid(uid).pw_name, gid))
        except KeyError:
            return frozenset()


def identify(sock: socket.socket | None, groups: Groups) -> Peer:
    """Who connected, and as what."""
    creds = peer_credentials(sock)
    if creds is None or sock is None:
        return Peer(None, frozenset(), None)
    uid, gid = creds
    held = frozenset({gid}) | _supplementary(sock, uid, gid)
    if uid in trusted_uids():
        role: str | None = OWNER
    elif groups.operators is not None and groups.operators[1] in held:
        role = OPERATOR
    elif groups.readers is not None and groups.readers[1] in held:
        role = READER
    else:
        role = None
    return Peer(uid, held, role)


def owners_text() -> str:
    """root, and the daemon's own user when it is not root."""
    mine = os.geteuid()
    return "root" if mine == 0 else f"root and {user_text(mine)}"


def who_may(who: str, groups: Groups) -> str:
    """Who may ask a request declared `who` (READERS: who may connect)."""
    names = [owners_text()]
    if groups.operators is not None:
        names.append(f"members of group {groups.operators[0]}")
    if who == READERS and groups.readers is not None:
        names.append(f"members of group {groups.readers[0]}")
    return ", ".join(names[:-1]) + (" or " if len(names) > 1 else "") + names[-1]


def not_let_in(peer: Peer, groups: Groups) -> str:
    """The refusal of a peer that may not connect at all."""
    return (f"permission denied: {peer.name} may not use this daemon's socket; "
            f"{who_may(READERS, groups)} may connect")


def refused_because(request: Request, peer: Peer, groups: Groups) -> str | None:
    """None when the peer may ask this request; else why not, and who may."""
    if peer.role is not None and request.who in MAY[peer.role]:
        return None
    what = {READER: f"a reader (member of group {groups.readers[0]})" if groups.readers
            else "a reader"}.get(peer.role or "", "not let in")
    return (f"permission denied: only {who_may(request.who, groups)} may {request.op}; "
            f"{peer.name} is {what}")
