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


def test_a_running_daemon_exports_on_its_timer_and_the_cli_says_who_holds_it(
        tmp_path: Path) -> None:
    """`[export]` of docs/fleet.md: the daemon exports at start and every every_minutes
    (a copy made between its commits: its own connection may not write files), while it
    holds the history; `logwatch export` on that file says the daemon does it."""
    from tests.following import Running

    fleet, log, db = tmp_path / "fleet", tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_text(_today((SAMPLES / "mtp_tensor_mismatch_glm_033.log").read_bytes()
                          .decode()))
    text = (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")
    example = next(b.split("```", 1)[0] for b in text.split("```toml\n")[1:] if "[export]" in b)
    config = tmp_path / "lw.toml"  # the docs' section, its directory and pace this test's
    config.write_text(example.replace("/srv/fleet", str(fleet)).replace('"gpu1"', '"gpu7"')
                      .replace("every_minutes = 60 ", "every_minutes = 0.02 "))
    daemon = Running("--file", str(log), "--db", str(db), "--config", str(config),
                     sock=tmp_path / "lw.sock")
    launches = f"{fleet}/launches/**/*.parquet"

    def exported() -> list[tuple[object, ...]]:
        if not list(fleet.glob("launches/host=gpu7/day=*/*.parquet")):
            return []
        try:
            return duckdb.sql(f"SELECT host, outcome, root_signature FROM read_parquet("
                              f"'{launches}', hive_partitioning = true)").fetchall()
        except duckdb.Error:  # a file being replaced as it is read: the next look
            return []

    try:
        from tests.following import wait_for

        rows = wait_for(lambda: (got := exported()) and got[0][1] == "failed" and got, 60,
                        "the daemon's export of the failed launch")
        assert rows == [("gpu7", "failed", "weights.tensor_size_mismatch")]
        held = subprocess.run([sys.executable, "-m", "logwatch", "export", "--parquet",
                               str(tmp_path / "other"), "--db", str(db)], cwd=ROOT,
                              capture_output=True, text=True, check=False)
        assert held.returncode == 2 and "[export]" in held.stderr, held.stdout  # still held
        assert not (tmp_path / "other").exists()
    finally:
        assert daemon.stop() == 0, daemon.stderr
    assert '"exported"' in daemon.stderr and not list(tmp_path.glob("h.duckdb.export*"))
