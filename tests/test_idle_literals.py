"""Literals that ordinary traffic holds (core.signatures.idle_literals, issue 28): the shipped
library has none on healthy vLLM output (the healthy samples, the shared yardstick's serving
log), and the lint reports a literal that lands on every stats line without its pattern
matching, with what it costs, from `logwatch signatures lint --traffic`."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from logwatch.core.signatures.idle_literals import IDLE_PER_MB, idle_literals
from logwatch.core.signatures.library import Library, load_library
from logwatch.core.signatures.lint import lint_library
from tests.conftest import ROOT, SAMPLES
from tests.inprocess import logwatch

GENERATOR = ROOT.parent / "shared" / "perf" / "gen_vllm_log.py"
HEALTHY = b"".join(p.read_bytes() for p in sorted(SAMPLES.glob("healthy_*.log")))

# a site signature found by a literal every 10-second stats line holds, for a pattern that
# matches none of them
RUNNING = """\
id = "site.queue_stuck"
version = 1
status = "stable"
severity = "error"
fatal = false
category = "unrecognised"
title = "Requests waiting forever"
remedy = "investigate"
explanation = "{waiting} requests wait"

[[patterns]]
regex = '''Running: 0 reqs, Waiting: (?P<waiting>[1-9]\\d{3,}) reqs'''
literals = ["Running: "]

[[examples]]
text = '''INFO 05-02 10:00:10 [loggers.py:111] Running: 0 reqs, Waiting: 4096 reqs'''
captures = { waiting = "4096" }

[[counter_examples]]
text = '''INFO 05-02 10:00:10 [loggers.py:111] Running: 2 reqs, Waiting: 0 reqs'''
"""


def _with_running(library: Library) -> Library:
    header = ("signatures/library.toml", 'version = "1.2.3"\n[[changelog]]\nversion = "1.2.3"'
              '\ndate = "2026-11-29"\nchanges = ["x"]\n')
    site = load_library(header, [[("site/queue_stuck.toml", RUNNING)]])
    return replace(library, signatures=(*library.signatures, *site.signatures))


def test_the_shipped_library_has_no_idle_literal_on_the_healthy_samples(
        library: Library) -> None:
    assert idle_literals(library.signatures, HEALTHY) == []


def test_the_shipped_library_has_no_idle_literal_on_the_yardstick_s_serving_log(
        library: Library, tmp_path: Path) -> None:
    if not GENERATOR.exists():
        pytest.skip(f"{GENERATOR} not found (a checkout not beside ../shared)")
    log = tmp_path / "serving.log"
    # its benign output: no failure events (their tracebacks are no ordinary traffic)
    subprocess.run([sys.executable, str(GENERATOR), "--size", "6M", "--seed", "5",
                    "--error-rate", "0", "--out", str(log)], check=True,
                   stdout=subprocess.DEVNULL)
    traffic = log.read_bytes()
    assert idle_literals(library.signatures, traffic) == []
    # it looked: a literal everyone else's lines hold would be reported
    noisy = idle_literals(_with_running(library).signatures, traffic)
    assert [x.literal for x in noisy] == ["Running: "]
    assert noisy[0].per_mb > IDLE_PER_MB and noisy[0].signatures == ("site.queue_stuck",)


def test_the_lint_reports_a_literal_every_stats_line_holds(library: Library) -> None:
    issues = lint_library(_with_running(library), traffic=HEALTHY)
    idle = [i for i in issues if i.kind == "idle-literal"]
    assert [i.signature for i in idle] == ["site.queue_stuck"], issues
    assert "'Running: '" in idle[0].message and "per MB" in idle[0].message
    assert not [i for i in issues if i.kind != "idle-literal"]


def test_signatures_lint_measures_the_literals_on_the_traffic_given(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "queue_stuck.toml").write_text(RUNNING)
    traffic = tmp_path / "healthy.log"
    traffic.write_bytes(HEALTHY)
    linted = logwatch("signatures", "--signatures", str(site), "lint", "--traffic",
                      str(traffic))
    out = linted.stdout.decode()
    assert linted.returncode == 1, out
    assert "site.queue_stuck: idle-literal: literal 'Running: '" in out
    assert "literals measured on 0.1 MB of healthy traffic (healthy.log)" in out
    missing = logwatch("signatures", "lint", "--traffic", str(tmp_path / "nope.log"))
    assert missing.returncode != 0 and b"cannot read traffic" in missing.stderr
