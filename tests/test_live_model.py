"""The live model: launches, incidents per launch, recurring problems and diagnoses, in the
daemon as in the scan. The daemon runs in this process (a thread with its own event loop)
on a real file, a real DuckDB file, a real control socket and a real sd_notify socket."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.signatures.library import Library
from logwatch.daemon.client import request, subscribe, wait_ready
from logwatch.daemon.control import ControlServer
from logwatch.daemon.notify import Notifier
from logwatch.daemon.protocol import DiagnosisEvent, Event, IncidentEvent, LaunchEvent
from logwatch.daemon.service import Daemon
from logwatch.host.launch_snapshot import LaunchSnapshots
from logwatch.scan.offline import resolve_inputs, scan_inputs
from logwatch.scan.triage import SnapshotOptions
from logwatch.sources.files import FileSource
from logwatch.store.db import Store, open_store
from logwatch.store.operator_sql import read_only_query
from logwatch.store.record import ScanRecorder
from tests.conftest import SAMPLES
from tests.following import wait_for

RETRIES = SAMPLES / "marlin_shape_retries.log"
DEMO = SAMPLES / "demo_marlin_and_mtp.log"


def first_launch(day: str, pid: int) -> bytes:
    """The first start of the TP=8 retries sample (Marlin refuses a 96-wide partition), on
    another day and with other pids: the same failure of the same configuration."""
    lines = RETRIES.read_text().splitlines(keepends=True)[:8]
    text = "".join(lines).replace("09-15", day)
    for old, new in (("3100", str(pid)), ("3190", str(pid + 90))):
        text = text.replace(f"pid={old}", f"pid={new}")
    return text.encode()


class InProcessDaemon:
    """`logwatch daemon --file LOG` in a thread: its socket answers, its STATUS= lines land
    on a datagram socket of our own."""

    def __init__(self, tmp: Path, log: Path, library: Library,
                 launch_snapshots: LaunchSnapshots | None = None) -> None:
        self.sock = tmp / "lw.sock"
        self.notify_path = tmp / "notify.sock"
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(self.notify_path))
        self.notify.settimeout(0.05)
        self.statuses: list[str] = []
        self._listening = True
        self._listener = threading.Thread(target=self._listen, daemon=True)
        self._listener.start()
        self._store_cm = open_store(tmp / "h.duckdb", service=True)
        self.store: Store = self._store_cm.__enter__()
        source = FileSource(log, name=f"file:{log.resolve()}", poll_interval=0.2)
        self.daemon = Daemon([source], library, self.store, quiet_flush=0.2,
                             notifier=Notifier({"NOTIFY_SOCKET": str(self.notify_path)}),
                             launch_snapshots=launch_snapshots)
        self.daemon.control = ControlServer(self.daemon, self.sock)
        self.loop = asyncio.new_event_loop()
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        asyncio.run(wait_ready(self.sock, 30, alive=self.thread.is_alive))  # its socket is up

    def _run(self) -> None:
        self.code = self.loop.run_until_complete(self.daemon.run())

    def status(self) -> dict[str, Any]:
        return asyncio.run(request(self.sock, "status"))["status"]  # type: ignore[no-any-return]

    def sql(self, query: str) -> list[dict[str, Any]]:
        answer = asyncio.run(request(self.sock, "sql", query=query))
        assert "error" not in answer, answer
        return [dict(zip(answer["columns"], row, strict=True)) for row in answer["rows"]]

    def _listen(self) -> None:
        """systemd's side of sd_notify: every STATUS= line, as it comes."""
        while self._listening:
            try:
                data = self.notify.recv(65536).decode()
            except (TimeoutError, BlockingIOError):
                continue
            except OSError:
                return
            self.statuses += [ln[7:] for ln in data.splitlines() if ln.startswith("STATUS=")]

    def stop(self) -> int | None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.daemon.stop)
            self.thread.join(60)
        self.loop.close()
        self._store_cm.__exit__(None, None, None)
        self._listening = False
        self._listener.join(5)
        self.notify.close()
        self.notify_path.unlink()
        return self.code


@pytest.fixture()
def following(tmp_path: Path, library: Library) -> Iterator[tuple[InProcessDaemon, Path]]:
    log = tmp_path / "vllm.log"
    log.write_bytes(b"")
    running = InProcessDaemon(tmp_path, log, library)
    try:
        yield running, log
    finally:
        running.stop()


def settled(running: InProcessDaemon, launches: int, failed: int) -> dict[str, Any]:
    """The status once `launches` launches of which `failed` failed are written."""
    def done() -> dict[str, Any] | None:
        st = running.status()
        ok = (st and not st["pending"] and st["failed_launches"] == failed
              and st["launches"] and st["launches"][0]["number"] == launches
              and (failed == 0 or st["launches"][0]["root_cause"] is not None))
        return st if ok else None
    return wait_for(done, 60, f"{launches} launch(es), {failed} failed, written")  # type: ignore[no-any-return]


def test_the_same_crash_on_two_days_is_two_launches_and_one_recurring_problem(
        following: tuple[InProcessDaemon, Path]) -> None:
    running, log = following
    with open(log, "ab") as out:
        out.write(first_launch("11-28", 4100))
    first = settled(running, launches=1, failed=1)
    assert first["launches"][0]["failed_before"] == 0
    assert "again" not in (first["last_failure"] or "")

    with open(log, "ab") as out:  # the next day: restarted unchanged, fails the same way
        out.write(first_launch("11-29", 5100))
    second = settled(running, launches=2, failed=2)
    assert second["launches"][0] == {**second["launches"][0], "outcome": "failed",
                                     "root_cause": "marlin.min_thread_n", "failed_before": 1}
    assert "launch #2 failed again (1 time(s) before)" in second["last_failure"]
    wait_for(lambda: any("failed again" in s for s in running.statuses), 30,
             "a STATUS= line saying it failed again")

    launches = running.sql("SELECT number, outcome, root_signature, failed_before, started "
                           "FROM launches ORDER BY number")
    assert [(r["number"], r["outcome"], r["root_signature"], r["failed_before"])
            for r in launches] == [(1, "failed", "marlin.min_thread_n", 0),
                                   (2, "failed", "marlin.min_thread_n", 1)]
    incidents = running.sql("SELECT launch_id, count, root_cause FROM incidents "
                            "WHERE signature = 'marlin.min_thread_n'")
    assert len(incidents) == 2 and len({r["launch_id"] for r in incidents}) == 2
    assert all(r["count"] == 1 and r["root_cause"] for r in incidents)
    problem = running.sql("SELECT launches, launches_failed_by_it, configurations "
                          "FROM problems WHERE signature = 'marlin.min_thread_n'")
    assert problem == [{"launches": 2, "launches_failed_by_it": 2, "configurations": 1}]
    config = running.sql("SELECT failed_launches FROM failures_by_config")
    assert config == [{"failed_launches": 2}]
    assert sum(1 for e in running.daemon.events if "failed" in e) == 2


def _summary(db: Path) -> dict[str, Any]:
    """What a history says about a log, independent of ids: launches with outcome and root
    cause, incidents per launch, and the diagnoses' causes per launch."""
    launches = read_only_query(db, """
        SELECT number, start_line, outcome, root_signature, failed_before, fatal_incidents
        FROM launches ORDER BY number""").rows
    incidents = read_only_query(db, """
        SELECT l.number, i.signature, i.captures, i.count, i.root_cause, i.fatal
        FROM incidents i JOIN launches l ON l.id = i.launch_id
        ORDER BY ALL""").rows
    diagnoses = read_only_query(db, """
        SELECT l.number, d.cause, d.title, i.signature
        FROM diagnoses d JOIN launches l ON l.id = d.launch_id
        LEFT JOIN incidents i ON i.id = d.incident_id ORDER BY ALL""").rows
    return {"launches": launches, "incidents": incidents, "diagnoses": diagnoses}


@pytest.mark.slow
def test_the_daemon_and_the_scan_agree_on_launches_root_causes_and_diagnoses(
        tmp_path: Path, library: Library) -> None:
    log = tmp_path / "vllm.log"
    log.write_bytes(DEMO.read_bytes())
    scanned = tmp_path / "scan.duckdb"
    recorder = ScanRecorder()
    report = scan_inputs(resolve_inputs([str(log)]), library, recorder=recorder,
                         snapshot_options=SnapshotOptions())
    with open_store(scanned) as store:
        recorder.write(store, report)

    running = InProcessDaemon(tmp_path, log, library)
    try:
        settled(running, launches=2, failed=2)
        live_events = list(running.daemon.events)
    finally:
        running.stop()
    live, scan = _summary(tmp_path / "h.duckdb"), _summary(scanned)
    for part in ("launches", "incidents", "diagnoses"):
        assert set(live[part]) ^ set(scan[part]) == set(), (
            f"{part}: only live {sorted(set(live[part]) - set(scan[part]))}, only scan "
            f"{sorted(set(scan[part]) - set(live[part]))}")
    assert live == scan
    assert [row[3] for row in scan["launches"]] == ["marlin.repack_tile_n",
                                                    "weights.tensor_size_mismatch"]
    causes = {(row[0], row[1]) for row in scan["diagnoses"]}
    assert (1, "marlin_weight_only_tile") in causes
    assert any(number == 2 and cause.startswith("mtp_") for number, cause in causes), causes
    assert any("launch #2 failed" in e for e in live_events)


def test_a_launch_event_and_diagnosis_events_reach_subscribers(
        following: tuple[InProcessDaemon, Path]) -> None:
    running, log = following
    events: list[Event] = []

    async def watch() -> None:
        async with subscribe(running.sock, ["launch", "diagnosis", "incident"]) as stream:
            with open(log, "ab") as out:  # subscribed: now the launch happens
                out.write(first_launch("11-28", 4100))
            async with asyncio.timeout(60):
                async for event in stream:
                    assert isinstance(event, Event)
                    events.append(event)
                    if isinstance(event, DiagnosisEvent):
                        return

    asyncio.run(watch())
    kinds = [e.kind for e in events]
    launch = next(e for e in events if isinstance(e, LaunchEvent) and e.outcome == "failed")
    assert launch.root_cause == "marlin.min_thread_n" and launch.failed_before == 0
    assert launch.start_line == 1 and launch.snapshot
    incident = next(e for e in events if isinstance(e, IncidentEvent)
                    and e.signature == "marlin.min_thread_n")
    assert incident.launch == launch.id and incident.again is False
    diagnosis = events[-1]
    assert isinstance(diagnosis, DiagnosisEvent)
    assert diagnosis.launch == launch.id and diagnosis.cause
    assert kinds.index("launch") < kinds.index("diagnosis")


@pytest.mark.slow
def test_a_daemon_restarted_mid_launch_ends_with_what_one_run_records(
        tmp_path: Path, library: Library) -> None:
    """Stopped after the start lines and before the Marlin errors, started again: the launch
    goes on (its incidents and start lines rebuilt from the history), and the history ends
    as the scan's of the whole log."""
    data = DEMO.read_bytes()
    cut = [i for i, byte in enumerate(data) if byte == ord("\n")][59] + 1  # after line 60
    log = tmp_path / "vllm.log"
    log.write_bytes(data[:cut])
    first = InProcessDaemon(tmp_path, log, library)
    try:
        wait_for(lambda: (st := first.status()) and st["lines"] == 60 and not st["pending"]
                 and st["launches"], 60, "the first 60 lines written")
    finally:
        first.stop()
    with open(log, "ab") as out:
        out.write(data[cut:])
    second = InProcessDaemon(tmp_path, log, library)
    try:
        settled(second, launches=2, failed=2)
    finally:
        second.stop()

    whole = tmp_path / "whole.log"
    whole.write_bytes(DEMO.read_bytes())
    recorder = ScanRecorder()
    report = scan_inputs(resolve_inputs([str(whole)]), library, recorder=recorder)
    with open_store(tmp_path / "scan.duckdb") as store:
        recorder.write(store, report)
    live, scan = _summary(tmp_path / "h.duckdb"), _summary(tmp_path / "scan.duckdb")
    assert live["launches"] == scan["launches"]
    assert live["incidents"] == scan["incidents"]
    assert live["diagnoses"] == scan["diagnoses"]


def test_a_notify_socket_nobody_reads_never_stalls_the_daemon(tmp_path: Path) -> None:
    """sd_notify datagrams to a socket whose queue is full are dropped, not waited for (the
    daemon's loop sent WATCHDOG=1 into a full queue and stopped answering)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(tmp_path / "notify.sock"))
    try:
        notifier = Notifier({"NOTIFY_SOCKET": str(tmp_path / "notify.sock")})
        done = threading.Event()

        def flood() -> None:
            for _ in range(5000):  # far more than any datagram queue holds
                notifier.watchdog()
            done.set()
        threading.Thread(target=flood, daemon=True).start()
        assert done.wait(30), "sending to a full notify queue blocked"
    finally:
        listener.close()
