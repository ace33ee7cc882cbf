"""`logwatch demo`: the loop ends healthy on a simulated B200, and the README's timeline is what
it prints (paths, ids, ports and seconds aside); on an H200 the plan is refused and nothing
starts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "logwatch", "demo", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def masked(text: str) -> str:
    text = re.sub(r"/\S*logwatch-demo-[\w]+|\$WS|/\S*/keep", "WS", text)
    text = re.sub(r"\[\s*[\d.]+ s\]", "[s]", text)
    text = re.sub(r"\bdemo-\d+-[0-9a-f]{8}\b", "ID", text)  # an action: TARGET-LAUNCH-PLAN
    text = re.sub(r"\b[0-9a-f]{16,}\b", "ID", text)
    text = re.sub(r"127\.0\.0\.1:\d+", "HOST:PORT", text)
    return re.sub(r"after [\d.]+ s", "after S", re.sub(r"acceptance [\d.]+%", "acceptance R",
                                                         text))


def test_the_demo_ends_healthy_and_prints_the_readmes_timeline(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    done = demo("--keep", str(keep))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "healthy after" in done.stdout
    readme = (ROOT / "README.md").read_text()
    block = readme.split("### The loop, end to end")[1].split("```text\n")[1].split("```")[0]
    printed = masked(done.stdout).splitlines()
    for line in masked(block).splitlines():
        assert line in printed, line
    # the operator's checkpoint is untouched: the fix is an overlay beside it
    config = json.loads((keep / "models" / "Qwen3.6-35B-A3B-NVFP4A16" / "config.json")
                        .read_text())
    assert not any("mtp" in e for e in config["quantization_config"]["ignore"])
    (overlay,) = (keep / "state" / "overlays").iterdir()
    merged = json.loads((overlay / "config.json").read_text())["quantization_config"]["ignore"]
    assert merged[-1] == r"re:^mtp\." and merged[:-1] == config["quantization_config"]["ignore"]


def test_the_demo_summary_as_json() -> None:
    done = demo("--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["healthy"] and summary["seconds"] < 60
    (action,) = summary["actions"]
    assert action["moves"] == ["proposed", "approved", "applying", "restarting", "verifying",
                               "succeeded"]
    assert summary["incidents"][0]["signature"] == "weights.tensor_size_mismatch"
    assert summary["history"] == [["succeeded", "weights.tensor_size_mismatch", "6"]]


def test_on_an_h200_the_plan_is_refused_and_nothing_starts() -> None:
    done = demo("--gpu", "h200", "--json")
    assert done.returncode == 1
    summary = json.loads(done.stdout)
    assert not summary["healthy"] and summary["actions"] == []
    assert not summary["plan"]["startable"]
    assert any("9.0 has no native FP4" in r for r in summary["plan"]["refused"])


def test_keep_refuses_a_directory_with_something_in_it(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("mine")
    done = demo("--keep", str(tmp_path))
    assert done.returncode == 2 and "not an empty directory" in done.stderr
    assert (tmp_path / "x").read_text() == "mine"
    done = demo("--keep", str(tmp_path / "x"))  # a file: refused, not a traceback
    assert done.returncode == 2 and "not an empty directory" in done.stderr
    assert (tmp_path / "x").read_text() == "mine"


def test_the_systemd_demo_says_when_no_user_manager_answers(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "logwatch", "demo", "--executor", "systemd"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": str(tmp_path),
                               "HOME": str(tmp_path)})
    assert done.returncode == 2, done.stderr
    assert ("no systemd --user manager answers" in done.stderr
            or "systemctl is not installed" in done.stderr), done.stderr
    assert "`logwatch demo` runs the loop without systemd" in done.stderr
