"""The DuckDB history on real database files: migrations, idempotent recording, read-only SQL."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from logwatch.core.signatures.library import Library
from logwatch.scan.offline import resolve_inputs, scan_inputs
from logwatch.scan.triage import SnapshotOptions
from logwatch.store.db import DatabaseError, open_store
from logwatch.store.operator_sql import read_only_query
from logwatch.store.record import ScanRecorder
from logwatch.store.schema import SCHEMA_VERSION
from tests.conftest import ROOT, SAMPLES
from tests.inprocess import logwatch_text

DEMO = SAMPLES / "demo_marlin_and_mtp.log"
UNCOVERED = str(ROOT / "samples" / "models" / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered")


def record(db: Path, logs: list[Path], library: Library, **options: object) -> dict[str, int]:
    recorder = ScanRecorder()
    report = scan_inputs(resolve_inputs([str(p) for p in logs]), library,
                         snapshot_options=SnapshotOptions(**options),  # type: ignore[arg-type]
                         recorder=recorder)
    with open_store(db) as store:
        return recorder.write(store, report)


def test_recording_twice_adds_nothing(tmp_path: Path, library: Library) -> None:
    db = tmp_path / "h.duckdb"
    first = record(db, [DEMO], library, model_dir=UNCOVERED, gpu_capability=90)
    assert first["findings"] > 20 and first["incidents"] > 5 and first["diagnoses"] >= 2
    again = record(db, [DEMO], library, model_dir=UNCOVERED, gpu_capability=90)
    assert again == {"sources": 0, "snapshots": 0, "launches": 0, "incidents": 0, "findings": 0,
                     "diagnoses": 0}


def test_a_grown_log_adds_only_its_new_findings(tmp_path: Path, library: Library) -> None:
    db, log = tmp_path / "h.duckdb", tmp_path / "vllm.log"
    lines = DEMO.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:80]))
    first = record(db, [log], library)
    log.write_text("".join(lines))
    grown = record(db, [log], library)
    assert grown["sources"] == 0  # same first bytes: the same source
    assert grown["findings"] > 0
    total = read_only_query(db, "SELECT count(*) FROM findings").rows[0][0]
    assert total == first["findings"] + grown["findings"]
    assert read_only_query(db, "SELECT count(*) FROM (SELECT id FROM findings GROUP BY id "
                               "HAVING count(*) > 1)").rows[0][0] == 0


def test_every_finding_and_incident_references_its_snapshot(tmp_path: Path,
                                                           library: Library) -> None:
    db = tmp_path / "h.duckdb"
    record(db, [DEMO], library, model_dir=UNCOVERED, gpu_capability=90)
    orphans = read_only_query(db, """
        SELECT count(*) FROM findings f LEFT JOIN snapshots s ON s.hash = f.snapshot_hash
        WHERE s.hash IS NULL""").rows[0][0]
    assert orphans == 0
    rows = read_only_query(db, """
        SELECT i.signature, s.tensor_parallel_size, s.quant_scheme, s.mtp_covered
        FROM incidents i JOIN snapshots s ON s.hash = i.snapshot_hash
        WHERE i.signature IN ('marlin.repack_tile_n', 'weights.tensor_size_mismatch')
        ORDER BY i.signature""").rows
    assert rows == [("marlin.repack_tile_n", 4, "W4A4_NVFP4", False),
                    ("weights.tensor_size_mismatch", 2, "W4A4_NVFP4", False)]
    rows = read_only_query(db, "SELECT diagnosis FROM incident_timeline "
                               "WHERE signature = 'weights.tensor_size_mismatch'").rows
    assert rows == [("mtp_ignore_list_gap",)]


def test_failures_by_config_answers_which_configs_failed(tmp_path: Path,
                                                         library: Library) -> None:
    db = tmp_path / "h.duckdb"
    record(db, [DEMO], library, model_dir=UNCOVERED, gpu_capability=90)
    rows = read_only_query(db, "SELECT tensor_parallel_size, signatures FROM "
                               "failures_by_config ORDER BY tensor_parallel_size").rows
    by_tp = dict(rows)
    assert "marlin.repack_tile_n" in by_tp[4]
    assert "weights.tensor_size_mismatch" in by_tp[2]


def test_secrets_never_reach_the_database(tmp_path: Path, library: Library) -> None:
    db, log = tmp_path / "h.duckdb", tmp_path / "vllm.log"
    log.write_text(
        "(APIServer pid=1) INFO 11-29 22:38:00 [startup.py:75] non-default args: {'model_tag': "
        "'/m', 'hf_token': 'hf_abcdefghijklmnopqrstuvwxyz0123456789'}\n"
        "(EngineCore pid=2) ERROR 11-29 22:38:01 [core.py:1] RuntimeError: CUDA error: "
        "an illegal memory access was encountered\n")
    record(db, [log], library, cmdline="vllm serve /m --api-key sk-supersecretvalue12345",
           gpu_capability=90)
    con = duckdb.connect(str(db), read_only=True)
    dump = json.dumps([con.execute(f"SELECT * FROM {t}").fetchall() for t in
                       ("snapshots", "incidents", "findings", "diagnoses", "scans")], default=str)
    con.close()
    assert "hf_abcdefghij" not in dump and "supersecretvalue" not in dump


def test_a_newer_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    open_store(db).close()
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                [str(SCHEMA_VERSION + 1)])
    con.close()
    with pytest.raises(DatabaseError, match="newer than this logwatch understands"):
        open_store(db)


def test_not_a_database(tmp_path: Path) -> None:
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(os.urandom(4096))
    with pytest.raises(DatabaseError):
        open_store(junk)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("INSERT INTO meta VALUES ('x', 'y')", "this is INSERT"),
        ("SELECT 1; DROP TABLE incidents", "one statement at a time, got 2"),
        ("DELETE FROM findings", "this is DELETE"),
        ("COPY incidents TO '/tmp/x.csv'", "this is COPY"),
        ("ATTACH '/tmp/other.duckdb'", "this is ATTACH"),
        ("SELECT * FROM read_csv('/etc/passwd')", r"read_csv\(\) is not one that only reads"),
        ("SELEC 1", "cannot parse the query"),
    ],
)
def test_sql_is_read_only(tmp_path: Path, query: str, message: str) -> None:
    db = tmp_path / "h.duckdb"
    open_store(db).close()
    with pytest.raises(DatabaseError, match=message):
        read_only_query(db, query)


@pytest.mark.slow
def test_cli_sql_history_and_a_locked_database(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    no_daemon = ["--socket", str(tmp_path / "none.sock")]  # not a daemon of /run/logwatch
    scan = logwatch_text("scan", "--db", str(db), str(DEMO), "--model-dir", UNCOVERED,
                         "--gpu-capability", "9.0", env={"NO_COLOR": "1"})
    assert scan.returncode == 1 and "recorded in" in scan.stderr
    out = logwatch_text("sql", *no_daemon, "--db", str(db), "--json",
                        "SELECT signature, count FROM incidents WHERE root_cause "
                        "ORDER BY signature").stdout
    assert json.loads(out) == {"columns": ["signature", "count"], "truncated": None,
                               "rows": [{"signature": "marlin.repack_tile_n", "count": 4},
                                        {"signature": "weights.tensor_size_mismatch",
                                         "count": 2}]}
    csv_out = logwatch_text("sql", *no_daemon, "--db", str(db), "--csv", "SELECT 1 AS one").stdout
    assert csv_out.splitlines() == ["one", "1"]
    history = logwatch_text("history", "--db", str(db)).stdout
    assert "marlin.repack_tile_n" in history and "mtp_ignore_list_gap" in history
    refused = logwatch_text("sql", *no_daemon, "--db", str(db), "DROP TABLE findings")
    assert refused.returncode == 2 and "only read-only queries" in refused.stderr
    holder = duckdb.connect(str(db))  # another process holds the file read-write
    try:  # (a process of its own: DuckDB shares one instance between connections of one)
        locked = subprocess.run([sys.executable, "-m", "logwatch", "sql", *no_daemon, "--db",
                                 str(db), "SELECT 1"], env={**os.environ, "NO_COLOR": "1"},
                                capture_output=True, text=True, cwd=ROOT, check=False)
    finally:
        holder.close()
    assert locked.returncode == 2 and "in use by another process" in locked.stderr
    missing = logwatch_text("history", "--db", str(tmp_path / "none.duckdb"))
    assert missing.returncode == 2 and "no database yet" in missing.stderr


def test_snapshot_diff_by_hash_from_the_history(tmp_path: Path, library: Library) -> None:
    db = tmp_path / "h.duckdb"
    record(db, [DEMO], library, gpu_capability=90)
    rows = read_only_query(db, "SELECT hash FROM snapshots WHERE tensor_parallel_size IN "
                               "(2, 4) ORDER BY tensor_parallel_size DESC").rows
    (tp4,), (tp2,) = rows
    out = logwatch_text("snapshot", "diff", tp4[:8], tp2[:8], "--db", str(db))
    assert out.returncode == 1
    assert "launch.tensor_parallel_size: 4 -> 2" in out.stdout
    bad = logwatch_text("snapshot", "diff", "zz';--", tp2, "--db", str(db))
    assert bad.returncode == 2 and "neither a snapshot file nor a snapshot hash" in bad.stderr


def test_live_incidents_fold_forward_and_replays_add_nothing(tmp_path: Path,
                                                            library: Library) -> None:
    from datetime import datetime

    from logwatch.core.signatures.block_scan import BlockScanner
    from logwatch.core.signatures.matcher import Matcher
    from logwatch.store.live import Checkpoint, LiveFinding, LiveWriter

    scanner = BlockScanner(Matcher(library.signatures), "file:x", datetime(2026, 11, 29))
    data = DEMO.read_bytes()
    found = scanner.feed(data) + scanner.finish()
    marlin = [LiveFinding(f, "gen") for f in found if f.signature.id == "marlin.repack_tile_n"]
    assert len(marlin) == 4
    with open_store(tmp_path / "h.duckdb") as store:
        writer = LiveWriter(store, library)
        assert writer.commit(marlin[:2], [Checkpoint("file:x", "gen", 10, 2)]) == 2
        assert writer.commit(marlin[:2], []) == 0  # a replay after a crash
        assert writer.commit(marlin[1:], []) == 2  # overlaps one, brings two new
        rows = store.query("SELECT count, first_line, last_line, processes FROM incidents "
                           "WHERE signature = 'marlin.repack_tile_n'")
        by_findings = store.query("SELECT count(*), min(line), max(line), "
                                  "list_sort(list(DISTINCT process)) FROM findings "
                                  "WHERE signature = 'marlin.repack_tile_n'")
    assert rows == by_findings
    assert rows[0][0] == 4 and len(rows[0][3]) == 4


def _demo_findings(library: Library, signature: str) -> list[Any]:
    from datetime import datetime

    from logwatch.core.signatures.block_scan import BlockScanner
    from logwatch.core.signatures.matcher import Matcher
    from logwatch.store.live import LiveFinding

    scanner = BlockScanner(Matcher(library.signatures), "file:x", datetime(2026, 11, 29))
    found = scanner.feed(DEMO.read_bytes()) + scanner.finish()
    return [LiveFinding(f, "gen") for f in found if f.signature.id == signature]


def test_what_the_live_writer_knows_is_stored_goes_with_a_prune(
        tmp_path: Path, library: Library, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer skips asking whether an incident is stored, and writing a stream's
    `sources` row, when it wrote them itself (a statement costs DuckDB milliseconds on every
    commit a watcher waits for). Rows deleted behind it (a prune) are told to it: the next
    finding's incident is new again, announced as new, and its source row is back."""
    from logwatch.store import live
    from logwatch.store.live import LiveWriter

    marlin = _demo_findings(library, "marlin.repack_tile_n")
    with open_store(tmp_path / "h.duckdb") as store:
        writer = LiveWriter(store, library)
        writer.commit(marlin[:1], [])
        assert len(writer.new_incidents) == 1
        seen = store.query("SELECT last_seen FROM sources WHERE id = 'gen'")
        writer.commit(marlin[1:2], [])
        assert writer.new_incidents == {}  # known: not new, and not asked
        assert store.query("SELECT last_seen FROM sources WHERE id = 'gen'") == seen
        monkeypatch.setattr(live, "SOURCE_REFRESH_SECONDS", 0.0)
        writer.commit(marlin[2:3], [])  # refreshed when it is due
        assert store.query("SELECT last_seen FROM sources WHERE id = 'gen'") != seen
        monkeypatch.setattr(live, "SOURCE_REFRESH_SECONDS", 3600.0)
        for table in ("findings", "incidents", "sources"):
            store.con.execute(f"DELETE FROM {table}")
        writer.forget_stored()
        writer.commit(marlin[3:4], [])
        assert len(writer.new_incidents) == 1
        assert store.query("SELECT count(*) FROM sources WHERE id = 'gen'") == [(1,)]
        assert store.query("SELECT count FROM incidents") == [(1,)]


def test_a_failed_commit_teaches_the_live_writer_nothing(
        tmp_path: Path, library: Library) -> None:
    """What a rolled-back commit wrote is not taken as stored: after a commit the database
    refused, the same incident is new when it lands, and its source row is written."""
    from logwatch.store.live import LiveWriter

    marlin = _demo_findings(library, "marlin.repack_tile_n")
    with open_store(tmp_path / "h.duckdb") as store:
        writer = LiveWriter(store, library)
        real = store.insert_new

        def refuse(table: str, rows: Any) -> Any:
            real(table, rows)
            raise duckdb.IOException("IO Error: could not write file: No space left on device")

        store.insert_new = refuse  # type: ignore[method-assign]
        with pytest.raises(duckdb.IOException):
            writer.commit(marlin[:1], [])
        store.insert_new = real  # type: ignore[method-assign]
        assert store.query("SELECT count(*) FROM sources") == [(0,)]
        writer.commit(marlin[:1], [])
        assert len(writer.new_incidents) == 1
        assert store.query("SELECT count(*) FROM sources WHERE id = 'gen'") == [(1,)]


def test_incidents_folded_by_update_equal_the_upsert(
        tmp_path: Path, library: Library, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few incidents already stored are folded by an UPDATE each (LiveWriter._fold_into),
    more in one upsert: the same commits leave the very same incident rows either way, and
    a row deleted behind the writer (it still takes it as stored) is written again."""
    from logwatch.store import live
    from logwatch.store.live import LiveWriter

    marlin = _demo_findings(library, "marlin.repack_tile_n")
    assert len(marlin) == 4

    def commits(db: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        with open_store(db) as store:
            writer = LiveWriter(store, library)
            for batch in (marlin[:1], marlin[2:3], marlin[1:2], marlin[3:]):
                writer.commit(batch, [])
            rows = store.query("SELECT * EXCLUDE (scan_id) FROM incidents ORDER BY id")
            store.con.execute("DELETE FROM incidents")  # behind the writer's back
            writer.commit(marlin[:1], [])  # already stored: adds nothing
            later = dataclasses.replace(marlin[0].finding, lineno=10_000)  # its incident's
            writer.commit([live.LiveFinding(later, "gen")], [])
            again = store.query("SELECT count, first_line, last_line FROM incidents")
        return rows, again

    folded = commits(tmp_path / "folded.duckdb")
    monkeypatch.setattr(live, "FOLDED_ONE_BY_ONE", 0)
    upserted = commits(tmp_path / "upserted.duckdb")
    assert folded == upserted
    counts = {row[0]: row[1:] for row in folded[0]}
    assert len(counts) == 1 and 4 in next(iter(counts.values()))  # four findings folded
    assert folded[1] == [(1, 10_000, 10_000)]


def test_a_stored_launch_without_a_seq_is_updated_not_refused(
        tmp_path: Path, library: Library) -> None:
    """Whether a launch's row is there is asked, not read from its `seq`: a row without one
    (a database written by hand) is updated and given the next seq, as INSERT OR REPLACE
    did, instead of a plain INSERT that the primary key refuses, which quarantined the
    launch at every commit (found in review)."""
    from logwatch.core.diagnosis.analysis import analyse
    from logwatch.core.launches.lifecycle import LaunchBook
    from logwatch.core.snapshot.model import Snapshot
    from logwatch.store.live import LiveFinding, LiveWriter, launch_id

    marlin = _demo_findings(library, "marlin.repack_tile_n")
    book = LaunchBook()
    with open_store(tmp_path / "h.duckdb") as store:
        writer = LiveWriter(store, library)
        for n, item in enumerate(marlin[:3]):
            change = book.observe(item.finding, "gen")
            lid = launch_id(change.launch)
            writer.commit([LiveFinding(change.finding, "gen", launch=lid)], [],
                          [analyse(change.launch.frozen(), Snapshot())])
            assert writer.last_quarantined == [], n
            if n == 0:
                store.con.execute("UPDATE launches SET seq = NULL")
        assert store.query("SELECT last_line, seq FROM launches") == [
            (marlin[2].finding.lineno, 1)]
        assert store.query("SELECT count(*) FROM quarantined") == [(0,)]


def test_positions_move_by_update_and_by_insert_alike(tmp_path: Path, library: Library) -> None:
    """A single stream's position is moved by an UPDATE of its row (LiveWriter's
    _write_positions), several at once and a row not there yet by INSERT OR REPLACE: each
    commit leaves exactly the positions it was given, one row a stream, whichever way."""
    from logwatch.store.live import Checkpoint, LiveWriter

    marlin = _demo_findings(library, "marlin.repack_tile_n")

    def rows(store: Any) -> list[tuple[Any, ...]]:
        return store.query("SELECT source_id, generation, position, line, cursor, fingerprint "
                           "FROM checkpoints ORDER BY source_id")

    with open_store(tmp_path / "h.duckdb") as store:
        writer = LiveWriter(store, library)
        writer.commit(marlin[:1], [Checkpoint("a", "g1", 10, 2, stream="/x/a.log")])  # insert
        assert rows(store) == [("/x/a.log", "g1", 10, 2, None, "g1")]
        writer.commit([], [Checkpoint("a", "g2", 30, 5, "c1", stream="/x/a.log")])  # update
        assert rows(store) == [("/x/a.log", "g2", 30, 5, "c1", "g2")]
        writer.commit([], [Checkpoint("a", "g2", 40, 6, stream="/x/a.log"),
                           Checkpoint("b", "h1", 7, 1, stream="/x/b.log")])  # both at once
        assert rows(store) == [("/x/a.log", "g2", 40, 6, None, "g2"),
                               ("/x/b.log", "h1", 7, 1, None, "h1")]
        store.con.execute("DELETE FROM checkpoints WHERE source_id = '/x/b.log'")
        writer.commit(marlin[1:2], [Checkpoint("b", "h1", 9, 2, stream="/x/b.log")])
        assert rows(store)[1] == ("/x/b.log", "h1", 9, 2, None, "h1")  # gone: inserted again
        assert writer.checkpoints()["/x/a.log"].offset == 40


@pytest.mark.slow
def test_the_connection_is_recycled_between_commits_and_never_under_a_reader(
        tmp_path: Path, library: Library) -> None:
    """The daemon reopens its DuckDB connection every N commits (DuckDB gives back what it
    keeps per commit only on close): nothing is lost across the reopen, and a socket
    client's query in progress holds it off."""
    import asyncio

    from logwatch.daemon.service import Daemon
    from logwatch.sources.base import MemorySource
    from logwatch.store.db import open_store

    hit = (b"(APIServer pid=1) INFO 10-14 10:00:00 [metrics.py:101] SpecDecoding metrics: "
           b"Mean acceptance length: 1.10, Accepted: 1 tokens, Drafted: 9 tokens, "
           b"Avg Draft acceptance rate: 5.5%\n")
    access = b'INFO:     10.0.0.1:4000 - "GET /health HTTP/1.1" 200 OK\n'
    with open_store(tmp_path / "h.duckdb", service=True) as store:
        with store.reader() as cursor:
            assert not store.recycle()  # a query holds the connection
            assert cursor.execute("SELECT count(*) FROM findings").fetchone() == (0,)
        first = store.con
        daemon = Daemon([MemorySource("mem", [hit + access * 40] * 12, delay=0.06)], library,
                        store)
        daemon.recycle_commits = 2
        asyncio.run(daemon.run())
        assert store.con is not first  # reopened on the way
        rows = store.query("SELECT line, signature FROM findings ORDER BY line")
        count = store.query("SELECT count FROM incidents")
    assert [r[0] for r in rows] == [1 + 41 * n for n in range(12)]
    assert {r[1] for r in rows} == {"spec_decode.low_acceptance"}
    assert count == [(12,)]


def test_every_query_in_the_history_doc_runs(tmp_path: Path, library: Library) -> None:
    """docs/history.md's example queries, against a recorded history of the demo log."""
    db = tmp_path / "h.duckdb"
    record(db, [DEMO], library, model_dir=UNCOVERED, gpu_capability=90)
    text = (ROOT / "docs" / "history.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sql\n(.*?)```", text, flags=re.S)
    queries = [q.strip() for block in blocks for q in block.split(";") if q.strip()
               and not all(ln.startswith("--") for ln in q.strip().splitlines())]
    assert len(queries) >= 5
    answers = [read_only_query(db, query) for query in queries]
    launches, problems = answers[0].rows, answers[1].rows
    assert [(row[1], row[2]) for row in launches] == [
        ("failed", "Tensor size mismatch while loading weights"),
        ("failed", "Marlin repack: size_n is not divisible by tile_n_size")]
    assert ("Marlin repack: size_n is not divisible by tile_n_size", 1, 1, 1) in [
        row[:4] for row in problems]


def test_every_sql_example_in_the_readme_runs(tmp_path: Path, library: Library) -> None:
    db = tmp_path / "h.duckdb"
    record(db, [DEMO], library, model_dir=UNCOVERED, gpu_capability=90)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    queries = re.findall(r'^logwatch sql (?:--db \S+ |--\w+ )*"([^"]+)"', readme, flags=re.M)
    assert len(queries) >= 4
    for query in queries:
        assert read_only_query(db, query).columns, query


def test_sql_output_for_pipelines(tmp_path: Path) -> None:
    """CSV with `\\n` line ends and lists as JSON, a JSON object a line with --jsonl, the
    query from stdin with `-`, and a table that keeps every character when piped."""
    db = tmp_path / "h.duckdb"
    subprocess.run([sys.executable, "-m", "logwatch", "scan", "--db", str(db),
                    str(SAMPLES / "demo_marlin_and_mtp.log")], cwd=ROOT, capture_output=True,
                   check=False)
    base = [sys.executable, "-m", "logwatch", "sql", "--socket", str(tmp_path / "none.sock"),
            "--db", str(db)]

    def sql(*args: str, stdin: bytes | None = None) -> bytes:
        done = subprocess.run([*base, *args], cwd=ROOT, capture_output=True, input=stdin,
                              check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    query = "SELECT ['a', 'b'] AS l, repeat('x', 80) AS long, 2 AS n"
    assert sql("--csv", query) == b'l,long,n\n"[""a"", ""b""]",' + b"x" * 80 + b",2\n"
    assert [json.loads(line) for line in sql("--jsonl", query).splitlines()] == [
        {"l": ["a", "b"], "long": "x" * 80, "n": 2}]
    assert sql("--csv", "-", stdin=b"SELECT 42 AS answer") == b"answer\n42\n"
    assert b"x" * 80 in sql(query)  # not a terminal: nothing cut
