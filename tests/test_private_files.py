"""The history is private: `daemon`, `run` and `scan --db` started with a permissive umask
(0022) still create every file DuckDB makes 0600 and every directory 0700, the WAL included;
the command `run` starts keeps the umask it was given."""

from __future__ import annotations

import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES


def modes(top: Path) -> dict[str, int]:
    """Mode of everything under `top` (and `top` itself), by path relative to `top`."""
    found = {".": stat.S_IMODE(top.stat().st_mode)}
    for path in top.rglob("*"):
        found[str(path.relative_to(top))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def private(found: dict[str, int], top: Path) -> dict[str, int]:
    """The entries that are not private (0600 files, 0700 directories)."""
    return {name: mode for name, mode in found.items()
            if mode != (0o700 if (top / name).is_dir() else 0o600)}


@pytest.mark.slow
def test_the_daemon_keeps_its_history_and_wal_private(tmp_path: Path) -> None:
    log, state = tmp_path / "vllm.log", tmp_path / "state"  # `state` made by the daemon
    log.write_bytes((SAMPLES / "demo_marlin_and_mtp.log").read_bytes())
    proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--file", str(log),
                             "--db", str(state / "h.duckdb"), "--no-socket"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, umask=0o022)
    try:
        deadline = time.monotonic() + 30
        while not (state / "h.duckdb.wal").exists():  # the first commit after the migration
            assert time.monotonic() < deadline and proc.poll() is None, "no WAL appeared"
            time.sleep(0.05)
        found = modes(state)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert {"h.duckdb", "h.duckdb.wal"} <= set(found)
    assert private(found, state) == {}


@pytest.mark.slow
def test_run_keeps_its_history_private_and_the_child_its_umask(tmp_path: Path) -> None:
    state, umask = tmp_path / "state", tmp_path / "umask"
    out = subprocess.run([sys.executable, "-m", "logwatch", "run", "--db",
                          str(state / "h.duckdb"), "--gpu-capability", "9.0", "--",
                          sys.executable, "-c",
                          f"import os; open({str(umask)!r}, 'w').write(oct(os.umask(0)))"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
                         umask=0o022)
    assert out.returncode == 0, out.stderr
    assert umask.read_text() == "0o22"  # vLLM's files are none of our business
    found = modes(state)
    assert "h.duckdb" in found and private(found, state) == {}


@pytest.mark.slow
def test_scan_db_keeps_its_history_private(tmp_path: Path) -> None:
    state = tmp_path / "state"
    out = subprocess.run([sys.executable, "-m", "logwatch", "scan", "--db",
                          str(state / "h.duckdb"), str(SAMPLES / "demo_marlin_and_mtp.log")],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
                         umask=0o022)
    assert out.returncode == 1, out.stderr  # a fatal incident was found
    found = modes(state)
    assert "h.duckdb" in found and private(found, state) == {}
