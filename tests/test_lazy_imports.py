"""Commands load only what they use: `--help` no library, regex or DuckDB; a scan without
`--db` no DuckDB (its import alone is ~40 MiB and a third of a `--help` before)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import SAMPLES

PROBE = """
import sys
from logwatch.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stdout = sys.__stdout__
print(" ".join(m for m in ("duckdb", "regex", "logwatch.core.signatures.library")
               if m in sys.modules))
"""


def loaded(*argv: str) -> set[str]:
    result = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True,
                            text=True, timeout=120, check=True)
    return set(result.stdout.splitlines()[-1].split())


def test_help_loads_no_library_regex_or_duckdb() -> None:
    assert loaded("--help") == set()
    assert loaded("scan", "--help") == set()


def test_a_scan_without_db_loads_no_duckdb() -> None:
    modules = loaded("scan", "--json", str(SAMPLES / "healthy_033_startup.log"))
    assert "logwatch.core.signatures.library" in modules  # it did scan
    assert "duckdb" not in modules
