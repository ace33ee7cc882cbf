"""Prometheus metrics on loopback (`logwatch daemon --metrics 127.0.0.1:9464`).

A minimal HTTP/1.0 responder on the daemon's event loop: `GET /metrics` returns the text
exposition format; anything else gets 404. Only loopback addresses are accepted: the daemon
reads logs that may hold secrets, and its numbers are nobody else's business either.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sized
from typing import Any, Protocol

from logwatch import own_log

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
    "logwatch_action_moves_total": ("counter", "Relaunch actions that moved into each state "
                                               "since the daemon started."),
    "logwatch_actions_open": ("gauge", "Relaunch actions not finished, per target and state."),
    "logwatch_breaker_open": ("gauge", "1 while a target's relaunch breaker is open (an "
                                       "operator resets it), else 0."),
}


def _escape(value: str) -> str:
    """A label value in the exposition format, which escapes only backslash, quote and newline:
    the other control characters (a source named after a file with ESC in its name) are shown
    visibly (`^[`, `\\x9b`), so a scrape `curl`-ed to a terminal cannot drive it."""
    from logwatch.core.safe_text.visible import visible

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


class _Versioned(Protocol):
    @property
    def version(self) -> str: ...


class _Fed(Protocol):
    @property
    def last_data(self) -> float: ...  # monotonic time the source last gave data


class _Relaunching(Protocol):
    @property
    def by_state(self) -> Mapping[str, int]: ...

    def status(self) -> Mapping[str, Any]: ...


class MeteredDaemon(Protocol):
    """What the metrics need from the daemon, and nothing more."""

    @property
    def started(self) -> float: ...  # monotonic

    @property
    def library(self) -> _Versioned: ...

    @property
    def pending(self) -> Sized: ...  # findings waiting for the next commit

    @property
    def lines_by_source(self) -> Mapping[str, int]: ...

    @property
    def streams(self) -> Mapping[str, _Fed]: ...

    @property
    def findings_by_signature(self) -> Mapping[tuple[str, int], int]: ...

    @property
    def incidents_seen(self) -> Mapping[bool, Collection[str]]: ...  # by fatal

    @property
    def checkpoint_times(self) -> Mapping[str, float]: ...  # wall time of the last commit

    def lag_bytes(self) -> Mapping[str, int]: ...

    @property
    def relaunches(self) -> _Relaunching | None: ...  # None: no target's policy may act


def daemon_samples(daemon: MeteredDaemon) -> list[Sample]:
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
    for source, behind in daemon.lag_bytes().items():
        samples.append(("logwatch_lag_bytes", {"source": source}, behind))
    for (signature, version), count in sorted(daemon.findings_by_signature.items()):
        samples.append(("logwatch_findings_total",
                        {"signature": signature, "version": str(version)}, count))
    for fatal, ids in sorted(daemon.incidents_seen.items()):
        samples.append(("logwatch_incidents", {"fatal": str(fatal).lower()}, len(ids)))
    for source, when in daemon.checkpoint_times.items():
        samples.append(("logwatch_checkpoint_age_seconds", {"source": source},
                        round(wall - when, 3)))
    if daemon.relaunches is not None:
        samples += relaunch_samples(daemon.relaunches)
    return samples


def relaunch_samples(relaunches: _Relaunching) -> list[Sample]:
    """Actions by state, and each target's breaker."""
    samples: list[Sample] = [("logwatch_action_moves_total", {"state": state}, count)
                             for state, count in sorted(relaunches.by_state.items())]
    status = relaunches.status()
    open_now = Counter((a["target"], a["state"]) for a in status["actions"])
    samples += [("logwatch_actions_open", {"target": target, "state": state}, count)
                for (target, state), count in sorted(open_now.items())]
    samples += [("logwatch_breaker_open", {"target": target}, int(bool(is_open)))
                for target, is_open in sorted(status["breakers"].items())]
    return samples


# A scrape is one short request from loopback. Anything slower or more numerous is a local
# user holding connections open: each costs a file descriptor, and at the descriptor limit
# the whole daemon (log files, the journal, DuckDB) fails to open anything.
MAX_CONNECTIONS = 16  # open at once; more wait in the kernel's listen queue (same size)
GRACE_SECONDS = 1.0  # a scrape sends its request at once: after this an incomplete one gives
                     # way to the next connection when all are taken
REQUEST_SECONDS = 5.0  # the whole request (line and headers), then again to send the answer
MAX_HEADER_LINES = 100
REPORT_SECONDS = 60.0  # connections given up are logged as one summary per interval


class MetricsServer:
    """Accepts while fewer than MAX_CONNECTIONS are open. When all are taken, the oldest one
    that has not delivered its request within GRACE_SECONDS is closed for the next: a flood
    of idle or trickling connections cannot starve a scrape, which is answered within
    milliseconds of its turn."""

    def __init__(self, host: str, port: int, samples: Callable[[], list[Sample]]) -> None:
        self.host, self.port, self.samples = host, port, samples
        self._listener: socket.socket | None = None
        self._acceptor: asyncio.Task[None] | None = None
        self._open: set[asyncio.Task[None]] = set()
        self._incomplete: dict[asyncio.Task[None], float] = {}  # no full request yet: since
        self._freed = asyncio.Event()
        self._dropped: Counter[str] = Counter()
        self._last_error = ""
        self._report_timer: asyncio.TimerHandle | None = None
        self.log = own_log.get("logwatch.metrics")

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self._listener = socket.create_server((self.host, self.port), family=family,
                                              backlog=MAX_CONNECTIONS)
        self._listener.setblocking(False)
        self._acceptor = asyncio.create_task(self._accept(self._listener))

    async def close(self) -> None:
        if self._acceptor is not None:
            self._acceptor.cancel()
            await asyncio.wait([self._acceptor], timeout=2)
        for task in list(self._open):
            task.cancel()
        if self._open:
            await asyncio.wait(list(self._open), timeout=2)
        if self._listener is not None:
            self._listener.close()
        if self._report_timer is not None:
            self._report_timer.cancel()
            self._report_timer = None
        if self._dropped:
            self._report()

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._make_room(loop)
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError as exc:  # EMFILE, ENFILE, ENOBUFS: try again a little later
                self._drop("accept_failed", str(exc))
                await asyncio.sleep(1)
                continue
            task = asyncio.create_task(self._serve(conn))
            self._open.add(task)
            self._incomplete[task] = loop.time()
            task.add_done_callback(self._ended)

    async def _make_room(self, loop: asyncio.AbstractEventLoop) -> None:
        while len(self._open) >= MAX_CONNECTIONS:
            self._freed.clear()
            wait: float | None = None
            if self._incomplete:
                task, since = min(self._incomplete.items(), key=lambda item: item[1])
                wait = since + GRACE_SECONDS - loop.time()
                if wait <= 0:
                    del self._incomplete[task]
                    task.cancel()
                    self._drop("over_limit")
                    wait = None  # its end sets _freed
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
            # that coincides with the event being set, and close() would wait forever
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._freed.wait()

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._open.discard(task)
        self._incomplete.pop(task, None)
        self._freed.set()

    def _drop(self, reason: str, error: str = "") -> None:
        """Count a connection given up; the first after a quiet spell is logged at once, the
        others in one summary per REPORT_SECONDS, never one line (or traceback) each."""
        self._dropped[reason] += 1
        self._last_error = error or self._last_error
        if self._report_timer is None:
            self._report()
            self._report_timer = asyncio.get_running_loop().call_later(REPORT_SECONDS,
                                                                       self._report_due)

    def _report_due(self) -> None:
        self._report_timer = None
        if self._dropped:
            self._report()
            self._report_timer = asyncio.get_running_loop().call_later(REPORT_SECONDS,
                                                                       self._report_due)

    def _report(self) -> None:
        self.log.warning("metrics_connections_dropped", **dict(self._dropped),
                         last_error=self._last_error or None,
                         limits=f"{MAX_CONNECTIONS} connections, {REQUEST_SECONDS:g} s each")
        self._dropped.clear()
        self._last_error = ""

    async def _serve(self, conn: socket.socket) -> None:
        task = asyncio.current_task()
        writer: asyncio.StreamWriter | None = None
        try:
            async with asyncio.timeout(REQUEST_SECONDS):
                reader, writer = await asyncio.open_connection(sock=conn)
                request = await reader.readline()
                for _ in range(MAX_HEADER_LINES):
                    if await reader.readline() in (b"\r\n", b"\n", b""):
                        break  # headers: not needed
                else:
                    raise ValueError(f"over {MAX_HEADER_LINES} header lines")
            if task is not None:
                self._incomplete.pop(task, None)
            if not request:
                return
            parts = request.split()
            if len(parts) >= 2 and parts[0] == b"GET" and parts[1].split(b"?")[0] == b"/metrics":
                body, status = render(self.samples()).encode(), b"200 OK"
                kind = b"text/plain; version=0.0.4; charset=utf-8"
            else:
                body, status, kind = b"see /metrics\n", b"404 Not Found", b"text/plain"
            writer.write(b"HTTP/1.0 " + status + b"\r\nContent-Type: " + kind
                         + b"\r\nContent-Length: " + str(len(body)).encode()
                         + b"\r\nConnection: close\r\n\r\n" + body)
            async with asyncio.timeout(REQUEST_SECONDS):
                await writer.drain()
        except TimeoutError:
            self._drop("too_slow")
        except ValueError as exc:  # a line over the reader's limit, too many headers
            self._drop("bad_request", str(exc))
        except ConnectionError:
            pass  # the client went away
        except Exception as exc:  # a bug rendering the numbers: logged, not once per scrape
            self._drop("failed", f"{type(exc).__name__}: {exc}")
        finally:
            if writer is not None:
                writer.transport.abort()
            else:
                conn.close()
