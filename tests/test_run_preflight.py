"""`logwatch run --preflight`: the launch judged before the child exists. A predicted failure
is said on stderr and the child started all the same (warn, the default), or nothing started
and exit 1 (strict); off does not look; a launch predicted clean starts quietly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.model_dirs import model_dir


def fake_vllm(tmp_path: Path) -> tuple[Path, Path]:
    """A `vllm` that notes it was started and exits 0 (logwatch reads its argv as vLLM's)."""
    marker = tmp_path / "started"
    script = tmp_path / "bin" / "vllm"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\necho started > {marker}\necho 'a line'\n")
    script.chmod(0o755)
    return script, marker


def run(tmp_path: Path, vllm: Path, model: Path, *flags: str,
        mode: str | None = None) -> subprocess.CompletedProcess[str]:
    options = ["--preflight", mode] if mode else []
    return subprocess.run([sys.executable, "-m", "logwatch", "run", "--db",
                           str(tmp_path / f"{mode}.duckdb"), *options, "--", str(vllm),
                           "serve", str(model), *flags], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=False)


@pytest.mark.parametrize(("mode", "started", "code"), [(None, True, 0), ("warn", True, 0),
                                                       ("strict", False, 1),
                                                       ("off", True, 0)])
def test_a_predicted_failure_warned_refused_or_not_looked_for(tmp_path: Path,
                                                            mode: str | None, started: bool,
                                                            code: int) -> None:
    vllm, marker = fake_vllm(tmp_path)
    model = model_dir(tmp_path / "m")
    done = run(tmp_path, vllm, model, "--max-model-len", "100000", mode=mode)
    assert done.returncode == code, done.stderr
    assert marker.exists() is started
    said = "preflight: FAIL --max-model-len above the model's limit" in done.stderr
    assert said is (mode != "off")
    if mode == "strict":
        assert "not started (--preflight strict)" in done.stderr


def test_a_launch_predicted_clean_starts_without_a_word(tmp_path: Path) -> None:
    vllm, marker = fake_vllm(tmp_path)
    done = run(tmp_path, vllm, model_dir(tmp_path / "m"), "--max-model-len", "256",
               mode="strict")
    assert done.returncode == 0 and marker.exists()
    assert "preflight" not in done.stderr


def test_a_command_that_is_not_vllm_is_not_judged(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "logwatch", "run", "--db",
                           str(tmp_path / "h.duckdb"), "--preflight", "strict", "--",
                           sys.executable, "-c", "print('hello')"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 0 and "preflight" not in done.stderr
