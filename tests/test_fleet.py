"""docs/fleet.md as written: three simulated hosts scan their logs (two failing, one
healthy, all launched today), each exports its history to one dataset directory, twice (the
second adds nothing), and the documented query names the failed configurations per host."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from pathlib import Path

import duckdb

from tests.conftest import ROOT, SAMPLES

HOSTS = {"gpu1": "demo_marlin_and_mtp.log", "gpu2": "mtp_tensor_mismatch_glm_033.log",
         "gpu3": "healthy_033_startup.log"}


def _today(text: str) -> str:
    """The sample's lines as if logged today (vLLM's `MM-DD HH:MM:SS` header)."""
    import re

    return re.sub(r"\b\d\d-\d\d (\d\d:\d\d:\d\d)", lambda m: f"{datetime.now():%m-%d} "
                  + m.group(1), text)


def test_three_hosts_exports_are_one_dataset_the_docs_query_reads(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    for host, sample in HOSTS.items():
        log, db = tmp_path / f"{host}.log", tmp_path / f"{host}.duckdb"
        log.write_text(_today((SAMPLES / sample).read_bytes().decode()))
        subprocess.run([sys.executable, "-m", "logwatch", "scan", "--db", str(db), str(log)],
                       cwd=ROOT, capture_output=True, check=False)
        for _ in range(2):  # again: the same files, nothing twice
            done = subprocess.run([sys.executable, "-m", "logwatch", "export", "--parquet",
                                   str(fleet), "--db", str(db), "--host", host], cwd=ROOT,
                                  capture_output=True, text=True, check=False)
            assert done.returncode == 0, done.stderr
            assert "launches: " in done.stdout
    text = (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")
    query = text.split("```sql\n", 1)[1].split("```", 1)[0].replace("/srv/fleet", str(fleet))
    rows = duckdb.sql(query).fetchall()
    # (host, tp) -> (failed launches, root causes); exported twice, counted once
    failed = {(row[0], row[3]): (row[5], row[6]) for row in rows}
    assert {host for host, _ in failed} == {"gpu1", "gpu2"}  # gpu3 served
    assert failed[("gpu1", 4)] == (1, ["marlin.repack_tile_n"])  # two configurations on it
    assert failed[("gpu1", 2)] == (1, ["weights.tensor_size_mismatch"])
    assert len(rows) == 3 and [r[0] for r in rows].count("gpu2") == 1
    launches = duckdb.sql(f"SELECT host, count(*) FROM read_parquet('{fleet}/launches/**/*."
                          "parquet', hive_partitioning = true) GROUP BY ALL ORDER BY 1"
                          ).fetchall()
    assert [h for h, _ in launches] == ["gpu1", "gpu2", "gpu3"]


def test_a_host_name_that_is_not_a_plain_name_is_refused(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "logwatch", "export", "--parquet",
                           str(tmp_path / "f"), "--db", str(tmp_path / "none.duckdb"),
                           "--host", "x'; DROP TABLE launches; --"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "letters, digits" in done.stderr
