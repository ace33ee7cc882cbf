"""`make soak` (benchmarks/soak.py), short: the daemon followed a log through rotations and
kill -9 restarts while the socket was asked, and every numbered line was counted once."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
def test_a_short_soak_holds() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--seconds",
                           "14", "--rate", "1000", "--rotate-every", "4", "--kill-every", "6",
                           "--marker-every", "50", "--no-full-disk"],
                          capture_output=True, text=True, timeout=300, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"\b[1-9] rotations, [1-9] kill -9", out), out  # it really did both
    found = re.search(r"markers: in ([\d,]+), ingested ([\d,]+), doubled 0, lost 0", out)
    assert found and found.group(1) == found.group(2) and found.group(1) != "0", out
    assert out.rstrip().endswith("holds")
