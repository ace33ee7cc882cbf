"""The control socket's vocabulary and its client: `hello`, events checked against the
vocabulary when published, subscriptions refused for unknown kinds and carried across a daemon
restart, readiness, and the reference in docs/daemon.md kept in step with the module."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from logwatch import __version__
from logwatch.core.signatures.library import Library
from logwatch.daemon import protocol, subscription
from logwatch.daemon.client import (
    Client,
    DaemonUnavailable,
    Reconnected,
    RequestFailed,
    subscribe,
    wait_ready,
)
from logwatch.daemon.control import ControlServer, Subscriber
from logwatch.daemon.protocol import (
    EVENT_KINDS,
    OPS,
    PROTOCOL_VERSION,
    FindingEvent,
    LaunchEvent,
    LinesEvent,
    ProtocolError,
    parse_event,
    parse_request,
)
from logwatch.daemon.protocol.reference import BEGIN, END, render
from logwatch.daemon.service import Daemon
from logwatch.store.db import open_store
from tests.conftest import ROOT

FINDING = ("(Worker_TP0 pid=9) ERROR 10-14 10:00:{second:02d} [core.py:1] RuntimeError: CUDA "
           "error: an illegal memory access was encountered\n")


def start_daemon(tmp_path: Path, log: Path, sock: Path) -> subprocess.Popen[bytes]:
    (tmp_path / "none.toml").write_text("")
    return subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--file", str(log),
                             "--db", str(tmp_path / "h.duckdb"), "--socket", str(sock),
                             "--config", str(tmp_path / "none.toml")], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    log, sock = tmp_path / "vllm.log", tmp_path / "run" / "lw.sock"
    log.write_bytes(b"")
    proc = start_daemon(tmp_path, log, sock)
    try:
        asyncio.run(wait_ready(sock, 60, alive=lambda: proc.poll() is None))
        yield proc, sock
    finally:
        stop(proc)


@pytest.mark.slow
def test_hello_answers_with_the_versions_and_what_the_daemon_knows(
        daemon: tuple[subprocess.Popen[bytes], Path], tmp_path: Path) -> None:
    proc, sock = daemon

    async def ask() -> tuple[dict[str, object], dict[str, object] | None]:
        async with Client(sock) as client:
            return dict(await client.hello()), dict(client.daemon or {})

    hello, said_on_connect = asyncio.run(ask())
    assert hello == said_on_connect == {
        "ok": True, "version": __version__, "protocol": PROTOCOL_VERSION,
        "requests": list(OPS), "events": sorted(EVENT_KINDS),
        "db": str(tmp_path / "h.duckdb"), "pid": proc.pid}
    assert {"hello", "status", "sql", "subscribe"} <= set(OPS)
    assert {"launch", "diagnosis", "incident", "finding"} <= EVENT_KINDS


@pytest.mark.slow
def test_subscribing_to_an_unknown_kind_gets_a_clear_error(
        daemon: tuple[subprocess.Popen[bytes], Path]) -> None:
    _, sock = daemon

    async def raw() -> dict[str, object]:
        reader, writer = await asyncio.open_unix_connection(str(sock))
        writer.write(b'{"op": "subscribe", "events": ["finding", "launches"]}\n')
        answer: dict[str, object] = json.loads(await asyncio.wait_for(reader.readline(), 10))
        writer.close()
        return answer

    answer = asyncio.run(raw())
    assert answer["ok"] is False
    assert str(answer["error"]).startswith(
        "bad request: events: unknown event kind 'launches'; "
        "the kinds are: action, committed, diagnosis")
    with pytest.raises(RequestFailed, match="unknown event kind 'launches'") as refused:
        asyncio.run(subscribe(sock, ["finding", "launches"]).start())
    assert refused.value.answer["ok"] is False


@pytest.mark.slow
def test_the_client_resubscribes_after_a_daemon_restart(tmp_path: Path) -> None:
    """A subscription with `reconnect` outlives the daemon: Reconnected (the new daemon's
    hello), then the new daemon's events. Without it, the end of the daemon is an error."""
    log, sock = tmp_path / "vllm.log", tmp_path / "run" / "lw.sock"
    log.write_bytes(b"")
    first = start_daemon(tmp_path, log, sock)
    second: subprocess.Popen[bytes] | None = None

    def write(second: int) -> None:
        with open(log, "a") as out:
            out.write(FINDING.format(second=second))

    async def next_finding(events: object) -> FindingEvent:
        async with asyncio.timeout(30):
            async for event in events:  # type: ignore[attr-defined]
                assert not isinstance(event, Reconnected), "reconnected too early"
                if isinstance(event, FindingEvent):
                    return event
        raise AssertionError("the subscription ended")

    async def follow() -> tuple[list[int], Reconnected, str]:
        nonlocal second
        await wait_ready(sock, 60, alive=lambda: first.poll() is None)
        lines = []
        async with Client(sock, reconnect=True).subscribe(["finding"]) as events, \
                subscribe(sock, ["finding"]) as once:
            write(1)
            lines.append((await next_finding(events)).line)
            assert (await next_finding(once)).line == 1
            first.terminate()
            assert await asyncio.to_thread(first.wait, 30) == 0
            with pytest.raises(DaemonUnavailable, match="ended the subscription") as gone:
                await asyncio.wait_for(anext(once), 30)
            second = start_daemon(tmp_path, log, sock)
            back = await asyncio.wait_for(anext(events), 60)
            assert isinstance(back, Reconnected)
            write(2)  # published by the new daemon, after the new subscription
            lines.append((await next_finding(events)).line)
            assert events.reconnects == 1
        return lines, back, str(gone.value)

    try:
        lines, back, gone = asyncio.run(follow())
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    assert second is not None
    assert lines == [1, 2]
    assert back.hello["pid"] == second.pid != first.pid and back.down_s > 0
    assert str(sock) in gone


@pytest.mark.slow
def test_an_event_too_long_to_keep_is_skipped_and_counted(
        daemon: tuple[subprocess.Popen[bytes], Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Here a `lines` event over a 2 KiB limit (the real one is 4 MiB); the stream goes on
    with the next event."""
    _, sock = daemon
    monkeypatch.setattr(subscription, "EVENT_LIMIT", 2048)

    async def watch() -> tuple[int, list[object]]:
        seen: list[object] = []
        async with subscribe(sock, ["lines", "finding"]) as events:
            with open(tmp_path / "vllm.log", "a") as out:
                out.write("x" * 10_000 + "\n" + FINDING.format(second=3))
            async with asyncio.timeout(30):
                async for event in events:
                    seen.append(event)
                    if isinstance(event, FindingEvent):
                        return events.dropped, seen
        raise AssertionError("the subscription ended")

    dropped, seen = asyncio.run(watch())
    assert dropped >= 1
    assert not any(isinstance(e, LinesEvent) and "xxxx" in e.text for e in seen)


def test_wait_ready_gives_up_at_its_deadline_or_when_the_daemon_exits(tmp_path: Path) -> None:
    sock = tmp_path / "lw.sock"
    with pytest.raises(TimeoutError, match="no logwatch daemon answered"):
        asyncio.run(wait_ready(sock, 0.3))
    with pytest.raises(DaemonUnavailable, match="exited before it answered"):
        asyncio.run(wait_ready(sock, 30, alive=lambda: False))


@pytest.fixture
def server(tmp_path: Path, library: Library) -> Iterator[ControlServer]:
    """A control server on a real daemon; never started (publishing needs no socket)."""
    with open_store(tmp_path / "h.duckdb") as store:
        yield ControlServer(Daemon([], library, store), tmp_path / "lw.sock", strict=True)


def test_an_event_outside_the_vocabulary_raises_when_strict(server: ControlServer) -> None:
    with pytest.raises(ProtocolError, match="unknown event kind 'launched'"):
        server.publish("launched", id="l1")
    with pytest.raises(ProtocolError, match="unknown field"):
        server.publish("incident", id="i1", signature="s", fatal=True, again=True, agian=1)
    with pytest.raises(ProtocolError, match="missing field"):
        server.publish("finding", source="f", line=3)
    with pytest.raises(ProtocolError, match="outcome 'exploded' is not one of"):
        server.publish("launch", id="l1", source="f", start_line=1, outcome="exploded",
                       snapshot=None, root_cause=None, failed_before=0)


def test_an_event_outside_the_vocabulary_is_logged_once_and_dropped_in_production(
        server: ControlServer) -> None:
    server.strict = False
    subscriber = Subscriber()
    server.subscribers.add(subscriber)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            server.publish("launched", id="l1")
    assert subscriber.queue.empty()
    assert [(e["event"], e["kind"]) for e in logs] == [("event_refused", "launched")]


def test_the_events_being_added_fit_the_vocabulary(server: ControlServer) -> None:
    """`launch`, `diagnosis` and the new fields of `incident`, published with exactly the
    fields their publisher gives; what a subscriber receives parses back to the same."""
    subscriber = Subscriber()
    server.subscribers.add(subscriber)
    server.publish("launch", id="l2", source="run:vllm", start_line=120, outcome="failed",
                   snapshot="ab12", root_cause="marlin.repack_tile_n", failed_before=2)
    server.publish("diagnosis", launch="l2", incident="i9", cause="marlin.repack_tile_n",
                   title="Marlin tile", summary="NVFP4 on Hopper falls back to Marlin",
                   confidence=0.9)
    server.publish("incident", id="i9", signature="marlin.repack_tile_n", fatal=True,
                   launch="l2", again=True)
    server.publish("incident", id="i10", signature="x", fatal=False)  # defaults filled in
    server.publish_event(LaunchEvent(id="l3", source="run:vllm", start_line=300,
                                     outcome="serving"))
    sent = [subscriber.queue.get_nowait() for _ in range(5)]
    assert [m["event"] for m in sent] == ["launch", "diagnosis", "incident", "incident",
                                          "launch"]
    assert sent[3] == {"event": "incident", "id": "i10", "signature": "x", "fatal": False,
                       "launch": None, "again": False, "source": None}
    launch = parse_event(json.loads(json.dumps(sent[0])))
    assert isinstance(launch, LaunchEvent) and launch.failed_before == 2
    assert launch.outcome == "failed" and launch.root_cause == "marlin.repack_tile_n"
    assert sent[4]["outcome"] == "serving" and sent[4]["failed_before"] == 0


def test_a_client_reads_events_from_a_newer_daemon_and_refuses_broken_ones() -> None:
    event = parse_event({"event": "finding", "source": "f", "line": 1, "signature": "s",
                         "severity": "error", "fatal": True, "captures": {},
                         "added_later": 1, "dropped_before": 4})
    assert isinstance(event, FindingEvent) and event.dropped_before == 4
    with pytest.raises(ProtocolError, match="without captures"):
        parse_event({"event": "finding", "source": "f", "line": 1, "signature": "s",
                     "severity": "error", "fatal": True})
    with pytest.raises(ProtocolError, match="unknown event kind"):
        parse_event({"event": "nope"})


@pytest.mark.parametrize(("message", "error"), [
    ({"op": "status", "verbose": True}, "status: unknown parameter 'verbose'; it takes db"),
    ({"op": "sql"}, "query: required, a string holding one SQL statement"),
    ({"op": "incidents", "limit": True}, "limit: a whole number from 1 to 1000"),
    ({"op": "snapshot", "hash": 3}, "hash: a string"),
    ({"op": "subscribe", "events": "finding"}, "events: a list of event kinds, from"),
    ({"op": "hi"}, "unknown op 'hi'; the ops are: hello, status"),
])
def test_requests_are_checked_against_the_vocabulary(message: dict[str, object],
                                                     error: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse_request(message)
    assert str(refused.value).startswith(error)


def test_the_vocabulary_does_no_io() -> None:
    code = ("import sys, logwatch.daemon.protocol\n"
            "print(sorted(m for m in ('asyncio', 'socket', 'duckdb', 'structlog', "
            "'subprocess', 'threading') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, check=True).stdout.strip()
    assert loaded == "[]"


def _table_rows(block: str, header: str) -> dict[str, str]:
    """The rows by their first column's name (`x`) of the table whose header starts with
    `header`."""
    lines = block.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = {}
    for line in lines[first + 2:]:
        if not line.startswith("|"):
            break
        rows[line.split("|")[1].strip().strip("`")] = line
    return rows


def test_docs_list_every_request_and_event_of_the_vocabulary_and_no_other() -> None:
    text = (ROOT / "docs" / "daemon.md").read_text()
    block = text[text.index(BEGIN):text.index(END) + len(END)]
    requests, events = _table_rows(block, "op"), _table_rows(block, "event")
    assert set(requests) == set(protocol.REQUESTS)
    assert set(events) == set(protocol.EVENTS)
    for op, request in protocol.REQUESTS.items():
        for param in protocol.parameters(request):
            assert param.name == "db" or f"`{param.name}`" in requests[op], (op, param.name)
    for kind, event in protocol.EVENTS.items():
        for field in dataclasses.fields(event):
            assert field.name in protocol.ENVELOPE or f"`{field.name}`" in events[kind], \
                (kind, field.name)
    assert block == render(), ("docs/daemon.md's protocol reference is out of date: run "
                               "python -m logwatch.daemon.protocol.reference docs/daemon.md")
