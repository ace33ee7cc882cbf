"""`preflight --vllm-python`: the release's own `vllm serve` parser judges the arguments, in
place of the flag names logwatch extracted. With a stand-in interpreter that answers as the
probe does (the merge), and with the real vLLM 0.32.0 where the real-vLLM tier installed it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from logwatch.host.vllm_parser import release_parser
from tests.conftest import ROOT
from tests.inprocess import logwatch_text
from tests.model_dirs import model_dir

REAL = ROOT / ".real-vllm" / "venv-0.32.0" / "bin" / "python"


def answering(tmp_path: Path, answer: dict[str, object], code: int = 0) -> Path:
    """An 'interpreter' that notes its arguments and prints the probe's answer."""
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {tmp_path / 'argv'}\n"
                      f"echo {shlex.quote(json.dumps(answer))}\nexit {code}\n")
    python.chmod(0o755)
    return python


def preflight(model: Path, flags: str, python: Path, *extra: str) -> dict[str, object]:
    done = logwatch_text("preflight", "--model-dir", str(model), "--cmdline",
                         f"vllm serve {model} {flags}", "--vllm-python", str(python),
                         "--json", *extra)
    assert done.returncode in (0, 1), done.stderr
    body: dict[str, object] = json.loads(done.stdout)
    return body


def test_a_refusal_of_the_releases_parser_is_the_first_failure(tmp_path: Path) -> None:
    model = model_dir(tmp_path / "m")
    said = "vllm serve: error: argument --dtype: invalid choice: 'float8'"
    python = answering(tmp_path, {"accepted": False, "error": said, "release": "0.32.0+cpu"})
    body = preflight(model, "--dtype float8 --max-model-len 256", python)
    problems = body["problems"]
    assert isinstance(problems, list) and problems[0]["kind"] == "parser_refused"
    assert problems[0]["message"] == said and body["vllm_version"] == "0.32.0+cpu"
    words = (tmp_path / "argv").read_text().splitlines()
    assert words[0] == "-I" and words[1].endswith("vllm_parse_probe.py")
    assert json.loads(words[2]) == ["serve", str(model), "--dtype", "float8",
                                    "--max-model-len", "256"]


def test_a_flag_the_release_accepts_is_not_called_unknown(tmp_path: Path) -> None:
    """logwatch's extracted names do not know `--made-up`; the release's parser is the ground
    truth, and accepts it here."""
    model = model_dir(tmp_path / "m")
    python = answering(tmp_path, {"accepted": True, "error": "", "release": "0.32.0"})
    body = preflight(model, "--made-up", python)
    assert body["problems"] == []
    assert any("own parser" in n and "accepts" in n for n in body["notes"])  # type: ignore[union-attr]
    without = logwatch_text("preflight", "--model-dir", str(model), "--cmdline",
                            f"vllm serve {model} --made-up", "--vllm-version", "0.32.0",
                            "--json")
    assert [p["kind"] for p in json.loads(without.stdout)["problems"]] == ["unknown_flag"]


def test_an_interpreter_without_vllm_is_a_note(tmp_path: Path) -> None:
    model = model_dir(tmp_path / "m")
    python = answering(tmp_path, {"accepted": False, "error": "cannot import vLLM: no vllm"},
                       code=1)
    body = preflight(model, "", python, "--vllm-version", "0.32.0")
    assert body["problems"] == []
    assert any("cannot import vLLM" in n for n in body["notes"])  # type: ignore[union-attr]
    assert release_parser(tmp_path / "nothing-here", ["serve", "x"]).accepted is None


@pytest.mark.skipif(not REAL.is_file(), reason="the real-vLLM tier's vLLM 0.32.0 is not "
                                               "installed (make real-vllm)")
def test_the_real_releases_parser(tmp_path: Path) -> None:
    refused = release_parser(REAL, ["serve", "/m", "--dtype", "float8"])
    assert refused.accepted is False and "invalid choice: 'float8'" in refused.error
    assert refused.release.startswith("0.32.0")
    assert release_parser(REAL, ["serve", "/m", "--max-model-len", "1k"]).accepted is True
