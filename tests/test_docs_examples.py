"""Examples of the README and docs/ run as written (paths swapped for the test's own): the
`jq` one-liner on a scan with and without a root cause, and the `socat` subscription of
docs/daemon.md against a real daemon, which must stay subscribed past socat's default
half-second."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES


def _example(path: Path, marker: str) -> str:
    """The line of a fenced example in `path` that contains `marker`, its comment cut."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if marker in line and not line.startswith("#"):
            return line.split("  #")[0].strip()
    raise AssertionError(f"{path.name}: no example with {marker!r}")


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_the_readmes_jq_example_prints_the_root_cause_and_nothing_when_there_is_none() -> None:
    line = _example(ROOT / "README.md", "| jq ")
    command, query = line.split(" | jq ")
    assert command == "logwatch scan --json vllm.log"
    jq_program = query.strip().strip("'")
    for sample, expect in (("demo_marlin_and_mtp.log", "weights.tensor_size_mismatch"),
                           ("healthy_033_startup.log", None)):
        scan = subprocess.run([sys.executable, "-m", "logwatch", "scan", "--json",
                               str(SAMPLES / sample)], cwd=ROOT, capture_output=True,
                              check=False)
        shown = subprocess.run(["jq", jq_program], input=scan.stdout, capture_output=True,
                               check=False)
        assert shown.returncode == 0, shown.stderr  # `.incidents[null]` was an error
        if expect is None:
            assert shown.stdout.strip() == b""
        else:
            assert expect.encode() in shown.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("socat") is None, reason="socat is not installed")
def test_the_daemon_docs_socat_subscription_stays_and_hears_an_incident(tmp_path: Path
                                                                        ) -> None:
    from tests.test_control import daemon_with_a_site_library

    line = _example(ROOT / "docs" / "daemon.md", "| socat ")
    proc, _, log, sock = daemon_with_a_site_library(tmp_path)
    listener = None
    try:
        import asyncio

        from logwatch.daemon.client import wait_ready

        asyncio.run(wait_ready(sock, 30, alive=lambda: proc.poll() is None))
        out = tmp_path / "events"
        listener = subprocess.Popen(
            ["bash", "-c", line.replace("/run/logwatch/logwatch.sock", str(sock))],
            stdout=out.open("wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while b'"subscribed"' not in out.read_bytes():  # the daemon's acknowledgement
            assert listener.poll() is None, out.read_bytes()
            assert time.monotonic() < deadline, out.read_bytes()
            time.sleep(0.05)  # polling a file another process writes; the condition decides
        time.sleep(1.0)  # past socat's default -t 0.5: the subscription must still be there
        assert listener.poll() is None, "socat ended the subscription"
        with open(log, "ab") as writing:
            writing.write((SAMPLES / "demo_marlin_and_mtp.log").read_bytes())
        while b'"incident"' not in out.read_bytes():
            assert time.monotonic() < deadline + 30, out.read_bytes()
            time.sleep(0.05)
    finally:
        if listener is not None:
            listener.kill()
        proc.terminate()
        proc.wait(timeout=30)


def test_the_signature_example_in_the_docs_loads_and_passes_its_own_examples(
        tmp_path: Path) -> None:
    text = (ROOT / "docs" / "signatures.md").read_text(encoding="utf-8")
    example = text.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "mine.toml").write_text(example)
    tested = subprocess.run([sys.executable, "-m", "logwatch", "signatures", "--signatures",
                             str(tmp_path), "test"], cwd=ROOT, capture_output=True, text=True,
                            check=False)
    assert tested.returncode == 0, tested.stdout[-2000:] + tested.stderr
    assert "ok   site.my_failure" in tested.stdout


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "activate").exists(),
                    reason="no .venv here (make demo or make test makes it)")
def test_the_readmes_activation_puts_logwatch_on_path() -> None:
    """The README's examples say `logwatch ...`: after `make demo`, `. .venv/bin/activate`
    (as the README and `make demo` say) is what makes them work as written."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`. .venv/bin/activate` puts it on PATH" in text
    path = ":".join(p for p in os.environ.get("PATH", "").split(":")
                    if not p.startswith(str(ROOT)))  # a fresh shell's PATH
    done = subprocess.run(["bash", "-c", ". .venv/bin/activate && command -v logwatch && "
                           "logwatch --version"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PATH": path}, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    where, version = done.stdout.splitlines()
    assert Path(where) == ROOT / ".venv" / "bin" / "logwatch"
    assert version.startswith("logwatch ")
