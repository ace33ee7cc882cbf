"""`logwatch` as a user runs it: real files, exit codes and output. The commands run
in-process (`cli.main`); the entry points themselves and the terminal run as real processes."""

from __future__ import annotations

import gzip
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES, read_pty
from tests.inprocess import Completed, logwatch

DEMO = SAMPLES / "demo_marlin_and_mtp.log"
HEALTHY = SAMPLES / "healthy_033_startup.log"


def run(*args: str, stdin: bytes = b"") -> Completed[bytes]:
    return logwatch(*args, stdin=stdin, env={"NO_COLOR": "1"})


def test_scan_a_failed_launch_exits_1_with_the_root_cause_first() -> None:
    result = run("scan", str(DEMO))
    assert result.returncode == 1
    out = " ".join(result.stdout.decode().split())  # the report wraps at 80 columns
    # two launches: the newest (TP=2) failed on the MTP draft, the first (TP=4) on Marlin
    assert "root cause: Tensor size mismatch while loading weights" in out
    assert ("#2 2026-10-14 09:31:02 (line 97): failed: Tensor size mismatch while loading "
            "weights") in out
    assert ("#1 2026-10-14 09:12:01 (line 1): failed: Marlin repack: size_n is not divisible "
            "by tile_n_size") in out
    assert out.index("LAUNCHES") < out.index("ROOT CAUSE (launch 2, from line 97")
    assert out.index("ROOT CAUSE") < out.index("[CRITICAL] FATAL Tensor size mismatch")
    assert out.index("[CRITICAL] FATAL Tensor size mismatch") < out.index("OTHER PROBLEMS")
    assert out.index("OTHER PROBLEMS") < out.index("[CRITICAL] FATAL Marlin repack")
    assert "ranks TP0, TP1, TP2, TP3" in out
    assert "RuntimeError: size_n = 160 is not divisible by tile_n_size = 64" in out


def test_scan_a_healthy_log_exits_0() -> None:
    result = run("scan", str(HEALTHY))
    assert result.returncode == 0, result.stderr
    assert "ROOT CAUSE" not in result.stdout.decode()


def test_json_report_schema() -> None:
    result = run("scan", "--json", str(DEMO))
    report = json.loads(result.stdout)
    assert set(report) == {"library_version", "launches", "incidents", "root_cause", "stats",
                           "diagnoses", "snapshots", "incomplete", "verdict", "verdict_reason",
                           "unrecognised", "unrecognised_others", "scan_faults"}
    assert report["verdict"] == "failed" and report["unrecognised"] == []
    assert report["incomplete"] == []  # inputs that shrank while they were read
    assert report["scan_faults"] == []  # records a fault of the scan's passed over
    root = report["incidents"][report["root_cause"]]
    for key in ("signature", "signature_version", "category", "severity", "fatal", "count",
                "first_seen", "last_seen", "processes", "ranks", "captures", "evidence",
                "explanation"):
        assert key in root
    assert root["signature"] == "weights.tensor_size_mismatch"  # the newest launch's
    newest, first = report["launches"]
    assert (newest["number"], newest["start_line"], newest["outcome"]) == (2, 97, "failed")
    assert newest["root_cause"] == report["root_cause"] and root["launch"] == 0
    assert report["incidents"][first["root_cause"]]["signature"] == "marlin.repack_tile_n"
    assert root["evidence"][-1]["line"] == root["last_seen"]["line"]
    assert report["stats"]["lines"] == DEMO.read_bytes().count(b"\n")


def test_stdin_and_gzip_give_the_same_report_as_the_plain_file(tmp_path: Path) -> None:
    gz = tmp_path / "vllm.log.gz"
    gz.write_bytes(gzip.compress(DEMO.read_bytes()))
    plain = json.loads(run("scan", "--json", str(DEMO)).stdout)
    from_gz = json.loads(run("scan", "--json", str(gz)).stdout)
    from_stdin = json.loads(run("scan", "--json", "-", stdin=DEMO.read_bytes()).stdout)
    signatures = [i["signature"] for i in plain["incidents"]]
    assert [i["signature"] for i in from_gz["incidents"]] == signatures
    assert [i["signature"] for i in from_stdin["incidents"]] == signatures
    assert from_stdin["incidents"][0]["first_seen"]["source"] == "<stdin>"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.log", "no such file"),
        (lambda d: d, "is a directory"),
    ],
)
def test_input_errors_exit_2_with_one_line(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    result = run("scan", str(make(tmp_path)))
    assert result.returncode == 2
    err = result.stderr.decode().strip()
    assert message in err and len(err.splitlines()) == 1


def test_corrupt_gzip_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "broken.log.gz"
    bad.write_bytes(gzip.compress(DEMO.read_bytes())[:200])
    result = run("scan", str(bad))
    assert result.returncode == 2
    assert "broken.log.gz: cannot read" in result.stderr.decode()


def test_binary_junk_and_a_10_mb_line(tmp_path: Path) -> None:
    log = tmp_path / "junk.log"
    log.write_bytes(os.urandom(200_000) + b"\n" + b"A" * (10 << 20) + b"\n"
                    + b"\xff\xfe" + DEMO.read_bytes())
    result = run("scan", "--json", str(log))
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    roots = [report["incidents"][entry["root_cause"]]["signature"]
             for entry in report["launches"]]
    assert roots == ["weights.tensor_size_mismatch", "marlin.repack_tile_n"]
    assert report["stats"]["replaced_chars"] > 0


def test_usage_errors_exit_2() -> None:
    assert run("scan").returncode == 2
    assert run("frobnicate").returncode == 2
    assert run("scan", "-", "-").returncode == 2


def test_a_broken_site_library_is_refused_with_file_and_line(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "mine.toml").write_text('id = "site.mine"\nversoin = 1\n')
    result = run("scan", "--signatures", str(site), str(DEMO))
    assert result.returncode == 2
    err = result.stderr.decode()
    assert "mine.toml:2: unknown key 'versoin'" in err and "did you mean 'version'?" in err


def test_signatures_subcommands() -> None:
    listed = run("signatures", "list").stdout.decode()
    assert "marlin.repack_tile_n" in listed and "signature library" in listed
    shown = run("signatures", "show", "marlin.repack_tile_n")
    assert shown.returncode == 0 and b"is not divisible by tile_n_size" in shown.stdout
    missing = run("signatures", "show", "marlin.repack_tile")
    assert missing.returncode == 2 and b"did you mean 'marlin.repack_tile_n'" in missing.stderr
    tested = run("signatures", "test")
    failures = [ln for ln in tested.stdout.decode().splitlines() if not ln.startswith("ok ")]
    assert tested.returncode == 0 and b" 0 failed" in tested.stdout, failures
    linted = run("signatures", "lint")
    assert linted.returncode == 0 and b"0 issue(s)" in linted.stdout


@pytest.mark.slow
def test_python_dash_m_and_console_script_agree() -> None:
    """The two entry points as processes: the same program, main's result the exit status."""
    script = Path(sys.executable).parent / "logwatch"
    if not script.exists():
        pytest.skip("console script not installed in this environment")
    result = subprocess.run([str(script), "--version"], capture_output=True, check=False)
    dash_m = subprocess.run([sys.executable, "-m", "logwatch", "--version"], cwd=ROOT,
                            capture_output=True, timeout=120, check=False)
    assert result.returncode == dash_m.returncode == 0
    assert result.stdout.strip() == dash_m.stdout.strip() == run("--version").stdout.strip()
    failed = subprocess.run([str(script), "scan", str(DEMO)], capture_output=True,
                            timeout=120, check=False)
    assert failed.returncode == 1 and b"ROOT CAUSE" in failed.stdout


def test_progress_bar_on_a_real_terminal(tmp_path: Path) -> None:
    """stderr on a pseudo-terminal gets a redrawn bar; stdout keeps only the report."""
    import pty

    log = tmp_path / "big.log"
    line = b'INFO:     10.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    log.write_bytes(line * (20_000_000 // len(line)))
    master, slave = pty.openpty()
    env = {**os.environ, "LOGWATCH_PROGRESS_AFTER": "0"}
    proc = subprocess.run([sys.executable, "-m", "logwatch", "scan", str(log)], cwd=ROOT,
                          env=env, stdout=subprocess.PIPE, stderr=slave, timeout=120,
                          check=False)
    os.close(slave)
    seen = read_pty(master)
    assert proc.returncode == 0
    assert b"scanning" in seen and b"MB/s" in seen and b"%" in seen
    assert b"scanning" not in proc.stdout


def test_no_progress_bar_when_stderr_is_not_a_terminal() -> None:
    env_run = logwatch("scan", str(HEALTHY), env={"LOGWATCH_PROGRESS_AFTER": "0"})
    assert env_run.returncode == 0 and env_run.stderr == b""


def test_bad_gpu_capability_is_a_usage_error() -> None:
    result = run("scan", str(DEMO), "--gpu-capability", "hopper")
    assert result.returncode == 2 and b"expected a number like 9.0" in result.stderr


def _readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"### {title}")
    return text[start:text.index("\n### ", start + 1)]


def test_the_readmes_relaunch_configuration_and_commands_are_what_logwatch_accepts() -> None:
    """The `[relaunch]`/`[targets.relaunch]` example parses with no problem, and each command
    line shown parses with `logwatch`'s own parser (no daemon here: they run in the systemd
    loop tests)."""
    from logwatch.cli.parser import build_parser
    from logwatch.core.settings.config import parse_config

    section = _readme_section("Relaunch from the daemon")
    toml = section.split("```toml\n", 1)[1].split("```", 1)[0]
    config = parse_config("README.md", toml)
    assert config.problems == []
    assert config.targets[0].relaunch["policy"] == "ask"
    assert config.values["relaunch.breaker_failures"] == 3
    assert config.values["relaunch.min_confidence"] == 0.8
    blocks = [part.split("```", 1)[0] for part in section.split("```bash\n")[1:]]
    commands = [shlex.split(line.split("  #")[0]) for bash in blocks
                for line in bash.splitlines() if line.strip()]
    assert {c[1] for c in commands} == {"status", "approve", "reject", "reset-breaker", "run"}
    for words in commands:
        assert build_parser().parse_args(words[1:]).command == words[1]


def test_min_confidence_is_a_guardrail_the_operator_sets_within_0_and_1(tmp_path: Path
                                                                        ) -> None:
    """`[relaunch] min_confidence` reaches the guardrails; 0, 1 and more are refused (a
    diagnosis must be strictly above it: 1 would refuse every relaunch, 0 none)."""
    from logwatch.core.settings.config import parse_config
    from logwatch.daemon.relaunch_settings import settings_from_config

    config = parse_config("t.toml", "[relaunch]\nmin_confidence = 0.6\n")
    assert config.problems == []
    assert settings_from_config(config.values, tmp_path).thresholds.min_confidence == 0.6
    assert settings_from_config(parse_config("t.toml", "").values, tmp_path
                                ).thresholds.min_confidence == 0.8
    for bad in ("0", "1", "1.5", "-0.2"):
        problems = parse_config("t.toml", f"[relaunch]\nmin_confidence = {bad}\n").problems
        assert [p.message for p in problems] == [
            f"relaunch.min_confidence is {bad}: more than 0, less than 1 (a diagnosis must "
            "be above it)"], bad


def test_an_operators_word_with_no_daemon_to_hear_it_exits_3(tmp_path: Path) -> None:
    for args in (["approve", "a-1"], ["reject", "a-1"], ["reset-breaker", "vllm"]):
        done = run(*args, "--socket", str(tmp_path / "none.sock"))
        assert done.returncode == 3, done.stderr
        assert b"no logwatch daemon answers on" in done.stderr
        assert b"through the daemon that proposed them" in done.stderr


def test_bare_logwatch_prints_what_there_is_to_run() -> None:
    bare = run()
    assert bare.returncode == 2
    assert b"usage: logwatch" in bare.stderr and b"scan" in bare.stderr and b"tui" in bare.stderr
    assert b"the following arguments are required: command" in bare.stderr
    snapshot = run("snapshot")
    assert snapshot.returncode == 2 and b"usage: logwatch snapshot" in snapshot.stderr


def test_every_flag_has_help_and_no_default_reads_none() -> None:
    """`--help` of every command: each argument says what it is, and a default it names is
    a real one (`sql --help` said the default --db was "None")."""
    import argparse

    from logwatch.cli.parser import build_parser

    def arguments(parser: argparse.ArgumentParser, path: str):  # type: ignore[no-untyped-def]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from arguments(sub, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
                yield path, action, sub_help(parser, action)

    def sub_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
        text = action.help or ""
        return text % {"default": action.default, "prog": parser.prog} if "%(" in text \
            else text

    found = list(arguments(build_parser(), "logwatch"))
    assert len(found) > 100
    bare = [f"{path} {a.option_strings or a.dest}" for path, a, text in found if not text]
    assert bare == []
    nones = [f"{path} {a.option_strings}" for path, a, text in found if "None" in text]
    assert nones == []
    from logwatch.paths import default_db_path

    assert str(default_db_path()) in "".join(run("sql", "--help").stdout.decode().split())


def test_a_wrong_model_dir_or_a_directory_to_follow_is_an_error(tmp_path: Path) -> None:
    for args, why in ((["scan", str(DEMO), "--model-dir", str(tmp_path / "nope")],
                       b"no such directory"),
                      (["snapshot", "show", "--model-dir", str(tmp_path)],
                       b"no config.json in it: not a model directory"),
                      (["daemon", "--file", str(tmp_path), "--db", str(tmp_path / "h.duckdb"),
                        "--no-socket"], b"a directory, not a log file")):
        result = run(*args)
        assert result.returncode == 2 and why in result.stderr, (args, result.stderr)
    assert not (tmp_path / "h.duckdb").exists()  # refused before anything was opened


def test_a_configuration_source_that_cannot_be_read_is_said_on_stderr() -> None:
    """`--pid` of no process (or a --unit where systemd cannot answer): a warning on
    stderr, once, not only a cut line in each launch's configuration section."""
    result = run("scan", str(DEMO), "--pid", "4194399")  # above any pid_max
    warnings = [line for line in result.stderr.decode().splitlines()
                if "the configuration was not read in full" in line]
    assert warnings == ["logwatch: warning: the configuration was not read in full: "
                        "/proc/4194399: No such file or directory"]
    assert "the configuration was not read" not in run("scan", str(DEMO)).stderr.decode()
