"""A file whose name is not UTF-8, dropped into a directory followed by a glob (anyone who can
write the log directory can do it), once made every commit fail for good: the name went into
the checkpoint, DuckDB refused it, and the daemon retried the same commit for ever. Now its
name is stored and shown with the odd bytes as `\\xNN`, and nothing stops."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.following import Running, accepted_rows, spec_line
from tests.inprocess import logwatch


@pytest.mark.slow
def test_a_file_name_that_is_not_utf8_stops_nothing(tmp_path: Path) -> None:
    logs, db = tmp_path / "logs", tmp_path / "h.duckdb"
    logs.mkdir()
    (logs / "vllm.log").write_bytes(spec_line(1))
    (tmp_path / "none.toml").write_text("")
    daemon = Running("--file", str(logs / "*.log"), "--db", str(db), "--config",
                     str(tmp_path / "none.toml"),
                     sock=tmp_path / "lw.sock")
    try:
        daemon.wait_status(lambda st: st["findings_recorded"] == 1, 60, "the first finding")
        bad = os.path.join(os.fsencode(logs), b"evil\xff\x9b.log")
        with open(bad, "wb") as out:
            out.write(spec_line(2))
        with open(logs / "vllm.log", "ab") as out:
            out.write(spec_line(3))
        state = daemon.wait_status(lambda st: st["findings_recorded"] == 3
                                   and not st["pending"], 60, "both new findings")
        assert state["database"]["writable"] is True
        names = [s["name"] for s in state["sources"]]
        assert any(name.endswith("evil\\xff\\x9b.log") for name in names), names
        shown = logwatch("status", "--socket", str(daemon.sock))
        assert shown.returncode == 0
        assert b"\x9b" not in shown.stdout and b"evil\\xff\\x9b.log" in shown.stdout
    finally:
        assert daemon.stop() == 0
    assert sorted(n for n, _ in accepted_rows(db)) == [1, 2, 3]
