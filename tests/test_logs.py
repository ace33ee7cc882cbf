"""Logging is configured once per entry point: JSON for journald, console on a terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from logwatch.own_log import under_journald
from tests.conftest import ROOT, SAMPLES, read_pty


def test_journal_stream_detection_uses_the_real_stream(tmp_path: Path) -> None:
    with open(tmp_path / "stream", "w") as stream:
        st = os.fstat(stream.fileno())
        assert under_journald(stream, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        assert not under_journald(stream, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino + 1}"})
        assert not under_journald(stream, {"JOURNAL_STREAM": "garbage"})
        assert not under_journald(stream, {})


def _run_under_journald(tmp_path: Path, sample: str) -> list[str]:
    """`logwatch run --target qwen -- cat SAMPLE` with stderr the stream JOURNAL_STREAM
    names, as systemd sets it: its log lines."""
    err = tmp_path / "stderr"
    with open(err, "w") as stream:
        st = os.fstat(stream.fileno())
        env = {**os.environ, "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        subprocess.run([sys.executable, "-m", "logwatch", "run", "--target", "qwen", "--db",
                        str(tmp_path / "h.duckdb"), "--quiet", "--gpu-capability", "9.0", "--",
                        "cat", str(SAMPLES / sample)], cwd=ROOT, env=env, stderr=stream,
                       stdout=subprocess.DEVNULL, timeout=60, check=False)
    return err.read_text().splitlines()


@pytest.mark.slow
def test_json_events_under_journald_carry_target_and_source(tmp_path: Path) -> None:
    lines = [line for line in _run_under_journald(tmp_path, "healthy_033_startup.log")
             if line.startswith("<")]
    # each JSON line after its syslog priority, which journald reads and strips
    events = {json.loads(line[3:])["event"]: (line[:3], json.loads(line[3:]))
              for line in lines}
    reading = events["reading"][1]
    assert reading["target"] == "qwen" and reading["source"] == "run:qwen"
    assert set(events) >= {"started", "reading", "stopped"}
    assert events["started"][0] == "<6>"
    assert events["started"][1]["database"] == str(tmp_path / "h.duckdb")


@pytest.mark.slow
def test_under_journald_a_fatal_incident_and_a_failed_launch_are_errors(tmp_path: Path
                                                                        ) -> None:
    """`journalctl -p err -u logwatch` finds them: priority 3, with the root cause."""
    errors = [json.loads(line[3:]) for line in
              _run_under_journald(tmp_path, "mtp_tensor_mismatch_glm_033.log")
              if line.startswith("<3>")]
    assert {e["event"] for e in errors} == {"fatal_incident", "launch_failed"}
    assert "weights.tensor_size_mismatch" in {e.get("signature") for e in errors}
    failed = next(e for e in errors if e["event"] == "launch_failed")
    assert failed["root_cause"] == "weights.tensor_size_mismatch"


@pytest.mark.slow
def test_console_lines_on_a_terminal(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    env = {**os.environ, "NO_COLOR": "1"}
    subprocess.run([sys.executable, "-m", "logwatch", "daemon", "--stdin", "--db",
                    str(tmp_path / "h.duckdb")], input=b"hello\n", cwd=ROOT, env=env,
                   stderr=slave, stdout=subprocess.DEVNULL, timeout=60, check=True)
    os.close(slave)
    text = read_pty(master)
    assert b"started" in text and not text.lstrip().startswith(b"{")
