"""Every example in README.md and docs/*.md is run by a test, or named here with the reason it
cannot run on a test machine.

Each fenced block is an example: a shell block (```bash, ```sh, ```console) one example per
command line, any other block one example. `test_every_example_is_run_or_excused` fails when a
doc gains an example that neither a test here, nor a test elsewhere (named in ELSEWHERE), nor
NOT_RUN accounts for, and when an entry matches no example any more. The examples run here are
read from the docs as they are (`_line`), so an edit to one that no longer works fails its test;
only system paths (/var/log/vllm, /etc/logwatch, /srv/fleet, /var/lib/logwatch/...) and the
placeholders `...` are swapped for the test's own. `test_every_logwatch_command_parses` checks
every `logwatch` command line of every shell block against the real parser, each `--flag`
spelt exactly (a renamed flag fails it even where argparse would accept an abbreviation).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from logwatch.cli.parser import build_parser
from logwatch.daemon.client import Client, wait_ready
from logwatch.paths import default_db_path, default_socket_path
from tests.conftest import ROOT, SAMPLES
from tests.following import wait_for

MODELS = ROOT / "samples" / "models"
DEMO_LOG = SAMPLES / "demo_marlin_and_mtp.log"
HEALTHY_LOG = SAMPLES / "healthy_033_startup.log"
UNCOVERED = MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered"
COVERED = MODELS / "qwen3.6-35b-a3b-nvfp4-mtp-covered"
A16 = MODELS / "qwen3.6-35b-a3b-nvfp4a16"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"bash", "sh", "console", "shell"}


# --- the examples -------------------------------------------------------------------------

@dataclass(frozen=True)
class Example:
    doc: str     # README.md, docs/daemon.md, ...
    line: int    # where it starts in the doc
    lang: str    # the fence's info string
    text: str    # a shell command line (its comment cut), or the whole block

    @property
    def key(self) -> str:
        if self.lang in SHELL:
            return f"{self.doc} | {self.text}"
        first = next(line for line in self.text.splitlines() if line.strip())
        return f"{self.doc} | ```{self.lang} {' '.join(first.split())}"


def _command(line: str) -> str:
    """A shell line with its trailing comment cut and its spaces collapsed."""
    cut = line
    for match in re.finditer(r"(?:^|\s)#", line):
        head = line[:match.start()]
        try:
            shlex.split(head)
        except ValueError:
            continue  # the `#` is inside quotes
        cut = head
        break
    return " ".join(cut.split())


def examples() -> list[Example]:
    found: list[Example] = []
    for path in DOCS:
        doc = str(path.relative_to(ROOT))
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            fence = re.match(r"^\s*(```+|~~~+)\s*(\S*)", lines[i])
            if not fence:
                i += 1
                continue
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(fence.group(1)):
                end += 1
            lang, body = fence.group(2), lines[i + 1:end]
            if lang in SHELL:
                for n, line in enumerate(body, i + 2):
                    command = _command(line)
                    if command:
                        found.append(Example(doc, n, lang, command))
            else:
                found.append(Example(doc, i + 1, lang, "\n".join(body) + "\n"))
            i = end + 1
    return found


def _line(doc: str, start: str) -> str:
    """The one example command line of `doc` that starts with `start`, as written."""
    texts = {e.text for e in examples() if e.doc == doc and e.lang in SHELL}
    if start in texts:
        return start
    hits = sorted(t for t in texts if t.startswith(start))
    assert len(hits) == 1, f"{doc}: {len(hits)} example line(s) start with {start!r}: {hits}"
    return hits[0]


def _block(doc: str, lang: str, contains: str) -> str:
    hits = [e.text for e in examples() if e.doc == doc and e.lang == lang and contains in e.text]
    assert len(hits) == 1, f"{doc}: {len(hits)} ```{lang} block(s) contain {contains!r}"
    return hits[0]


# Which test runs each example. Keys are prefixes of Example.key; each example must match
# exactly one entry of the three dicts together, each entry at least one example.
RUN_HERE: dict[str, str] = {
    "README.md | make demo": "test_make_demo_runs_its_recipe",
    "README.md | logwatch scan /var/log/vllm/vllm.log": "test_the_use_block_scans",
    "README.md | logwatch scan vllm.log.1.gz vllm.log": "test_the_use_block_scans",
    "README.md | journalctl -u vllm --no-pager | logwatch scan -":
        "test_journalctl_piped_into_scan",
    "README.md | logwatch scan <(ssh gpu1 cat /var/log/vllm.log)": "test_the_use_block_scans",
    "README.md | logwatch scan --signatures /etc/logwatch/signatures.d vllm.log":
        "test_the_use_block_scans",
    "README.md | logwatch scan vllm.log --model-dir /models/Qwen3.6-NVFP4 ":
        "test_the_diagnose_block",
    "README.md | logwatch scan vllm.log --cmdline": "test_the_diagnose_block",
    "README.md | logwatch scan vllm.log --pid 4242": "test_the_diagnose_block",
    "README.md | logwatch snapshot show --model-dir /models/q --json > before.json":
        "test_snapshot_show_and_diff",
    "README.md | logwatch snapshot diff before.json after.json": "test_snapshot_show_and_diff",
    "README.md | ```toml [relaunch]": "test_the_readmes_toml_passes_check_config",
    "README.md | ```toml [[notify]]": "test_the_readmes_toml_passes_check_config",
    "README.md | logwatch status": "test_a_daemon_following_a_file_answers_the_docs_commands",
    "README.md | logwatch approve qwen-7-2c1f09aa":
        "test_a_daemon_following_a_file_answers_the_docs_commands",
    "README.md | logwatch reject qwen-7-2c1f09aa":
        "test_a_daemon_following_a_file_answers_the_docs_commands",
    "README.md | logwatch reset-breaker qwen":
        "test_a_daemon_following_a_file_answers_the_docs_commands",
    "README.md | ```text $ logwatch sql \"SELECT action_id":
        "test_the_history_block_on_the_default_history",
    "README.md | logwatch scan --db history.duckdb":
        "test_the_history_block_on_the_default_history",
    "README.md | logwatch history --db history.duckdb":
        "test_the_history_block_on_the_default_history",
    "README.md | logwatch sql --db history.duckdb \"SELECT * FROM failures_by_config\"":
        "test_the_history_block_on_the_default_history",
    "README.md | logwatch sql --db history.duckdb --csv":
        "test_the_history_block_on_the_default_history",
    "README.md | logwatch daemon --file /var/log/vllm/vllm.log --from-end":
        "test_daemon_from_end_reads_only_new_lines",
    "README.md | logwatch daemon --file '/var/log/vllm/*.log'":
        "test_daemon_on_a_glob_follows_a_file_that_appears_later",
    "README.md | logwatch daemon --file /var/log/vllm/vllm.log":
        "test_a_daemon_following_a_file_answers_the_docs_commands",
    "README.md | vllm serve ... 2>&1 | logwatch daemon --stdin":
        "test_a_pipe_into_daemon_stdin_and_logwatch_run",
    "README.md | logwatch run -- vllm serve /models/Qwen3.6":
        "test_a_pipe_into_daemon_stdin_and_logwatch_run",
    "README.md | logwatch sql \"SELECT signature, count(*) FROM findings GROUP BY ALL\"":
        "test_a_daemon_following_a_file_answers_the_docs_commands",
    "README.md | logwatch sql \"SELECT started, outcome":
        "test_a_daemon_following_a_file_answers_the_docs_commands",
    "README.md | logwatch sql \"SELECT title, launches":
        "test_a_daemon_following_a_file_answers_the_docs_commands",
    "README.md | logwatch signatures list": "test_the_signature_library_block",
    "README.md | logwatch signatures show marlin.repack_tile_n":
        "test_the_signature_library_block",
    "README.md | logwatch signatures test": "test_the_signature_library_block",
    "README.md | logwatch signatures lint": "test_the_signature_library_block",
    "README.md | logwatch tui --db": "test_the_tui_opens_the_history_without_a_daemon",
    "README.md | logwatch tui --socket": "test_the_tui_opens_the_history_without_a_daemon",
    "README.md | logwatch tui": "test_the_tui_opens_the_history_without_a_daemon",
    "docs/daemon.md | ```python from logwatch.daemon.client":
        "test_a_daemon_following_a_file_answers_the_docs_commands",
    "docs/daemon.md | logwatch status": "test_a_daemon_following_a_file_answers_the_docs_commands",
    "docs/daemon.md | logwatch sql \"SELECT * FROM incident_timeline LIMIT 5\"":
        "test_a_daemon_following_a_file_answers_the_docs_commands",
    "docs/fleet.md | logwatch export --parquet /srv/fleet --host gpu1":
        "test_export_by_host_and_since",
    "docs/fleet.md | logwatch export --parquet /srv/fleet --since":
        "test_export_by_host_and_since",
    "docs/history.md | ```sql -- how did each start": "test_the_history_docs_queries_via_the_cli",
}

# Run as written by a test of another file (which reads the example from the doc).
ELSEWHERE: dict[str, str] = {
    "README.md | logwatch scan --json vllm.log | jq":
        "tests/test_docs_examples.py::"
        "test_the_readmes_jq_example_prints_the_root_cause_and_nothing_when_there_is_none",
    "README.md | logwatch preflight ":
        "tests/test_preflight.py::test_readme_examples_run_as_written",
    "README.md | logwatch scan vllm.log --model-dir /models/Qwen3.6-NVFP4A16":
        "tests/test_plan.py::test_the_readme_plan_example_runs",
    "README.md | logwatch plan --db history.duckdb":
        "tests/test_plan.py::test_the_readme_plan_example_runs",
    "README.md | ```text [ 0.0 s] launch 1":
        "tests/test_demo.py::test_the_demo_ends_healthy_and_prints_the_readmes_timeline",
    "README.md | ```text [ 0.8 s] logwatch-demo":
        "tests/test_relaunch_loop_systemd.py::test_the_demo_through_systemd_and_the_daemon",
    "README.md | logwatch signatures draft":
        "tests/test_templates_draft.py::test_the_draft_examples_in_the_docs_run",
    "docs/signatures.md | logwatch signatures draft":
        "tests/test_templates_draft.py::test_the_draft_examples_in_the_docs_run",
    "docs/signatures.md | ```toml id = \"site.my_failure\"":
        "tests/test_docs_examples.py::"
        "test_the_signature_example_in_the_docs_loads_and_passes_its_own_examples",
    "docs/daemon.md | printf '{\"op\":\"subscribe\"":
        "tests/test_docs_examples.py::"
        "test_the_daemon_docs_socat_subscription_stays_and_hears_an_incident",
    "docs/fleet.md | ```sql SELECT l.host":
        "tests/test_fleet.py::test_three_hosts_exports_are_one_dataset_the_docs_query_reads",
    "docs/daemon.md | ```toml [socket]":
        "tests/test_config.py::test_the_socket_groups_are_parsed_strictly_as_the_docs_show",
    "docs/fleet.md | ```toml [export]":
        "tests/test_fleet.py::"
        "test_a_running_daemon_exports_on_its_timer_and_the_cli_says_who_holds_it",
}

# Not run by any test, with the reason. (Their `logwatch` lines are still checked against the
# parser by test_every_logwatch_command_parses.)
NOT_RUN: dict[str, str] = {
    "README.md | make test": "runs this very suite (and ruff, mypy): a test cannot run it",
    "README.md | make check": "runs this very suite's fast half: a test cannot run it",
    "README.md | logwatch scan vllm.log --unit vllm.service":
        "needs systemd as PID 1 with a vllm.service unit (here: `System has not been booted "
        "with systemd`); units are read under the systemd --user harness by "
        "tests/test_relaunch_systemd.py",
    "README.md | logwatch snapshot show --unit vllm.service":
        "needs systemd as PID 1 with a vllm.service unit",
    "README.md | logwatch daemon --journal-unit vllm.service":
        "needs the host's journald with a vllm.service unit; the journald source is run on "
        "real journal files (--journal-file) by tests/test_journald.py",
    "README.md | ``` bytes ──>": "a diagram, not a command",
    "README.md | ``` serving log, 1 process":
        "the output of `make bench` (1 GB and 256 MB, several minutes): a benchmark; "
        "tests/test_benchmarks.py runs the same bench on a few MB",
    "README.md | ``` 2,400,000 lines written":
        "the output of `make soak` (four minutes at 10,000 lines/s, a tmpfs mounted as root): "
        "a benchmark; the same soak, short and slow, is run by tests/test_soak.py",
    "README.md | logwatch run --relaunch auto":
        "a real vLLM aside, the relaunch is verified after a soak of relaunch.soak_seconds "
        "(60 s by default, and the line names no --config to shorten it); the same run with "
        "the stand-in and a 10 s soak from a config file is tests/test_run_relaunch.py ("
        "test_a_relaunch_that_cannot_verify_is_stopped_and_the_run_ends, and with `ask`, "
        "test_an_approved_relaunch_becomes_the_runs_child)",
    "docs/real-vllm.md | make real-vllm":
        "installs a real vLLM (3.5 GB) and runs it for about 10 minutes: the opt-in tier "
        "itself; its parts that need no vLLM (the case table, the sample maker, the table "
        "writer) are tested by tests/test_real_vllm_tier.py",
    "docs/architecture.md | ``` logwatch/":
        "the package layout, checked against logwatch/ by tests/test_architecture.py",
    "docs/architecture.md | ``` launch failed (event loop)": "a diagram, not a command",
    "docs/architecture.md | ``` source ──chunks──>": "a diagram, not a command",
    "docs/architecture.md | ``` bytes from a source": "a diagram, not a command",
    "docs/architecture.md | ``` starting ──startup complete──>": "a diagram, not a command",
}


def _classified(key: str) -> list[tuple[str, str]]:
    return [(name, prefix) for name, table in (("RUN_HERE", RUN_HERE), ("ELSEWHERE", ELSEWHERE),
                                               ("NOT_RUN", NOT_RUN))
            for prefix in table if key.startswith(prefix)]


def _most_specific(key: str) -> tuple[str, str] | None:
    """The entry whose prefix is the longest of those `key` starts with (so that
    `logwatch status` and `logwatch sql "..."` entries do not swallow longer ones)."""
    hits = _classified(key)
    return max(hits, key=lambda hit: len(hit[1])) if hits else None


def test_every_example_is_run_or_excused() -> None:
    found = examples()
    assert len(found) >= 60, len(found)
    unaccounted = [f"{e.key}  (line {e.line})" for e in found if _most_specific(e.key) is None]
    assert not unaccounted, ("examples no test runs and NOT_RUN does not excuse; run them in "
                             "tests/test_docs_every_example.py:\n" + "\n".join(unaccounted))
    used = {_most_specific(e.key) for e in found}
    stale = [(name, prefix) for name, table in (("RUN_HERE", RUN_HERE),
                                                ("ELSEWHERE", ELSEWHERE), ("NOT_RUN", NOT_RUN))
             for prefix in table if (name, prefix) not in used]
    assert not stale, f"entries that match no example any more: {stale}"
    here = sys.modules[__name__]
    for test in set(RUN_HERE.values()):
        assert callable(getattr(here, test, None)), test
    for where in set(ELSEWHERE.values()):
        file, _, test = where.partition("::")
        assert f"def {test}(" in (ROOT / file).read_text(encoding="utf-8"), where
    for reason in NOT_RUN.values():
        assert reason.strip()


# --- every logwatch command line parses, flags spelt exactly -------------------------------

def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _logwatch_invocations(command: str) -> Iterator[list[str]]:
    """Each `logwatch ...` of a shell line as its words: a process substitution `<(...)` is a
    path, redirections and pipes end a command."""
    command = re.sub(r"<\([^)]*\)", "/dev/fd/63", command)
    lexer = shlex.shlex(command, posix=True, punctuation_chars="|&;<>")
    lexer.whitespace_split = True
    words: list[str] = []
    for word in [*lexer, "|"]:
        if set(word) <= set("|&;<>"):
            if words and words[0] == "logwatch":
                yield words
            words = []
        elif words or word == "logwatch":
            words.append(word)
        elif not words:
            words = [word]


def test_every_logwatch_command_parses() -> None:
    parser = build_parser()
    commands = _subparsers(parser)
    checked = 0
    for example in examples():
        if example.lang not in SHELL:
            continue
        for words in _logwatch_invocations(example.text):
            where = f"{example.doc}:{example.line}: {example.text}"
            try:
                args = parser.parse_args(words[1:])
            except SystemExit:
                pytest.fail(f"logwatch's parser refuses {where}")
            assert args.command == words[1], where
            known = {s for a in commands[words[1]]._actions for s in a.option_strings}
            for inner in _subparsers(commands[words[1]]).values():
                known |= {s for a in inner._actions for s in a.option_strings}
            for word in words[2:]:
                if word == "--":
                    break  # what follows is vLLM's command line
                if word.startswith("-") and word != "-":
                    assert word.split("=")[0] in known, f"{word} is no option: {where}"
            checked += 1
    assert checked >= 50, checked


# --- helpers to run them --------------------------------------------------------------------

def _swap(line: str, names: dict[str, str]) -> str:
    """`line` with each whole word-like occurrence of a name replaced (longest first)."""
    for name in sorted(names, key=len, reverse=True):
        pattern = re.compile(r"(?<![\w/.~-])" + re.escape(name) + r"(?![\w/.-])")
        line = pattern.sub(names[name].replace("\\", "\\\\"), line)
    return line


def sh(line: str, *, env: dict[str, str] | None = None, timeout: float = 60
       ) -> subprocess.CompletedProcess[str]:
    """A doc's shell line run by bash in the repository, `logwatch` being this checkout's
    (`python -m logwatch`)."""
    prelude = f'logwatch() {{ {shlex.quote(sys.executable)} -m logwatch "$@"; }}\n'
    return subprocess.run(["bash", "-c", prelude + line], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=env, check=False)


def logwatch(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "logwatch", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, check=False)


def _ran(done: subprocess.CompletedProcess[str], code: int, *expected: str) -> str:
    said = done.stdout + done.stderr
    assert done.returncode == code, (done.args, done.returncode, said[-3000:])
    for text in expected:
        assert text in said, (done.args, text, said[-3000:])
    return said


def until(check: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    return wait_for(check, timeout, what, interval=0.05)


def _status() -> dict[str, Any]:
    async def ask() -> dict[str, Any]:
        async with Client(default_socket_path()) as daemon:
            return dict(await daemon.status())
    return asyncio.run(ask())


def _rows(query: str) -> list[list[Any]]:
    async def ask() -> list[list[Any]]:
        async with Client(default_socket_path()) as daemon:
            return list((await daemon.sql(query))["rows"])
    return asyncio.run(ask())


class Daemon:
    """A doc's `logwatch daemon ...` line running in the background on the test's own
    socket and history ($RUNTIME_DIRECTORY, $STATE_DIRECTORY), ready once it says hello."""

    def __init__(self, line: str) -> None:
        prelude = f'exec {shlex.quote(sys.executable)} -m logwatch "${{@}}"'
        words = shlex.split(line)
        assert words[:2] == ["logwatch", "daemon"], line
        self.proc = subprocess.Popen(["bash", "-c", prelude, "logwatch", *words[1:]], cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        asyncio.run(wait_ready(default_socket_path(), 30,
                               alive=lambda: self.proc.poll() is None))

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
        out = self.proc.communicate(timeout=30)[0].decode(errors="replace")
        assert self.proc.returncode == 0, out[-3000:]
        return out


# --- README: Set up --------------------------------------------------------------------------

@pytest.mark.slow
def test_make_demo_runs_its_recipe(tmp_path: Path) -> None:
    """`make demo`: the recipe make would run (`make -n demo`), each logwatch line with this
    checkout's interpreter and its .demo.duckdb in a temporary directory."""
    _line("README.md", "make demo")
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    dry = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    # the demo's own lines (a stale .venv would add its bootstrap, which is not run here)
    recipe = [line for line in dry.replace("\\\n", " ").splitlines()
              if line.startswith((".venv/bin/logwatch ", "rm -f .demo.duckdb"))]
    assert any(".venv/bin/logwatch demo --no-tui" in line for line in recipe), recipe
    db = str(tmp_path / "demo.duckdb")
    said = ""
    for line in recipe:
        line = line.replace(".venv/bin/logwatch", "logwatch").replace(".demo.duckdb", db)
        said += _ran(sh(line, timeout=120), 0)
    assert "logwatch demo: healthy after" in said
    assert "root cause: Tensor size mismatch while loading weights" in said
    assert "failed_launches" in said and "marlin.repack_tile_n" in said


# --- README: Use -----------------------------------------------------------------------------

def test_the_use_block_scans(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    shutil.copy(DEMO_LOG, log)
    rotated = tmp_path / "vllm.log.1.gz"
    rotated.write_bytes(gzip.compress(HEALTHY_LOG.read_bytes()))
    names = {"/var/log/vllm/vllm.log": str(log), "/var/log/vllm.log": str(log),
             "vllm.log": str(log), "vllm.log.1.gz": str(rotated)}
    root_cause = "root cause: Tensor size mismatch while loading weights"

    one = sh(_swap(_line("README.md", "logwatch scan /var/log/vllm/vllm.log"), names))
    _ran(one, 1, "ROOT CAUSE", root_cause, "LAUNCHES (2, newest first)")
    both = sh(_swap(_line("README.md", "logwatch scan vllm.log.1.gz vllm.log"), names))
    _ran(both, 1, "in 2 input(s)", root_cause)
    piped = _line("README.md", "logwatch scan <(ssh gpu1 cat")
    assert "ssh gpu1 cat" in piped
    _ran(sh(_swap(piped.replace("ssh gpu1 cat", "cat"), names)), 1, root_cause)

    # site signatures on top: the docs' own signature, and a line only it knows
    site = tmp_path / "signatures.d"
    site.mkdir()
    (site / "mine.toml").write_text(_block("docs/signatures.md", "toml", "site.my_failure"))
    log.write_text("(Worker_TP0 pid=71) ERROR 11-29 22:38:00 [multiproc_executor.py:702] "
                   "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    line = _line("README.md", "logwatch scan --signatures /etc/logwatch/signatures.d")
    names["/etc/logwatch/signatures.d"] = str(site)
    _ran(sh(_swap(line, names)), 1, "site.my_failure", "What an operator reads first")


def test_journalctl_piped_into_scan(tmp_path: Path) -> None:
    """`journalctl -u vllm --no-pager | logwatch scan -`: the real journalctl, reading a
    journal file of the demo log written as unit vllm.service (the host's journal swapped for
    that file with `--file`)."""
    from tests import test_journald

    if test_journald.REMOTE is None or shutil.which("journalctl") is None:
        pytest.skip("systemd-journal-remote / journalctl not installed")
    line = _line("README.md", "journalctl -u vllm --no-pager | logwatch scan -")
    journal = tmp_path / "vllm.journal"
    start = 1_760_433_121_000_000  # 2026-10-14 09:12:01 UTC
    test_journald.append(journal, [test_journald.export_entry(text, start + n * 1000)
                                   for n, text in enumerate(DEMO_LOG.read_text().splitlines())])
    line = line.replace("journalctl ", f"journalctl --file={shlex.quote(str(journal))} ", 1)
    _ran(sh(line), 1, "in 1 input(s)", "root cause: Tensor size mismatch while loading weights")


# --- README: Diagnose ---------------------------------------------------------------------------

def test_the_diagnose_block(tmp_path: Path) -> None:
    names = {"vllm.log": str(DEMO_LOG), "/models/Qwen3.6-NVFP4": str(UNCOVERED)}
    line = _line("README.md", "logwatch scan vllm.log --model-dir /models/Qwen3.6-NVFP4 ")
    _ran(sh(_swap(line, names)), 1, "DIAGNOSIS",
         "MTP draft built with the target's quantization, stored in another",
         "11 BF16 MTP module group(s) are missing from the ignore list")
    line = _line("README.md", "logwatch scan vllm.log --cmdline")
    _ran(sh(_swap(line, names)), 1, "DIAGNOSIS",
         "11 BF16 MTP module group(s) are missing from the ignore list")

    # --pid: a running `vllm serve` (a script named vllm that waits), read from /proc
    vllm = tmp_path / "bin" / "vllm"
    vllm.parent.mkdir()
    vllm.write_text(f"#!{sys.executable}\nimport sys\nsys.stdin.read()\n")
    vllm.chmod(0o755)
    running = subprocess.Popen([str(vllm), "serve", str(UNCOVERED), "-tp", "4",
                                "--speculative-config", '{"method": "mtp"}'],
                               stdin=subprocess.PIPE)
    try:
        until(lambda: b"serve" in Path(f"/proc/{running.pid}/cmdline").read_bytes(),
              "the stand-in's argv in /proc")
        line = _line("README.md", "logwatch scan vllm.log --pid 4242")
        said = _ran(sh(_swap(line, {**names, "4242": str(running.pid)})), 1, "DIAGNOSIS",
                    "11 BF16 MTP module group(s) are missing from the ignore list")
        assert "layout not proven" not in said  # the model directory was found through /proc
    finally:
        running.communicate(b"", timeout=10)


def test_snapshot_show_and_diff(tmp_path: Path) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    show = _line("README.md", "logwatch snapshot show --model-dir /models/q --json")
    _ran(sh(_swap(show, {"/models/q": str(UNCOVERED), "before.json": str(before)})), 0)
    # after the fix: the checkpoint whose ignore list covers its MTP modules
    _ran(sh(_swap(show, {"/models/q": str(COVERED), "before.json": str(after)})), 0)
    assert json.loads(before.read_text())["model"]["mtp"]["covered"] is False
    diff = _line("README.md", "logwatch snapshot diff before.json after.json")
    done = sh(_swap(diff, {"before.json": str(before), "after.json": str(after)}))
    said = _ran(done, 1, "model.mtp.covered: false -> true")  # 1: they differ, as diff(1)
    assert re.search(r"[0-9a-f]{16} -> [0-9a-f]{16}: \d+ change\(s\)", said), said

    # "or two hashes from the history": the two configurations of the demo log's launches
    _ran(logwatch("scan", "--db", str(default_db_path()), str(DEMO_LOG)), 1)
    hashes = logwatch("sql", "--csv", "SELECT hash FROM snapshots ORDER BY hash")
    old, new = _ran(hashes, 0).split()[1:]
    by_hash = sh(_swap(diff, {"before.json": old, "after.json": new}))
    _ran(by_hash, 1, f"{old} -> {new}: 1 change(s)", "launch.tensor_parallel_size: 4 -> 2")


# --- README: relaunch configuration ---------------------------------------------------------------

def test_the_readmes_toml_passes_check_config(tmp_path: Path) -> None:
    """Each ```toml block of the README, as a configuration file, through `logwatch
    check-config --config` (the daemon's own loader) and `show-config`."""
    relaunch = _block("README.md", "toml", "[relaunch]")
    notify = _block("README.md", "toml", "[[notify]]")
    for name, text, targets in (("relaunch", relaunch, 1), ("notify", notify, 0)):
        config = tmp_path / f"{name}.toml"
        config.write_text(text)
        _ran(logwatch("check-config", "--config", str(config)), 0,
             f"configuration OK: {targets} target(s)")
    shown = _ran(logwatch("show-config", "--config", str(tmp_path / "relaunch.toml")), 0)
    assert re.search(r"relaunch\.breaker_failures\s*=\s*3\s*# .*relaunch\.toml", shown), shown
    assert "[[targets]] qwen" in shown


# --- README: History ------------------------------------------------------------------------------

def test_the_history_block_on_the_default_history(tmp_path: Path) -> None:
    """The History block as written: `scan --db history.duckdb`, then `history` and `sql`
    on that file, no daemon running."""
    logs = tmp_path / "vllm"
    logs.mkdir()
    shutil.copy(DEMO_LOG, logs / "a.log")
    shutil.copy(HEALTHY_LOG, logs / "b.log")
    db = tmp_path / "history.duckdb"
    names = {"history.duckdb": shlex.quote(str(db)),
             "/var/log/vllm/*.log": f"{shlex.quote(str(logs))}/*.log"}
    line = _line("README.md", "logwatch scan --db history.duckdb")
    _ran(sh(_swap(line, names)), 1, "in 2 input(s)", f"recorded in {db}")
    said = _ran(sh(_swap(_line("README.md", "logwatch history --db"), names)), 0)
    assert re.search(r"critical\s+root\s+weights\.tensor_size_mismatch", said), said
    assert re.search(r"critical\s+root\s+marlin\.repack_tile_n", said), said
    said = _ran(sh(_swap(_line("README.md", 'logwatch sql --db history.duckdb "SELECT * FROM '
                               'failures_by_config"'), names)), 0, "(2 rows)")
    assert said.split()[:3] == ["snapshot", "model", "quant_scheme"], said
    said = _ran(sh(_swap(_line("README.md", "logwatch sql --db history.duckdb --csv"), names)),
                0)
    assert said.startswith("signature,count_star()\n") and "\nmarlin.repack_tile_n,4\n" in said
    _ran(logwatch("scan", "--db", str(default_db_path()), str(DEMO_LOG)), 1)  # the daemon's

    # the transcript of the relaunch loop: its query, against this history, prints its columns
    # (its rows come from the loop under systemd: tests/test_relaunch_loop_systemd.py)
    transcript = _block("README.md", "text", "$ logwatch sql ")
    command = transcript.splitlines()[0].removeprefix("$ ")
    said = _ran(sh(command), 0, "(0 rows)")
    assert said.split("\n")[0].split() == transcript.splitlines()[1].split()


def test_the_history_docs_queries_via_the_cli(tmp_path: Path) -> None:
    """docs/history.md's queries, each through `logwatch sql --db`, on a history recorded by
    `logwatch scan --db` of the demo log with its model directory (tests/test_store.py runs
    them in-process too)."""
    db = tmp_path / "h.duckdb"
    _ran(logwatch("scan", "--db", str(db), str(DEMO_LOG), "--model-dir", str(UNCOVERED),
                  "--gpu-capability", "9.0"), 1)
    block = _block("docs/history.md", "sql", "FROM launch_history")
    queries = [q.strip() for q in block.split(";") if q.strip()]
    assert len(queries) == 5
    answers = []
    for query in queries:
        done = logwatch("sql", "--db", str(db), "--json", query)
        _ran(done, 0)
        answers.append(json.loads(done.stdout))
    launches, problems, marlin, mtp, acceptance = answers
    assert launches["columns"] == ["started", "outcome", "root_title", "failed_before",
                                   "tensor_parallel_size"]
    assert [(r["outcome"], r["root_title"], r["tensor_parallel_size"])
            for r in launches["rows"]] == [
        ("failed", "Tensor size mismatch while loading weights", 2),
        ("failed", "Marlin repack: size_n is not divisible by tile_n_size", 4)]
    assert {"title": "Marlin repack: size_n is not divisible by tile_n_size", "launches": 1,
            "launches_failed_by_it": 1, "configurations": 1} in [
        {k: r[k] for k in ("title", "launches", "launches_failed_by_it", "configurations")}
        for r in problems["rows"]]
    assert marlin["columns"][:3] == ["model", "quant_scheme", "tensor_parallel_size"]
    assert [r["model"] for r in mtp["rows"]] == [str(UNCOVERED)]
    assert "ignore list" in mtp["rows"][0]["summary"]
    assert acceptance["columns"] == ["time", "acceptance"]


# --- README: Run it next to vLLM; docs/daemon.md ------------------------------------------------

@pytest.mark.slow
def test_a_daemon_following_a_file_answers_the_docs_commands(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_bytes(b"")
    names = {"/var/log/vllm/vllm.log": str(log)}
    line = _line("README.md", "logwatch daemon --file /var/log/vllm/vllm.log")
    daemon = Daemon(_swap(line, names))
    try:
        log.write_bytes(DEMO_LOG.read_bytes())
        until(lambda: _status()["failed_launches"] >= 2, "both launches failed", 30)
        until(lambda: _rows("SELECT count(*) FROM launches WHERE outcome = 'failed'")
              == [[2]], "both failed launches committed")

        for doc in ("README.md", "docs/daemon.md"):
            status = sh(_line(doc, "logwatch status"))
            _ran(status, 1, "daemon running", "launch #2: failed, root cause "
                 "weights.tensor_size_mismatch")
        said = _ran(sh(_line("README.md", 'logwatch sql "SELECT signature, count(*)')), 0)
        assert re.search(r"marlin\.repack_tile_n\s+4\b", said), said
        said = _ran(sh(_line("README.md", 'logwatch sql "SELECT started, outcome')), 0,
                    "(2 rows)")
        assert said.split()[:4] == ["started", "outcome", "root_title", "failed_before"]
        assert "Tensor size mismatch while loading weights" in said
        said = _ran(sh(_line("README.md", 'logwatch sql "SELECT title, launches')), 0)
        assert said.split()[:4] == ["title", "launches", "configurations", "last_seen"]
        assert "Marlin repack: size_n is not divisible by tile_n_size" in said
        said = _ran(sh(_line("docs/daemon.md", 'logwatch sql "SELECT * FROM incident_timeline')),
                    0, "(5 rows)")
        assert said.split()[:3] == ["first_time", "last_time", "severity"]

        # an operator's word to a daemon with no relaunch policy: refused, and it says why
        for start in ("logwatch approve", "logwatch reject", "logwatch reset-breaker"):
            _ran(sh(_line("README.md", start)), 1,
                 "no target's relaunch policy is ask or auto here")

        _run_the_client_snippet(log)
    finally:
        out = daemon.stop()
    assert "launch #2 failed" in out


def _run_the_client_snippet(log: Path) -> None:
    """docs/daemon.md's Python, as written inside a coroutine, `socket` being the daemon's;
    the placeholder `...` in its loop keeps the event and ends it. The log is fed a failing
    launch now and then until the subscription has heard one."""
    snippet = _block("docs/daemon.md", "python", "from logwatch.daemon.client")
    lines = snippet.splitlines()
    (placeholder,) = [n for n, line in enumerate(lines) if line.strip().startswith("...")]
    indent = lines[placeholder][:len(lines[placeholder]) - len(lines[placeholder].lstrip())]
    lines[placeholder:placeholder + 1] = [f"{indent}seen.append(event)", f"{indent}break"]
    body = "\n".join("    " + line for line in lines)
    source = (f"async def snippet(socket, seen):\n{body}\n"
              "    return hello, status, rows, answer\n")
    scope: dict[str, Any] = {}
    exec(compile(source, "docs/daemon.md", "exec"), scope)  # the doc's own code
    seen: list[Any] = []

    async def feed(done: asyncio.Task[Any]) -> None:
        deadline = time.monotonic() + 30
        while not done.done():
            assert time.monotonic() < deadline, "the snippet's subscription heard nothing"
            with open(log, "ab") as writing:
                writing.write(DEMO_LOG.read_bytes())
            await asyncio.wait([done], timeout=0.5)

    async def both() -> tuple[Any, ...]:
        task = asyncio.ensure_future(scope["snippet"](default_socket_path(), seen))
        await feed(task)
        return tuple(task.result())

    hello, status, rows, answer = asyncio.run(both())
    assert hello["ok"] and hello["protocol"] == 1
    assert status["failed_launches"] >= 2
    assert rows["columns"] == ["count_star()"] and rows["rows"][0][0] > 0
    assert answer["ok"] and len(answer["rows"]) == 5
    assert type(seen[0]).__name__ in ("LaunchEvent", "IncidentEvent"), seen


@pytest.mark.slow
def test_daemon_from_end_reads_only_new_lines(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_bytes(DEMO_LOG.read_bytes())  # an old log: two failed launches already
    old_lines = DEMO_LOG.read_bytes().count(b"\n")
    line = _line("README.md", "logwatch daemon --file /var/log/vllm/vllm.log --from-end")
    daemon = Daemon(_swap(line, {"/var/log/vllm/vllm.log": str(log)}))
    try:
        with open(log, "ab") as writing:
            writing.write(DEMO_LOG.read_bytes())
        until(lambda: _rows("SELECT count(*) FROM launches WHERE outcome = 'failed'") == [[2]],
              "the two new launches failed")
        assert _rows("SELECT min(line) FROM findings") == [[old_lines + 1]]
    finally:
        daemon.stop()


@pytest.mark.slow
def test_daemon_on_a_glob_follows_a_file_that_appears_later(tmp_path: Path) -> None:
    logs = tmp_path / "vllm"
    logs.mkdir()
    (logs / "a.log").write_bytes(DEMO_LOG.read_bytes())
    line = _line("README.md", "logwatch daemon --file '/var/log/vllm/*.log'")
    daemon = Daemon(line.replace("/var/log/vllm/", f"{logs}/"))
    try:
        (logs / "b.log").write_bytes(DEMO_LOG.read_bytes())
        labels = {f"file:{logs / 'a.log'}", f"file:{logs / 'b.log'}"}
        until(lambda: {r[0] for r in _rows("SELECT DISTINCT source FROM launches "
                                           "WHERE outcome = 'failed'")} == labels,
              "launches of both files")
    finally:
        daemon.stop()


@pytest.mark.slow
def test_a_pipe_into_daemon_stdin_and_logwatch_run(tmp_path: Path) -> None:
    """`vllm serve ... | logwatch daemon --stdin` and `logwatch run -- vllm serve ...` with
    vLLM's stand-in as `vllm` (the demo's): a TP-4 NVFP4A16 launch on a simulated H200 fails on
    the Marlin tile error."""
    from logwatch.demo.scenario import standin_entry

    vllm = standin_entry(tmp_path / "bin")
    model = tmp_path / "models" / "Qwen3.6"
    shutil.copytree(A16, model)
    env = {**os.environ, "PATH": f"{vllm.parent}:{os.environ['PATH']}",
           "LOGWATCH_STANDIN_GPU": "h200", "LOGWATCH_STANDIN_GPU_COUNT": "4",
           "LOGWATCH_STANDIN_PACE": "0"}
    line = _line("README.md", "vllm serve ... 2>&1 | logwatch daemon --stdin")
    line = line.replace("vllm serve ...", f"vllm serve {model} --tensor-parallel-size 4")
    said = _ran(sh(line, env=env), 0)  # the pipe ends: it commits and exits 0
    assert "launch #1 failed: Marlin repack" in said, said[-3000:]
    db = str(default_db_path())
    done = logwatch("sql", "--db", db, "SELECT outcome, root_signature FROM launches")
    _ran(done, 0, "failed", "marlin.repack_tile_n")

    line = _line("README.md", "logwatch run -- vllm serve /models/Qwen3.6")
    done = sh(_swap(line, {"/models/Qwen3.6": str(model)}), env=env)
    _ran(done, 1)
    assert ("root cause: Marlin repack: size_n is not divisible by tile_n_size"
            in " ".join(done.stderr.split()))  # the report wraps at the terminal width
    assert "DIAGNOSIS" in done.stderr


# --- docs/fleet.md ----------------------------------------------------------------------------

def test_export_by_host_and_since(tmp_path: Path) -> None:
    """docs/fleet.md's two exports of the default history, a log whose first launch is of
    10-14 and whose second is of today: `--host gpu1` writes every day under host=gpu1;
    `--since 2026-12-01` (into a directory of its own) only the days from that date on
    (which year 10-14 is read as depends on today: the days expected are read from the
    history itself)."""
    import datetime

    import duckdb

    lines = DEMO_LOG.read_text().splitlines(keepends=True)
    today = f"{datetime.date.today():%m-%d}"
    log = tmp_path / "vllm.log"
    log.write_text("".join(lines[:96]) + "".join(
        re.sub(r"\b10-14 (\d\d:\d\d:\d\d)", rf"{today} \1", line) for line in lines[96:]))
    _ran(logwatch("scan", "--db", str(default_db_path()), str(log)), 1)
    every = tmp_path / "every"
    line = _line("docs/fleet.md", "logwatch export --parquet /srv/fleet --host gpu1")
    _ran(sh(_swap(line, {"/srv/fleet": str(every)})), 0, "launches: 2 row(s)")
    assert {p.name for p in every.glob("launches/*")} == {"host=gpu1"}
    assert len(list(every.glob("launches/host=gpu1/day=*/part_0.parquet"))) == 2
    line = _line("docs/fleet.md", "logwatch export --parquet /srv/fleet --since")
    since = datetime.date.fromisoformat(shlex.split(line)[-1])
    fleet = tmp_path / "fleet"
    said = _ran(sh(_swap(line, {"/srv/fleet": str(fleet)})), 0, "launches: ")
    con = duckdb.connect(str(default_db_path()), read_only=True)
    try:
        days = {row[0] for row in con.execute("SELECT CAST(started AS DATE) FROM launches")
                .fetchall()}
    finally:
        con.close()
    assert len(days) == 2 and datetime.date.today() in days
    written = {p.name.removeprefix("day=") for p in fleet.glob("launches/host=*/day=*")}
    assert written == {f"{d}" for d in days if d >= since}, (written, days, said)


# --- README: the signature library -----------------------------------------------------------

def test_the_signature_library_block() -> None:
    said = _ran(sh(_line("README.md", "logwatch signatures list")), 0)
    assert re.search(r"^marlin\.repack_tile_n\s", said, flags=re.M), said[:2000]
    _ran(sh(_line("README.md", "logwatch signatures show marlin.repack_tile_n")), 0,
         "marlin.repack_tile_n", "size_n")
    said = _ran(sh(_line("README.md", "logwatch signatures test")), 0)
    assert re.search(r"^\d+ passed, 0 failed$", said, flags=re.M), said[-500:]
    said = _ran(sh(_line("README.md", "logwatch signatures lint")), 0)
    assert re.search(r"^\d+ signatures linted, 0 issue\(s\)$", said, flags=re.M), said[-500:]


def _said(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""


# --- README: Watch it ----------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_tui_opens_the_history_without_a_daemon(tmp_path: Path) -> None:
    """The three `logwatch tui` lines in a real terminal (tmux), no daemon running: each
    opens, says there is no daemon and shows the history read-only; `q` ends it."""
    from tests.test_tui_tmux import Tmux

    db = tmp_path / "h.duckdb"
    _ran(logwatch("scan", "--db", str(db), str(DEMO_LOG)), 1)
    _ran(logwatch("scan", "--db", str(default_db_path()), str(DEMO_LOG)), 1)
    names = {"/var/lib/logwatch/logwatch.duckdb": str(db),
             "/run/logwatch/logwatch.sock": str(tmp_path / "control.sock")}
    lines = [_line("README.md", "logwatch tui --db"), _line("README.md", "logwatch tui --socket")]
    lines.append(_line("README.md", "logwatch tui"))
    for n, line in enumerate(lines):
        command = _swap(line, names).replace("logwatch ", f"{shlex.quote(sys.executable)} -m "
                                             "logwatch ", 1)
        done = tmp_path / f"done{n}"
        term = Tmux(f"lwdocs{os.getpid()}x{n}",
                    f"cd {shlex.quote(str(ROOT))}; {command}; echo $? > {done}")
        try:
            screen = term.until("(read-only: no daemon)", "weights.tensor_size_mismatch",
                                timeout=30)
            assert "Traceback" not in screen, screen
            term.keys("q")
            until(partial(_said, done), f"{line} ended after q", 30)
            assert done.read_text().strip() == "0", (line, term.screen())
        finally:
            term.kill()
