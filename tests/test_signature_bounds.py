"""A hostile or careless signature never hangs anything: loading, testing and linting run
under a hard bound (the regex time bound per example, a child process with a deadline behind
it), matching has a per-record budget, and a signature that keeps running over is disabled."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.lines.assemble import assemble
from logwatch.core.lines.vllm_format import parse_line
from logwatch.core.signatures.library import Library, LibraryError
from logwatch.core.signatures.matcher import DISABLE_AFTER_TIMEOUTS, Matcher
from logwatch.core.signatures.signature import Example, Pattern, Signature
from logwatch.daemon.client import Client, subscribe
from logwatch.daemon.protocol import Event, FindingEvent, LibraryEvent
from logwatch.daemon.service import Daemon
from logwatch.library.files import read_library
from logwatch.library.vetted import VettedCache, library_digest
from logwatch.library.worker import load_bounded
from logwatch.store.db import Store, open_store
from tests.conftest import LIBRARY_VERSION, ROOT
from tests.test_library_loader import GOOD

# `regex` handles `(a+)+$` well, but `(a|aa)+$` is Fibonacci-exponential: 40 a's take ~40 s
# without a bound, 60 a's longer than anyone waits.
CATASTROPHIC = r"boom (a|aa)+$"
SLOW_TEXT = "boom " + "a" * 60 + "b"
# Compiling this takes minutes and gigabytes: no match timeout can stop it.
HUGE_COMPILE = r"boom (?:(?:a{1000}){1000}){100}"
BOUND_S = 30  # today's code hangs far longer than this on each case


def signature_file(pattern: str, example: str = "boom aaaa",
                   counter: str = "nothing to see", extra_pattern: str | None = None) -> str:
    second = (f"\n[[patterns]]\nregex = '''{extra_pattern}'''\nliterals = [\"boom \"]\n"
              if extra_pattern else "")
    return f"""\
id = "site.evil"
version = 1
status = "experimental"
severity = "error"
fatal = false
category = "cuda_error"
title = "Evil"
remedy = "investigate"
explanation = "x"

[[patterns]]
regex = '''{pattern}'''
literals = ["boom "]
{second}
[[examples]]
text = '''{example}'''

[[counter_examples]]
text = '''{counter}'''
"""


def site_dir(tmp_path: Path, text: str) -> Path:
    site = tmp_path / "site"
    (site / "local").mkdir(parents=True, exist_ok=True)
    (site / "local" / "evil.toml").write_text(text)
    return site


def cli(*args: str, timeout: float = BOUND_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "logwatch", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout, check=False)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "vllm.log"
    path.write_text("hello\nboom aaa\n")
    return path


def test_scan_refuses_a_positive_example_that_backtracks(tmp_path: Path, log: Path) -> None:
    site = site_dir(tmp_path, signature_file(CATASTROPHIC, example=SLOW_TEXT))
    done = cli("scan", str(log), "--signatures", str(site))
    assert done.returncode == 2, done.stderr
    assert "site/local/evil.toml" in done.stderr and "example 1" in done.stderr
    assert "ran over the" in done.stderr and "pattern 1" in done.stderr


def test_scan_refuses_a_counter_example_that_backtracks(tmp_path: Path, log: Path) -> None:
    """A counter-example that times out used to count as "does not match": accepted."""
    site = site_dir(tmp_path, signature_file(CATASTROPHIC, counter=SLOW_TEXT))
    done = cli("scan", str(log), "--signatures", str(site))
    assert done.returncode == 2, done.stderr
    assert "site/local/evil.toml" in done.stderr and "counter-example 1" in done.stderr
    assert "ran over the" in done.stderr


def test_a_second_pattern_that_backtracks_on_an_example_is_refused(tmp_path: Path,
                                                                   log: Path) -> None:
    """Pattern 1 matches first; pattern 2 would run on every other line with the literal."""
    site = site_dir(tmp_path, signature_file(r"^boom a", example=SLOW_TEXT,
                                             extra_pattern=CATASTROPHIC))
    done = cli("scan", str(log), "--signatures", str(site))
    assert done.returncode == 2, done.stderr
    assert "site/local/evil.toml" in done.stderr and "pattern 2" in done.stderr


def test_signatures_test_reports_the_example_that_backtracks(tmp_path: Path) -> None:
    site = site_dir(tmp_path, signature_file(CATASTROPHIC, example=SLOW_TEXT))
    done = cli("signatures", "--signatures", str(site), "test")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL site.evil" in done.stdout and "site/local/evil.toml" in done.stdout
    assert "example 1: pattern 1 ran over the" in done.stdout


def test_signatures_lint_is_bounded(tmp_path: Path) -> None:
    site = site_dir(tmp_path, signature_file(r"^boom a", example=SLOW_TEXT,
                                             extra_pattern=CATASTROPHIC))
    done = cli("signatures", "--signatures", str(site), "lint")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "site/local/evil.toml" in done.stderr and "pattern 2" in done.stderr


@pytest.mark.slow
def test_a_pattern_that_never_finishes_compiling_is_refused(tmp_path: Path,
                                                            log: Path) -> None:
    """No regex timeout covers compiling: the child's deadline and memory ceiling do,
    whichever comes first."""
    site = site_dir(tmp_path, signature_file(HUGE_COMPILE))
    started = time.monotonic()
    with pytest.raises(LibraryError) as info:
        load_bounded([site], deadline=3.0)
    assert time.monotonic() - started < BOUND_S
    (problem,) = info.value.problems
    assert problem.path == "site/local/evil.toml"
    assert problem.message.startswith("reading it and compiling its patterns ")
    assert "did not finish within 3 s" in problem.message or "of memory" in problem.message
    # the command line goes through the same bound
    done = cli("scan", str(log), "--signatures", str(site))
    assert done.returncode == 2, done.stderr
    assert "site/local/evil.toml: reading it and compiling its patterns " in done.stderr
    assert "the signature is refused" in done.stderr


def _evil(number: int) -> Signature:
    return Signature(
        id=f"site.evil{number}", version=1, status="experimental", severity="error",
        fatal=False, category="cuda_error", title="evil",
        patterns=(Pattern(r"^boom(a|aa)+$", ("boom",)),), explanation="", remedy="investigate",
        examples=(Example("boom"),), counter_examples=(Example("x"),))


def _good() -> Signature:
    return Signature(
        id="site.good", version=1, status="experimental", severity="error", fatal=False,
        category="cuda_error", title="good", patterns=(Pattern(r"^boom", ("boom",)),),
        explanation="", remedy="investigate", examples=(Example("boom"),),
        counter_examples=(Example("x"),))


def _record() -> object:
    (record,) = assemble([parse_line("t", 1, "boom" + "a" * 60 + "!", datetime(2026, 1, 1))])
    return record


def test_one_record_spends_one_budget_however_many_patterns_run_over() -> None:
    """Each pattern used to get its own 50 ms: 200 bad signatures cost 10 s on one line."""
    matcher = Matcher([_evil(n) for n in range(200)], engine="python")
    matcher.match_record(_record())  # type: ignore[arg-type]
    assert sum(matcher.timeouts.values()) <= 2
    assert sum(matcher.skipped.values()) >= 198


def test_a_good_signature_still_matches_beside_one_that_runs_over() -> None:
    matcher = Matcher([_evil(1), _good()], engine="python")
    found = matcher.match_record(_record())  # type: ignore[arg-type]
    assert [f.signature.id for f in found] == ["site.good"]
    assert matcher.timeouts["site.evil1"] == 1


def test_a_signature_that_keeps_running_over_is_disabled_and_reported() -> None:
    disabled: list[tuple[str, str]] = []
    matcher = Matcher([_evil(1), _good()], engine="python",
                      on_disable=lambda sig, why: disabled.append((sig.id, why)))
    for _ in range(DISABLE_AFTER_TIMEOUTS + 3):
        found = matcher.match_record(_record())  # type: ignore[arg-type]
        assert [f.signature.id for f in found] == ["site.good"]
    assert matcher.timeouts["site.evil1"] == DISABLE_AFTER_TIMEOUTS  # not tried any more
    assert list(matcher.disabled) == ["site.evil1"]
    assert disabled == [("site.evil1", matcher.disabled["site.evil1"])]
    assert f"{DISABLE_AFTER_TIMEOUTS} times" in disabled[0][1]


@pytest.mark.slow
def test_scan_disables_a_signature_that_keeps_running_over(tmp_path: Path) -> None:
    """Examples fine, the pattern catastrophic on other lines: a few budgets, then off."""
    site = site_dir(tmp_path, signature_file(CATASTROPHIC))
    log = tmp_path / "slow.log"
    log.write_text("".join(f"{SLOW_TEXT}\n" for _ in range(50)))
    done = cli("scan", "--mode", "full", str(log), "--signatures", str(site))
    assert done.returncode == 3, done.stderr  # no fatal incident; the text is not vLLM's
    assert "warning: signature site.evil was disabled: its patterns ran over" in done.stdout


GOOD_SITE = GOOD.replace('id = "site.example"', 'id = "site.boom"')


@pytest.mark.slow
def test_the_daemon_keeps_working_while_a_reload_runs_over(tmp_path: Path) -> None:
    """A signature that never compiles is dropped into a watched site directory: while the
    reload runs, the socket answers and a followed file's findings keep coming; then the
    refusal is published and the running library stays. Today the reload runs on the event
    loop and blocks it for minutes."""
    site, log, sock = tmp_path / "site", tmp_path / "vllm.log", tmp_path / "lw.sock"
    (site / "local").mkdir(parents=True)
    (site / "local" / "boom.toml").write_text(GOOD_SITE)
    log.write_bytes(b"")
    proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--file", str(log),
                             "--db", str(tmp_path / "h.duckdb"), "--socket", str(sock),
                             "--signatures", str(site)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def exercise() -> tuple[list[int], list[Event], dict[str, Any]]:
        stream = subscribe(sock, ["library", "finding"], wait=30)
        await stream.start()
        events: list[Event] = []

        async def collect() -> None:
            async for event in stream:
                assert isinstance(event, Event)
                events.append(event)
                if isinstance(event, LibraryEvent):
                    return

        collector = asyncio.create_task(collect())
        (site / "local" / "evil.toml").write_text(
            signature_file(HUGE_COMPILE))
        during: list[int] = []  # lines written while the status said a reload runs
        number = 0
        deadline = time.monotonic() + 90
        async with Client(sock, timeout=5) as daemon:
            while not collector.done():
                assert time.monotonic() < deadline, "the reload never ended"
                reloading = (await daemon.status())["reloading"]
                number += 1
                with open(log, "ab") as out:
                    out.write(f"boom {number}\n".encode())
                if reloading:
                    during.append(number)
                await asyncio.sleep(0.1)
            status = dict(await daemon.status())
        await collector
        await stream.close()
        return during, events, status

    try:
        during, events, status = asyncio.run(exercise())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    refused = events[-1]
    assert isinstance(refused, LibraryEvent) and refused.loaded is False
    assert "local/evil.toml: reading it and compiling its patterns" in str(refused.error)
    found_before = {int(e.captures["n"]) for e in events if isinstance(e, FindingEvent)}
    assert during, "no status answer saw the reload running"
    assert found_before & set(during), "no finding was recorded while the reload ran"
    assert status["reloading"] is False and status["library"] == LIBRARY_VERSION


def test_reload_requests_while_one_runs_make_one_more(tmp_path: Path,
                                                     library: Library) -> None:
    release = threading.Event()
    calls: list[int] = []

    def slow_load() -> Library:
        calls.append(1)
        release.wait(30)
        return library

    async def main(store: Store) -> None:
        daemon = Daemon([], library, store, reload_library=slow_load)
        for _ in range(5):
            daemon.reload()
        await asyncio.sleep(0)
        assert daemon.status()["reloading"] is True
        release.set()
        deadline = time.monotonic() + 30
        while daemon.status()["reloading"]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        assert daemon.events.count(f"library {library.version} loaded") == 2

    with open_store(tmp_path / "h.duckdb") as store:
        asyncio.run(main(store))
    assert len(calls) == 2


def test_a_vetted_library_loads_in_process_and_a_change_is_checked_again(
        tmp_path: Path) -> None:
    cache = VettedCache(tmp_path / "cache")
    site = site_dir(tmp_path, GOOD_SITE)
    assert load_bounded([site], cache=cache).get("site.boom") is not None
    assert cache.holds(library_digest(read_library([site])))
    # no time at all for a child: only the cache can answer
    assert load_bounded([site], deadline=0.0, cache=cache).get("site.boom") is not None
    (site / "local" / "evil.toml").write_text(signature_file(CATASTROPHIC, counter=SLOW_TEXT))
    with pytest.raises(LibraryError, match="counter-example 1: pattern 1 ran over"):
        load_bounded([site], cache=cache)
    assert not cache.holds(library_digest(read_library([site])))
    with pytest.raises(LibraryError, match="did not finish within 0 s"):
        load_bounded([site], deadline=0.0, cache=cache)


def test_a_file_that_is_not_a_regular_file_is_refused_without_reading_it(
        tmp_path: Path) -> None:
    site = site_dir(tmp_path, GOOD_SITE)
    os.mkfifo(site / "local" / "pipe.toml")  # reading it would block for ever
    with pytest.raises(LibraryError, match=r"pipe\.toml: not a regular file"):
        load_bounded([site], cache=VettedCache(tmp_path / "cache"))
