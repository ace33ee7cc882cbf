"""The control socket of a running daemon: status, SQL through the daemon (which owns the
file), subscriptions that never stall ingestion, reload, and one daemon per socket."""

from __future__ import annotations

import asyncio
import json
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from logwatch.daemon.client import request, subscribe, wait_ready
from logwatch.daemon.protocol import Event, FindingEvent, LibraryEvent, LinesEvent
from tests.conftest import ROOT, SAMPLES
from tests.following import wait_for
from tests.inprocess import Completed, logwatch_text
from tests.test_library_loader import GOOD


def cli(*args: str) -> Completed[str]:
    return logwatch_text(*args)


@dataclass
class Running:
    proc: subprocess.Popen[bytes]
    log: Path
    db: Path
    sock: Path


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    log, db, sock = tmp_path / "vllm.log", tmp_path / "h.duckdb", tmp_path / "run" / "lw.sock"
    log.write_bytes((SAMPLES / "demo_marlin_and_mtp.log").read_bytes())
    proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--file", str(log),
                             "--db", str(db), "--socket", str(sock)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    asyncio.run(wait_ready(sock, 30, alive=lambda: proc.poll() is None))

    def settled() -> bool:  # read, settled after the quiet period, and committed
        st = asyncio.run(request(sock, "status"))["status"]
        return bool(st["lines"] >= 118 and st["findings_recorded"] > 0 and not st["pending"])

    wait_for(settled, 30, "the sample read and committed")
    yield Running(proc, log, db, sock)
    proc.terminate()
    proc.wait(timeout=30)


@pytest.mark.slow
def test_status_and_sql_go_through_the_daemon(running: Running) -> None:
    db, sock = running.db, running.sock
    assert stat.S_IMODE(sock.stat().st_mode) == 0o660
    status = cli("status", "--socket", str(sock))
    # exit 1: the newest launch of the sample failed (a monitor's "something is wrong")
    assert status.returncode == 1 and "daemon running" in status.stdout
    assert "launch #2: failed, root cause weights.tensor_size_mismatch" in status.stdout
    assert f"  database {db} · socket {sock}" in status.stdout
    assert "1 target(s) failed now" in status.stdout and "last: " in status.stdout
    # the fatal incidents of the newest launch, counted and shown on its line
    fatal = json.loads(cli("sql", "--socket", str(sock), "--jsonl",
                           "SELECT count(*) AS n FROM incidents i JOIN launches l ON "
                           "l.id = i.launch_id WHERE i.fatal AND l.number = 2").stdout)["n"]
    assert fatal > 0 and f"{fatal} open fatal incident(s) in the newest launches" in status.stdout
    assert f"root cause weights.tensor_size_mismatch, {fatal} fatal incident(s)" in status.stdout
    assert "118 lines read" in status.stdout.replace(",", "")
    out = cli("sql", "--socket", str(sock), "--db", str(db), "--json",
              "SELECT signature FROM findings WHERE signature = 'marlin.repack_tile_n' LIMIT 1")
    assert out.returncode == 0, out.stderr  # the file is the daemon's: only the socket works
    assert json.loads(out.stdout)["rows"] == [{"signature": "marlin.repack_tile_n"}]
    refused = cli("sql", "--socket", str(sock), "DELETE FROM findings")
    assert refused.returncode == 2 and "only read-only queries" in refused.stderr
    no_files = cli("sql", "--socket", str(sock), "SELECT * FROM read_csv('/etc/passwd')")
    assert no_files.returncode == 2 and "read_csv() is not one that only reads" in no_files.stderr
    answer = asyncio.run(request(sock, "incidents", limit=3))
    assert answer["ok"] and len(answer["rows"]) == 3
    assert asyncio.run(request(sock, "nope"))["ok"] is False
    assert asyncio.run(request(sock, "reload"))["ok"] is True


@pytest.mark.slow
def test_subscribers_get_lines_and_findings(running: Running) -> None:
    log, sock = running.log, running.sock

    async def watch() -> list[Event]:
        events: list[Event] = []
        async with asyncio.timeout(20), subscribe(sock) as stream:
            with open(log, "ab") as out:
                out.write(b"(Worker_TP0 pid=9) ERROR 10-14 10:00:00 [core.py:1] RuntimeError: "
                          b"CUDA error: an illegal memory access was encountered\n")
            async for event in stream:
                assert isinstance(event, Event)
                events.append(event)
                if isinstance(event, FindingEvent) \
                        and event.signature == "distributed.cuda_error":
                    return events
        raise AssertionError("the subscription ended")

    events = asyncio.run(watch())
    assert any(isinstance(e, LinesEvent) and "illegal memory access" in e.text for e in events)
    finding = events[-1]
    assert isinstance(finding, FindingEvent) and finding.fatal is True


@pytest.mark.slow
def test_a_stalled_subscriber_never_stalls_ingestion(running: Running) -> None:
    log, sock = running.log, running.sock
    stalled = socket.socket(socket.AF_UNIX)
    stalled.connect(str(sock))
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.sendall(b'{"op": "subscribe"}\n')  # ... and never reads again
    line = b"(APIServer pid=1) INFO 10-14 10:00:00 [metrics.py:101] SpecDecoding metrics: Mean " \
           b"acceptance length: 2.50, Accepted: 5 tokens, Drafted: 9 tokens, Avg Draft " \
           b"acceptance rate: 55.6%\n"
    with open(log, "ab") as out:
        for _ in range(30):
            out.write(line * 1000)
            out.flush()
            time.sleep(0.01)
    wait_for(lambda: asyncio.run(request(sock, "status"))["status"]["lines"] >= 118 + 30_000,
             30, "ingestion to go on past a slow subscriber")
    stalled.close()


@pytest.mark.slow
def test_one_daemon_per_socket(running: Running, tmp_path: Path) -> None:
    sock = running.sock
    second = cli("daemon", "--stdin", "--db", str(tmp_path / "other.duckdb"), "--socket",
                 str(sock))
    assert second.returncode == 0
    assert "another logwatch daemon is listening" in second.stderr
    assert asyncio.run(request(sock, "status"))["ok"]  # the first one still answers


def test_status_without_a_daemon_reads_the_history(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    cli("scan", "--db", str(db), str(SAMPLES / "journald_kv_cache.log"))
    out = cli("status", "--socket", str(tmp_path / "none.sock"), "--db", str(db))
    assert out.returncode == 3 and "no daemon running" in out.stdout  # 3: no daemon
    nothing = cli("status", "--socket", str(tmp_path / "none.sock"), "--db",
                  str(tmp_path / "none.duckdb"), "--json")
    assert nothing.returncode == 3
    assert json.loads(nothing.stdout) == {
        "daemon": None, "database": str(tmp_path / "none.duckdb"),
        "error": f"{tmp_path / 'none.duckdb'}: no database yet (record one "
                 "with `logwatch scan --db`)"}


E = TypeVar("E", bound=Event)
SITE_SIGNATURE = GOOD.replace('id = "site.example"', 'id = "site.boom"')


def daemon_with_a_site_library(tmp_path: Path
                               ) -> tuple[subprocess.Popen[bytes], Path, Path, Path]:
    """`logwatch daemon` of an empty log with a site library directory (empty `local/`):
    the process, the directory, the log and the socket."""
    site, log, sock = tmp_path / "site", tmp_path / "vllm.log", tmp_path / "lw.sock"
    (site / "local").mkdir(parents=True)
    log.write_bytes(b"")
    proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--file", str(log),
                             "--db", str(tmp_path / "h.duckdb"), "--socket", str(sock),
                             "--signatures", str(site)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, site, log, sock


@pytest.mark.slow
def test_a_change_in_a_signature_directory_reloads_the_library(tmp_path: Path) -> None:
    """Drop a signature in: it is loaded and matches; drop a broken one in: the running
    library stays and the subscriber is told why."""
    proc, site, log, sock = daemon_with_a_site_library(tmp_path)

    async def watch() -> tuple[LibraryEvent, FindingEvent, LibraryEvent, FindingEvent]:
        async with subscribe(sock, ["library", "finding"], wait=30) as stream:

            async def next_event(kind: type[E]) -> E:
                async with asyncio.timeout(30):
                    async for event in stream:
                        if isinstance(event, kind):
                            return event
                raise AssertionError("the subscription ended")

            (site / "local" / "boom.toml").write_text(SITE_SIGNATURE)
            loaded = await next_event(LibraryEvent)
            with open(log, "ab") as out:
                out.write(b"boom 42\n")
            found = await next_event(FindingEvent)
            (site / "local" / "broken.toml").write_text("id = \"site.broken\"\nversion = [\n")
            refused = await next_event(LibraryEvent)
            with open(log, "ab") as out:
                out.write(b"boom 43\n")
            still = await next_event(FindingEvent)
        return loaded, found, refused, still

    try:
        loaded, found, refused, still = asyncio.run(watch())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert loaded.loaded is True
    assert found.signature == "site.boom" and found.captures == {"n": "42"}
    assert refused.loaded is False and "broken.toml" in str(refused.error)
    assert still.signature == "site.boom" and still.captures == {"n": "43"}


def test_history_reads_through_the_daemon_that_holds_the_file(running: Running) -> None:
    """The daemon holds the file open for writing: `history` asked the file itself and got
    "database is locked"; it asks the daemon now, as `sql` does."""
    shown = cli("history", "--socket", str(running.sock), "--db", str(running.db))
    assert shown.returncode == 0, shown.stderr
    assert "weights.tensor_size_mismatch" in shown.stdout and "root" in shown.stdout


def test_snapshot_diff_by_hash_reads_through_the_daemon(running: Running) -> None:
    hashes = json.loads(cli("sql", "--socket", str(running.sock), "--db", str(running.db),
                            "--json", "SELECT hash FROM snapshots ORDER BY hash").stdout)
    first, second = (row["hash"] for row in hashes["rows"][:2])
    shown = cli("snapshot", "diff", first[:8], second[:8], "--socket", str(running.sock),
                "--db", str(running.db))
    assert shown.returncode == 1, shown.stderr  # 1: they differ
    assert f"{first} -> {second}:" in shown.stdout


def test_the_daemon_names_the_sources_its_findings_came_from(running: Running) -> None:
    """docs/history.md: every finding's source_id is a `sources` row, labelled with the
    source (the daemon left the table empty)."""
    out = cli("sql", "--socket", str(running.sock), "--db", str(running.db), "--json",
              "SELECT s.kind, s.label, count(*) AS n FROM findings f "
              "LEFT JOIN sources s ON s.id = f.source_id GROUP BY ALL")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows"] == [
        {"kind": "file", "label": f"file:{running.log.resolve()}",
         "n": json.loads(cli("sql", "--socket", str(running.sock), "--db", str(running.db),
                             "--json", "SELECT count(*) AS n FROM findings").stdout
                         )["rows"][0]["n"]}]
