"""sd_notify without libsystemd: one datagram per state change to $NOTIFY_SOCKET."""

from __future__ import annotations

import contextlib
import os
import socket


class Notifier:
    """READY=1, WATCHDOG=1, STATUS=..., STOPPING=1 to systemd; silent when not under it."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        env = dict(os.environ) if env is None else env
        address = env.get("NOTIFY_SOCKET", "")
        self.address = "\0" + address[1:] if address.startswith("@") else address
        usec = env.get("WATCHDOG_USEC", "")
        self.watchdog_interval = int(usec) / 2e6 if usec.isdigit() and int(usec) > 0 else None

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def send(self, message: str) -> None:
        if not self.address:
            return
        # systemd going away, or not reading (a full queue would block the sender), is no
        # reason to stop ingesting: an unsent notice is dropped
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock, \
                contextlib.suppress(OSError):
            sock.setblocking(False)
            sock.sendto(message.encode(), self.address)

    def ready(self, status: str = "") -> None:
        self.send("READY=1" + (f"\nSTATUS={status}" if status else ""))

    def status(self, text: str) -> None:
        self.send(f"STATUS={text}")

    def watchdog(self) -> None:
        self.send("WATCHDOG=1")

    def stopping(self) -> None:
        self.send("STOPPING=1")
