"""A systemd unit is one source, however the daemon is told of it (issue 35, item 6), under a
real `systemd --user` manager running the vLLM stand-in as a crash-looping unit from a
virtual environment whose installed vLLM is `0.32.0+cpu`:

- `--journal-user-unit NAME` alone records the unit's ExecStart and Environment (secrets
  masked) in each launch's snapshot, and one vLLM version (the installed one, its local
  build tag kept);
- the crash loop is a state `status` shows for the source, not only a notify event;
- moving the unit from the flag into a `[[targets]]` entry keeps its history: numbering goes
  on, the flag's source is no ghost on the dashboard, and nothing already paged is paged
  again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from logwatch.tui import queries
from tests.conftest import ROOT
from tests.following import Running

UNIT_DIR = Path("/run/user/0/systemd/user")
MODEL = ROOT / "samples" / "models" / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered"
HOOK = """#!/bin/sh
printf '%s\\t%s\\n' "$LOGWATCH_EVENT" "$LOGWATCH_SOURCE" >> "$0.calls"
"""


def _user(env: dict[str, str], *args: str, check: bool = True) -> str:
    return subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True,
                          env=env, timeout=60, check=check).stdout.strip()


def _venv(tmp: Path) -> Path:
    """A virtual environment's `bin/vllm` running the stand-in, with vLLM 0.32.0+cpu
    installed beside it (its dist-info, as pip leaves it)."""
    root = tmp / "venv"
    site = root / "lib" / f"python3.{sys.version_info.minor}" / "site-packages"
    info = site / "vllm-0.32.0+cpu.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n\n")
    vllm = root / "bin" / "vllm"
    vllm.parent.mkdir()
    vllm.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                    "from logwatch.demo.standin import main\nsys.exit(main())\n")
    vllm.chmod(0o755)
    return vllm


def _unit(vllm: Path) -> str:
    return ("[Unit]\nStartLimitIntervalSec=0\n[Service]\n"
            f"ExecStart={vllm} serve {MODEL} -tp 4 --speculative-config "
            "'{\"method\": \"mtp\", \"num_speculative_tokens\": 1}' --port 0 "
            "--api-key sk-unit-secret\n"
            "Environment=LOGWATCH_STANDIN_VLLM=0.32.0 LOGWATCH_STANDIN_PACE=0 "
            "VLLM_LOGGING_LEVEL=INFO HF_TOKEN=hf_unitsecret PYTHONUNBUFFERED=1\n"
            "Restart=always\nRestartSec=1\n")


def _looping(status: dict[str, Any], source: str, at_least: int) -> bool:
    """Whether `source` is in a crash loop with a failed launch numbered `at_least` or on."""
    return _failed(status, at_least) and any(
        s["name"] == source and s["state"] == "crash_loop" for s in status["sources"])


def _failed(status: dict[str, Any], at_least: int) -> bool:
    return any(launch["outcome"] == "failed" and launch["number"] >= at_least
               for launch in status["launches"])


@pytest.mark.slow
def test_a_unit_named_by_flag_is_read_like_a_target_and_keeps_its_history_as_one(
        systemd_user: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = systemd_user
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])  # systemctl --user
    UNIT_DIR.mkdir(parents=True, exist_ok=True)
    name = f"vllm-unit-source-{os.getpid()}.service"
    (UNIT_DIR / name).write_text(_unit(_venv(tmp_path)))
    hook = tmp_path / "hook.sh"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    calls = Path(f"{hook}.calls")
    notify = (f'[[notify]]\nkind = "hook"\nargv = ["{hook}"]\n'
              'on = ["launch_failed", "crash_loop"]\ncrash_loop_launches = 2\n')
    flag_config, target_config = tmp_path / "flag.toml", tmp_path / "target.toml"
    flag_config.write_text(notify)
    target_config.write_text(f'[[targets]]\nname = "qwen"\n[targets.source]\nkind = "journald"\n'
                             f'user_unit = "{name}"\n\n{notify}')
    db, sock = tmp_path / "lw.duckdb", tmp_path / "lw.sock"
    flag_source = f"journal:--user-unit {name}"
    target_source = f"qwen:journal:--user-unit {name}"
    try:
        _user(env, "daemon-reload")
        daemon = Running("--journal-user-unit", name, "--config", str(flag_config),
                         "--db", str(db), sock=sock)
        try:
            daemon.wait_ready()
            _user(env, "start", name)
            status = daemon.wait_status(lambda st: _looping(st, flag_source, 3), 120,
                                        "three failed launches of the unit, a crash loop")
            # a crash loop is a state of the source, in status
            source = next(s for s in status["sources"] if s["name"] == flag_source)
            assert source["state"] == "crash_loop", source
            assert "launches failed in the last" in source["detail"], source
            launch = next(la for la in status["launches"] if la["source"] == flag_source)
            assert launch["crash_loop"]["failed"] >= 3, launch
            _user(env, "stop", name)
            rows = daemon.sql(
                "SELECT l.number, l.exit_code, s.vllm_version, s.body FROM launches l "
                "JOIN snapshots s ON s.hash = l.snapshot_hash ORDER BY l.number")
            paged = calls.read_text() if calls.exists() else ""
        finally:
            assert daemon.stop() == 0, daemon.stderr[-3000:]
        assert len(rows) >= 3
        for _number, _exit_code, version, body in rows:
            # the installed release, its local build tag kept: the same on every path
            assert version == "0.32.0+cpu", version
            snapshot = json.loads(body)
            assert snapshot["vllm_version"] == "0.32.0+cpu"
            assert "serve" in snapshot["argv"] and str(MODEL) in snapshot["argv"], snapshot
            assert snapshot["launch"]["tensor_parallel_size"] == 4
            assert snapshot["env"]["VLLM_LOGGING_LEVEL"] == "INFO", snapshot["env"]
            assert snapshot["env"].get("HF_TOKEN") == "***"
            assert "hf_unitsecret" not in body and "sk-unit-secret" not in body
        assert "crash_loop" in paged and "launch_failed" in paged, paged
        con = duckdb.connect(str(db), read_only=True)  # as the flag's daemon left it
        try:
            numbers = [r[0] for r in con.execute(
                "SELECT number FROM launches WHERE source = ?", [flag_source]).fetchall()]
        finally:
            con.close()

        # the same unit, now a configured target: one source, its history going on
        daemon = Running("--config", str(target_config), "--db", str(db), sock=sock)
        try:
            status = daemon.wait_status(
                lambda st: any(la["source"] == target_source for la in st["launches"]), 60,
                "the target's source with the unit's launches")
            # one launch shown, numbered on from the flag's (entries the flag's daemon had
            # not read yet may have begun the next)
            [current] = status["launches"]
            assert current["number"] >= max(numbers) > 1, status
            board = daemon.ask({"op": "sql", "query": queries.TARGETS}, timeout=30)
            assert board is not None and board["ok"], board
            assert [row[0] for row in board["rows"]] == [target_source], board["rows"]
            _user(env, "start", name)
            status = daemon.wait_status(
                lambda st: _looping(st, target_source, max(numbers) + 1), 120,
                "the unit's next failed launch, numbered on, its loop going on")
            source = next(s for s in status["sources"] if s["name"] == target_source)
            assert source["state"] == "crash_loop", source
            _user(env, "stop", name)
            labels = daemon.sql("SELECT DISTINCT source FROM launches")
        finally:
            assert daemon.stop() == 0, daemon.stderr[-3000:]
        assert labels == [[target_source]]
        again = calls.read_text()[len(paged):]
        # the loop and the fatal problem were paged under the flag: not paged again
        assert again == "", again
    finally:
        _user(env, "stop", name, check=False)
        (UNIT_DIR / name).unlink(missing_ok=True)
        _user(env, "daemon-reload", check=False)


def test_one_version_keeps_the_local_build_tag_of_the_same_release() -> None:
    from logwatch.core.quant.ignore_rules import one_version

    assert one_version("0.32.0", "0.32.0+cpu") == "0.32.0+cpu"  # the same release, as seen
    assert one_version("v0.32.0", "0.32.0+cu128") == "0.32.0+cu128"
    assert one_version("0.33.0", "0.32.0+cpu") == "0.33.0"  # what ran wins over the package
    assert one_version(None, "0.32.0+cpu") == "0.32.0+cpu"
    assert one_version("0.32.0", None) == "0.32.0"


def test_the_board_shows_a_crash_loop_the_daemon_judged() -> None:
    from datetime import datetime

    from logwatch.tui.board import target_rows

    source = "qwen:journal:--user-unit vllm.service"
    row = {"source": source, "id": "l3", "number": 3, "outcome": "failed", "started": None,
           "root_signature": "weights.tensor_size_mismatch"}
    looping = {"launches": [{"source": source, "outcome": "failed",
                             "crash_loop": {"failed": 3, "minutes": 10.0}}]}
    [shown] = target_rows([row], looping, {}, datetime.now())
    assert (shown.state, shown.tone) == ("crash loop", "bad")
    [once] = target_rows([row], {"launches": [{"source": source, "outcome": "failed",
                                               "crash_loop": None}]}, {}, datetime.now())
    assert once.state == "failed"
