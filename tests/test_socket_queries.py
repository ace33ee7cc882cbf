"""The control socket under attack and misuse: its SQL cannot write, runaway queries are
stopped and never stall ingestion, SIGTERM ends the daemon while queries run, and every
malformed request gets an error answer on a connection that stays usable."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from logwatch.daemon.client import request, wait_ready
from tests.conftest import ROOT, SAMPLES
from tests.inprocess import Completed, logwatch_text

RUNAWAY = "SELECT count(*) FROM range(1000000000000) a"
FINDING = (b"(Worker_TP0 pid=9) ERROR 10-14 10:00:00 [core.py:1] RuntimeError: CUDA error: an "
           b"illegal memory access was encountered\n")


def ask(sock: Path, message: dict[str, object]) -> dict[str, object]:
    params = {k: v for k, v in message.items() if k != "op"}
    return asyncio.run(request(sock, str(message["op"]), **params))


def sql(sock: Path, query: str) -> dict[str, object]:
    return ask(sock, {"op": "sql", "query": query})


def count(sock: Path, query: str) -> int:
    answer = sql(sock, query)
    assert answer["ok"], answer
    return int(answer["rows"][0][0])  # type: ignore[index]


def wait_for(what: str, check: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def up(sock: Path, proc: subprocess.Popen[bytes]) -> None:
    """Until the daemon says hello; its stderr when it ended instead."""
    try:
        asyncio.run(wait_ready(sock, 60, alive=lambda: proc.poll() is None))
    except OSError:
        raise AssertionError(proc.stderr.read() if proc.stderr else "daemon ended") from None


def start(tmp_path: Path, *args: str, config: str = "", stdin: int | None = None
          ) -> subprocess.Popen[bytes]:
    conf = tmp_path / "logwatch.toml"
    conf.write_text(config)
    return subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--config", str(conf),
                             "--db", str(tmp_path / "h.duckdb"), "--socket",
                             str(tmp_path / "lw.sock"), *args], cwd=ROOT, stdin=stdin,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _following(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, Path]]:
    log, sock = tmp_path / "vllm.log", tmp_path / "lw.sock"
    log.write_bytes((SAMPLES / "demo_marlin_and_mtp.log").read_bytes())
    proc = start(tmp_path, "--file", str(log))
    up(sock, proc)
    wait_for("the sample recorded",
             lambda: ask(sock, {"op": "status"})["status"]["findings_recorded"] > 0  # type: ignore[index]
             and not ask(sock, {"op": "status"})["status"]["pending"])  # type: ignore[index]
    yield proc, log, sock
    proc.terminate()
    assert proc.wait(timeout=30) == 0


@pytest.fixture
def following(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, Path]]:
    yield from _following(tmp_path)


@pytest.fixture(scope="module")
def malformed_target(tmp_path_factory: pytest.TempPathFactory
                     ) -> Iterator[tuple[subprocess.Popen[bytes], Path, Path]]:
    """One daemon for every malformed request: each case on a connection of its own, and
    the daemon must go on answering all of them (and stop cleanly at the end)."""
    yield from _following(tmp_path_factory.mktemp("malformed"))


@pytest.mark.slow
def test_the_socket_cannot_write_the_history(following: tuple[subprocess.Popen[bytes], Path,
                                                              Path], tmp_path: Path) -> None:
    """The attacks that worked: EXPLAIN ANALYZE ran its statement on the daemon's read-write
    connection (delete every finding, forge a fatal incident, drop checkpoints so the commit
    path died, set schema_version to 99 so the daemon never started again)."""
    proc, log, sock = following
    findings = count(sock, "SELECT count(*) FROM findings")
    attacks = [
        "EXPLAIN ANALYZE DELETE FROM findings",
        "EXPLAIN ANALYZE INSERT INTO incidents (id, signature, fatal) "
        "VALUES ('forged', 'x', true)",
        "EXPLAIN ANALYZE DROP TABLE checkpoints",
        "EXPLAIN ANALYZE UPDATE meta SET value = '99' WHERE key = 'schema_version'",
        "SELECT * FROM checkpoint()",
        "WITH gone AS (DELETE FROM findings RETURNING *) SELECT * FROM gone",
    ]
    for attack in attacks:
        answer = sql(sock, attack)
        assert answer["ok"] is False and "only read-only queries" in str(answer["error"]), attack
    assert count(sock, "SELECT count(*) FROM findings") == findings
    assert count(sock, "SELECT count(*) FROM incidents WHERE id = 'forged'") == 0
    assert count(sock, "SELECT CAST(value AS INTEGER) FROM meta "
                       "WHERE key = 'schema_version'") < 99
    with open(log, "ab") as out:  # the commit path still works
        out.write(FINDING)
    wait_for("the new finding", lambda: count(sock, "SELECT count(*) FROM findings")
             == findings + 1)
    proc.terminate()
    assert proc.wait(timeout=30) == 0
    again = start(tmp_path, "--file", str(log))  # and the daemon starts again on its history
    try:
        up(sock, again)
        assert count(sock, "SELECT count(*) FROM findings") == findings + 1
    finally:
        again.terminate()
        again.wait(timeout=30)


@pytest.mark.slow
def test_runaway_queries_never_stop_ingestion_and_sigterm_still_ends_the_daemon(
        tmp_path: Path) -> None:
    """Six abandoned runaway queries used to fill the thread pool the stdin reader shares:
    ingestion stopped and the program writing into the pipe blocked. Now two run (each on a
    thread of its own, never the sources'), the rest are answered "busy", and a SIGTERM
    interrupts the two: the daemon ends in seconds, not when their minute is up."""
    sock = tmp_path / "lw.sock"
    proc = start(tmp_path, "--stdin", config="[socket]\nquery_seconds = 60\n",
                 stdin=subprocess.PIPE)
    assert proc.stdin is not None
    up(sock, proc)
    clients = []
    for _ in range(6):  # asked, never read: abandoned
        client = socket.socket(socket.AF_UNIX)
        client.connect(str(sock))
        client.sendall(json.dumps({"op": "sql", "query": RUNAWAY}).encode() + b"\n")
        clients.append(client)
    line = b"(APIServer pid=1) INFO 10-14 10:00:00 [loggers.py:1] Engine 000: Avg prompt " \
           b"throughput: 0.0 tokens/s\n"
    written = threading.Event()

    def write() -> None:
        assert proc.stdin is not None
        for _ in range(50):
            proc.stdin.write(line * 1000)
            proc.stdin.flush()
        written.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert written.wait(60), "the program writing into the daemon's stdin blocked"
    wait_for("50,000 lines read",
             lambda: ask(sock, {"op": "status"})["status"]["lines"] >= 50_000)  # type: ignore[index]
    busy = sql(sock, "SELECT 1")
    assert busy["ok"] is False and str(busy["error"]).startswith("busy: 2 queries")
    started = time.monotonic()
    proc.terminate()
    assert proc.wait(timeout=30) == 0
    assert time.monotonic() - started < 15  # the queries had a minute left each
    for client in clients:
        client.close()


@pytest.mark.slow
def test_a_query_over_the_time_limit_is_stopped_and_answered(tmp_path: Path) -> None:
    sock, log = tmp_path / "lw.sock", tmp_path / "vllm.log"
    log.write_bytes(b"")
    proc = start(tmp_path, "--file", str(log), config="[socket]\nquery_seconds = 0.5\n")
    try:
        up(sock, proc)
        answer = sql(sock, RUNAWAY)
        assert answer == {"ok": False, "error": "the query ran over its time limit of 0.5 s "
                                                "and was stopped"}
        assert sql(sock, "SELECT 42")["rows"] == [[42]]  # its thread is free again
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_rows_are_cut_while_fetching_and_the_cut_is_shown(tmp_path: Path) -> None:
    sock, log, db = tmp_path / "lw.sock", tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes(b"")
    proc = start(tmp_path, "--file", str(log), config="[socket]\nquery_rows = 100\n")
    query = "SELECT * FROM range(1000000000000)"

    def cli(*args: str, via_socket: bool = True) -> Completed[str]:
        where = ["--socket", str(sock)] if via_socket else ["--socket", str(tmp_path / "no"),
                                                            "--db", str(db)]
        return logwatch_text("sql", *where, *args, query)

    try:
        up(sock, proc)
        answer = sql(sock, query)
        assert len(answer["rows"]) == 100  # type: ignore[arg-type]
        assert answer["truncated"] == "row limit 100 reached"
        table = cli()
        assert table.stdout.splitlines()[-1] == "(100 rows; truncated: row limit 100 reached)"
        as_json = json.loads(cli("--json").stdout)
        assert len(as_json["rows"]) == 100 and as_json["truncated"] == "row limit 100 reached"
        as_csv = cli("--csv")
        assert len(as_csv.stdout.splitlines()) == 101  # the header and 100 rows
        assert "truncated: row limit 100 reached" in as_csv.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    offline = cli("--csv", via_socket=False)  # the CLI alone: the default limit, same notice
    assert len(offline.stdout.splitlines()) == 10_001
    assert "truncated: row limit 10,000 reached" in offline.stderr


@pytest.mark.parametrize("message", [
    {"op": "incidents", "limit": "ten"},
    {"op": "incidents", "limit": -1},
    {"op": "incidents", "limit": 10**12},
    {"op": "incidents", "limit": True},
    {"op": "incidents", "limit": None},
    {"op": "sql", "query": 42},
    {"op": "sql"},
    {"op": "snapshot", "hash": ["x"]},
    {"op": "subscribe", "events": "finding"},
    {"op": "subscribe", "events": ["finding", "nope"]},
    {"op": "subscribe", "events": [["lines"]]},
    {"op": "subscribe", "events": [None]},
    {"op": 7},
    {"no": "op"},
    # nested too deep for the JSON parser: a RecursionError, not a ValueError
    pytest.param("[" * 200_000, id="nested-too-deep"),
])
def test_every_malformed_request_is_answered_and_the_connection_stays(
        malformed_target: tuple[subprocess.Popen[bytes], Path, Path],
        message: dict[str, object] | str) -> None:
    proc, _, sock = malformed_target
    assert proc.poll() is None, "an earlier malformed request ended the daemon"
    raw = message if isinstance(message, str) else json.dumps(message)

    async def exchange() -> tuple[dict[str, object], dict[str, object]]:
        reader, writer = await asyncio.open_unix_connection(str(sock))
        writer.write(raw.encode() + b"\n" + b'{"op": "status"}\n')
        await writer.drain()
        first = json.loads(await asyncio.wait_for(reader.readline(), 10))
        second = json.loads(await asyncio.wait_for(reader.readline(), 10))
        writer.close()
        return first, second

    first, second = asyncio.run(exchange())
    assert first["ok"] is False and first["error"]
    assert "Traceback" not in str(first["error"])
    assert second["ok"] is True and "status" in second


@pytest.mark.slow
def test_every_documented_event_kind_can_be_asked_for(
        following: tuple[subprocess.Popen[bytes], Path, Path]) -> None:
    from logwatch.daemon.client import subscribe
    from logwatch.daemon.protocol import EVENT_KINDS

    _, _, sock = following
    assert {"signature_disabled", "launch", "diagnosis"} <= EVENT_KINDS

    async def ask() -> None:
        async with subscribe(sock, sorted(EVENT_KINDS)) as stream:
            assert stream.daemon is not None and set(stream.daemon["events"]) == EVENT_KINDS

    asyncio.run(ask())


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.slow
def test_clients_that_never_read_their_answers_cannot_grow_the_daemon(
        following: tuple[subprocess.Popen[bytes], Path, Path]) -> None:
    """Each asks for 16 MiB of escape characters (six bytes each as JSON) and never reads:
    the daemon used to buffer ~100 MiB per client. Answers waiting for their readers are
    bounded (64 MiB in all; a bigger one is answered busy), and so is a value's JSON size."""
    proc, _, sock = following
    before = peak_rss_mib(proc.pid)
    clients = []
    for _ in range(12):  # one after another: each answer made before the next is asked
        client = socket.socket(socket.AF_UNIX)
        client.connect(str(sock))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.sendall(json.dumps({"op": "sql", "query": "SELECT repeat(chr(27), 60000) "
                                   "FROM range(300)"}).encode() + b"\n")
        clients.append(client)
        wait_for("the answer to be made", lambda: ask(sock, {"op": "status"})[  # type: ignore[index]
            "status"]["queries_running"] == 0, timeout=120)
    grown = peak_rss_mib(proc.pid) - before
    answers = []
    for client in clients:
        with client.makefile("rb") as replies:
            answers.append(json.loads(replies.readline()))
        client.close()
    assert grown < 600, f"the daemon grew {grown:.0f} MiB"
    made = [a for a in answers if a["ok"]]
    assert made and all(a["truncated"] == "size limit 16 MiB reached" for a in made)
    assert any("MiB of answers wait for their clients" in str(a.get("error")) for a in answers)
