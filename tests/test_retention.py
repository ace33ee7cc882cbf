"""Retention over real histories: launches that started more than keep_days ago go with
their incidents, findings and diagnoses; each source's newest launch, every action and the
operators' events stay; `logwatch prune` does it on a file, the daemon with `[database]
keep_days` at start (and hourly)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

from logwatch.core.remedy.actions import propose
from logwatch.daemon.client import request, wait_ready
from logwatch.store.actions import record_action
from logwatch.store.db import open_store
from logwatch.store.retention import prune
from tests.conftest import ROOT, SAMPLES

NOW = datetime(2026, 12, 2, 12, 0)


def _history(tmp_path: Path) -> Path:
    db = tmp_path / "h.duckdb"
    subprocess.run([sys.executable, "-m", "logwatch", "scan", "--db", str(db),
                    str(SAMPLES / "demo_marlin_and_mtp.log"),  # two launches, 10-14
                    str(SAMPLES / "mtp_tensor_mismatch_glm_033.log")],  # one, 11-27
                   cwd=ROOT, capture_output=True, check=False)
    return db


def _counts(db: Path) -> dict[str, int]:
    with open_store(db) as store:
        return {t: store.query(f"SELECT count(*) FROM {t}")[0][0] for t in
                ("launches", "incidents", "findings", "diagnoses", "actions")}


def test_old_launches_go_with_what_they_hold_the_newest_of_each_source_and_actions_stay(
        tmp_path: Path) -> None:
    db = _history(tmp_path)
    with open_store(db) as store:
        (old,) = store.query("SELECT id FROM launches WHERE number = 1 AND source LIKE "
                             "'%demo_marlin%'")[0]
        record_action(store, propose("vllm-1-aaaaaaaa", "vllm", "p", "p", "s", "sig", "f",
                                     NOW - timedelta(days=400), "an old relaunch"))
    before = _counts(db)
    with open_store(db) as store:
        done = prune(store, 30, NOW)
        left = store.query("SELECT number, source FROM launches ORDER BY source")
        orphans = store.query("SELECT count(*) FROM findings f LEFT JOIN incidents i ON "
                              "i.id = f.incident_id WHERE i.id IS NULL")[0][0]
        gone = store.query(f"SELECT count(*) FROM incidents WHERE launch_id = '{old}'")[0][0]
    after = _counts(db)
    assert done.removed["launches"] == 1 and gone == 0 and orphans == 0
    # the sample's second launch is older than 30 days too, but its source's newest: kept
    assert [n for n, _ in left] == [2, 1]
    assert after["findings"] < before["findings"] and after["incidents"] < before["incidents"]
    assert after["actions"] == before["actions"] == 1  # a breaker is read from these
    assert done.describe().endswith(", 1 launches")
    with open_store(db) as store:
        assert prune(store, 30, NOW).removed["launches"] == 0  # again: nothing more


def test_logwatch_prune_on_a_file(tmp_path: Path) -> None:
    db = _history(tmp_path)
    done = subprocess.run([sys.executable, "-m", "logwatch", "prune", "--keep-days", "30",
                           "--db", str(db)], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "removed" in done.stdout and "1 launches" in done.stdout
    refused = subprocess.run([sys.executable, "-m", "logwatch", "prune", "--keep-days", "0",
                              "--db", str(db)], cwd=ROOT, capture_output=True, text=True,
                             check=False)
    assert refused.returncode == 2


def test_the_daemon_prunes_its_history_with_keep_days(tmp_path: Path) -> None:
    db = _history(tmp_path)
    log, sock, config = tmp_path / "vllm.log", tmp_path / "lw.sock", tmp_path / "lw.toml"
    log.write_bytes(b"")
    config.write_text("[database]\nkeep_days = 30\n")
    proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--file", str(log),
                             "--db", str(db), "--socket", str(sock), "--config", str(config)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        asyncio.run(wait_ready(sock, 30, alive=lambda: proc.poll() is None))

        def launches() -> int:
            answer = asyncio.run(request(sock, "sql", query="SELECT count(*) AS n FROM "
                                         "launches"))
            return int(answer["rows"][0][0])

        import time

        deadline = time.monotonic() + 30
        while launches() != 2:  # the prune at start is in
            assert time.monotonic() < deadline, "not pruned"
            time.sleep(0.1)  # polling the daemon; the condition decides
        held = subprocess.run([sys.executable, "-m", "logwatch", "prune", "--keep-days", "1",
                               "--db", str(db)], cwd=ROOT, capture_output=True, text=True,
                              timeout=60, check=False)
        assert held.returncode == 2 and "[database] keep_days" in held.stderr, held.stderr
    finally:
        proc.terminate()
        proc.wait(30)
    pruned = [json.loads(line) for line in proc.stderr.read().decode().splitlines()
              if '"pruned"' in line] if proc.stderr else []
    assert pruned and pruned[0]["launches"] == 1 and pruned[0]["keep_days"] == 30


def test_the_daemons_writer_forgets_what_a_prune_took(tmp_path: Path) -> None:
    """The live writer skips writing what it knows it stored (daemon/upkeep, store/live):
    after the daemon's prune it knows nothing, so a source or snapshot the prune removed is
    written again with the next finding, not referenced while gone."""
    from types import SimpleNamespace

    from logwatch.daemon.upkeep import _pruned
    from logwatch.store.live import LiveWriter

    db = _history(tmp_path)
    with open_store(db) as store:
        writer = LiveWriter(store, None)  # type: ignore[arg-type]  # nothing is committed
        writer._stored.add("a snapshot hash")
        writer._known_incidents.add("an incident")
        writer._sources_written["a stream"] = 0.0
        done = _pruned(SimpleNamespace(writer=writer), store, 30)  # type: ignore[arg-type]
    assert done.removed["launches"] >= 1
    assert not writer._stored and not writer._known_incidents and not writer._sources_written
