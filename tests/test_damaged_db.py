"""A damaged history file: `scan --db`, `sql` and `history` exit 2 with one paragraph that
names the file and says to move it aside; never a traceback, and a scan's report is kept."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from logwatch.cli.history import HISTORY_QUERY
from logwatch.cli.main import main
from logwatch.core.signatures.library import Library
from logwatch.scan.offline import resolve_inputs, scan_inputs
from logwatch.store.db import open_store
from logwatch.store.record import ScanRecorder
from tests.conftest import SAMPLES
from tests.inprocess import Completed, logwatch_text

DEMO = SAMPLES / "demo_marlin_and_mtp.log"
HEADER_BYTES = 3 * 4096  # DuckDB: a file header, then two database headers
BLOCK_BYTES = 256 * 1024


@pytest.fixture(scope="module")
def good_db(tmp_path_factory: pytest.TempPathFactory, library: Library) -> Path:
    db = tmp_path_factory.mktemp("history") / "good.duckdb"
    recorder = ScanRecorder()
    report = scan_inputs(resolve_inputs([str(DEMO)]), library, recorder=recorder)
    with open_store(db) as store:
        recorder.write(store, report)
    return db


def damaged_copies(good: Path, into: Path) -> Iterator[tuple[int, Path]]:
    """The good file with 1 KiB of junk written near the start of one block, block by block."""
    blocks = (good.stat().st_size - HEADER_BYTES) // BLOCK_BYTES
    for block in range(blocks):
        copy = into / f"damaged-{block}.duckdb"
        shutil.copyfile(good, copy)
        with open(copy, "r+b") as f:
            f.seek(HEADER_BYTES + block * BLOCK_BYTES + 1000)
            f.write(b"\xde\xad\xbe\xef" * 256)
        yield block, copy


def partly_damaged(good: Path, into: Path) -> Path:
    """A copy DuckDB opens, whose incident history cannot be read any more."""
    for _, copy in damaged_copies(good, into):
        try:
            con = duckdb.connect(str(copy), read_only=True)
        except duckdb.Error:
            continue
        try:
            con.execute(HISTORY_QUERY.format(limit=20)).fetchall()
        except duckdb.Error:
            return copy
        finally:
            con.close()
    raise AssertionError("no block of the test database holds the incident history")


def logwatch(*args: str) -> Completed[str]:
    return logwatch_text(*args, env={"NO_COLOR": "1"})


def assert_damage_paragraph(stderr: str, db: Path) -> None:
    message = stderr.strip()
    assert "Traceback" not in stderr
    assert len(message.splitlines()) == 1, stderr  # one paragraph
    assert message.startswith(f"logwatch: {db}: the database file is damaged"), stderr
    assert f"move it aside (mv {db} {db}.damaged)" in message, stderr


@pytest.mark.slow
def test_scan_db_on_a_partly_damaged_database_prints_the_report_and_exits_2(
        good_db: Path, tmp_path: Path) -> None:
    db = partly_damaged(good_db, tmp_path)
    scan = logwatch("scan", "--db", str(db), str(DEMO))
    assert scan.returncode == 2, scan.stderr
    assert "ROOT CAUSE" in scan.stdout  # the findings are on stdout, not lost
    assert_damage_paragraph(scan.stderr, db)
    assert "This scan was not recorded" in scan.stderr
    # reading the same file says the same thing
    sql = logwatch("sql", "--db", str(db), "--socket", str(tmp_path / "no-daemon.sock"),
                   HISTORY_QUERY.format(limit=20))
    assert sql.returncode == 2
    assert_damage_paragraph(sql.stderr, db)
    history = logwatch("history", "--db", str(db))
    assert history.returncode == 2
    assert_damage_paragraph(history.stderr, db)


@pytest.mark.parametrize("content", [os.urandom(5000), b"hello\n"], ids=["junk", "text"])
def test_a_file_that_is_not_a_database_is_refused_before_scanning(tmp_path: Path,
                                                                  content: bytes) -> None:
    db = tmp_path / "history.duckdb"
    db.write_bytes(content)
    scan = logwatch("scan", "--db", str(db), str(DEMO))
    assert scan.returncode == 2
    assert scan.stdout == ""  # refused before scanning: nothing was read, nothing is lost
    assert_damage_paragraph(scan.stderr, db)
    assert "Nothing was scanned." in scan.stderr
    for command in (["sql", "--socket", str(tmp_path / "none.sock"), "SELECT 1"], ["history"]):
        result = logwatch(command[0], "--db", str(db), *command[1:])
        assert result.returncode == 2
        assert_damage_paragraph(result.stderr, db)
    assert db.read_bytes() == content  # left as it was, for whoever recovers it


@pytest.mark.slow
def test_damage_in_any_block_gives_exit_1_or_2_never_a_traceback(
        good_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each block of a real history damaged in turn; in-process, so an exception that would
    be a traceback fails the test. Exit 1: the damage was not in anything the scan touched."""
    codes = []
    for _, copy in damaged_copies(good_db, tmp_path):
        code = main(["scan", "--db", str(copy), str(DEMO)])
        out, err = capsys.readouterr()
        assert code in (1, 2), err
        if code == 2:
            assert_damage_paragraph(err, copy)
            refused = "Nothing was scanned." in err and out == ""
            assert refused or ("This scan was not recorded" in err and "ROOT CAUSE" in out)
        codes.append(code)
        for command in (["sql", "--socket", str(tmp_path / "none.sock"),
                         "SELECT * FROM incident_timeline"], ["history"]):
            code = main([command[0], "--db", str(copy), *command[1:]])
            _, err = capsys.readouterr()
            assert code in (0, 2), err
            if code == 2:
                assert_damage_paragraph(err, copy)
    print("exit codes by damaged block:", codes)
    assert 2 in codes and 1 in codes
