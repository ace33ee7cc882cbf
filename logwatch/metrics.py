"""Prometheus metrics on loopback (`logwatch daemon --metrics 127.0.0.1:9464`).

A minimal HTTP/1.0 responder on the daemon's event loop: `GET /metrics` returns the text
exposition format; anything else gets 404. Only loopback addresses are accepted: the daemon
reads logs that may hold secrets, and its numbers are nobody else's business either.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

Sample = tuple[str, dict[str, str], float]  # name, labels, value

HELP = {
    "logwatch_lines_read_total": ("counter", "Lines read, per source."),
    "logwatch_lag_bytes": ("gauge", "Bytes written to a followed file and not yet read."),
    "logwatch_source_idle_seconds": ("gauge", "Seconds since a source last gave data."),
    "logwatch_findings_total": ("counter",
                                "Findings recorded, per signature and signature version."),
    "logwatch_incidents": ("gauge", "Incidents recorded into since the daemon started."),
    "logwatch_pending_findings": ("gauge", "Findings waiting for the next commit."),
    "logwatch_checkpoint_age_seconds": ("gauge", "Seconds since a source's position was "
                                                 "last committed."),
    "logwatch_library_info": ("gauge", "The signature library in use (value 1)."),
    "logwatch_uptime_seconds": ("gauge", "Seconds since the daemon started."),
}


def _escape(value: str) -> str:
    """A label value in the exposition format, which escapes only backslash, quote and newline:
    the other control characters (a source named after a file with ESC in its name) are shown
    visibly (`^[`, `\\x9b`), so a scrape `curl`-ed to a terminal cannot drive it."""
    from logwatch.core.visible import visible

    shown = visible(value, lines=True)  # newline: escaped below, as the format wants
    return shown.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(samples: Iterable[Sample]) -> str:
    """The text exposition format, each metric family with its HELP and TYPE once."""
    by_name: dict[str, list[Sample]] = {}
    for sample in samples:
        by_name.setdefault(sample[0], []).append(sample)
    out: list[str] = []
    for name, family in by_name.items():
        kind, text = HELP.get(name, ("untyped", name))
        out += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for _, labels, value in family:
            label_text = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            out.append(f"{name}{{{label_text}}} {value:g}" if labels else f"{name} {value:g}")
    return "\n".join(out) + "\n"


def parse_listen(text: str) -> tuple[str, int]:
    """`127.0.0.1:9464` or `[::1]:9464`; ValueError for anything not on loopback."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: expected HOST:PORT, like 127.0.0.1:9464")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise ValueError(f"{text!r}: the host must be a loopback address (127.0.0.1 or "
                         "::1), not a name") from None
    if not loopback:
        raise ValueError(f"{text!r}: metrics are served on loopback only (127.0.0.1 or ::1)")
    return host, int(port)


def daemon_samples(daemon: Any) -> list[Sample]:
    now, wall = time.monotonic(), time.time()
    samples: list[Sample] = [
        ("logwatch_uptime_seconds", {}, round(now - daemon.started, 3)),
        ("logwatch_library_info", {"version": daemon.library.version}, 1),
        ("logwatch_pending_findings", {}, len(daemon.pending)),
    ]
    for source, count in daemon.lines_by_source.items():
        samples.append(("logwatch_lines_read_total", {"source": source}, count))
    for name, stream in daemon.streams.items():
        samples.append(("logwatch_source_idle_seconds", {"source": name},
                        round(now - stream.last_data, 3)))
    for source, (path, offset) in daemon.read_positions.items():
        with contextlib.suppress(OSError):
            samples.append(("logwatch_lag_bytes", {"source": source},
                            max(0, os.stat(path).st_size - offset)))
    for (signature, version), count in sorted(daemon.findings_by_signature.items()):
        samples.append(("logwatch_findings_total",
                        {"signature": signature, "version": str(version)}, count))
    for fatal, ids in sorted(daemon.incidents_seen.items()):
        samples.append(("logwatch_incidents", {"fatal": str(fatal).lower()}, len(ids)))
    for source, when in daemon.checkpoint_times.items():
        samples.append(("logwatch_checkpoint_age_seconds", {"source": source},
                        round(wall - when, 3)))
    return samples


class MetricsServer:
    def __init__(self, host: str, port: int, samples: Callable[[], list[Sample]]) -> None:
        self.host, self.port, self.samples = host, port, samples
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass  # headers: not needed
            parts = request.split()
            if len(parts) >= 2 and parts[0] == b"GET" and parts[1].split(b"?")[0] == b"/metrics":
                body, status = render(self.samples()).encode(), b"200 OK"
                kind = b"text/plain; version=0.0.4; charset=utf-8"
            else:
                body, status, kind = b"see /metrics\n", b"404 Not Found", b"text/plain"
            writer.write(b"HTTP/1.0 " + status + b"\r\nContent-Type: " + kind
                         + b"\r\nContent-Length: " + str(len(body)).encode()
                         + b"\r\nConnection: close\r\n\r\n" + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, ValueError):
            pass
        finally:
            writer.transport.abort()
