"""Live ingestion invariants: chunked feeding and crash-restarts from the scanner's safe point
find exactly what one offline scan finds, nothing lost, nothing twice."""

from __future__ import annotations

import random
from datetime import datetime

import pytest

from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from tests.conftest import SAMPLES

REF = datetime(2026, 11, 30)


@pytest.mark.parametrize("seed", range(3))
def test_random_chunks_flushes_and_restarts(library: Library, seed: int) -> None:
    matcher = Matcher(library.signatures)
    for log in sorted(SAMPLES.glob("*.log")):
        data = log.read_bytes()
        whole = BlockScanner(matcher, "s", REF)
        want = [(f.signature.id, f.lineno) for f in whole.feed(data) + whole.finish()]
        rng = random.Random(f"{seed}:{log.name}")
        got: list[tuple[str, int]] = []
        committed = set()  # what a database with (line, signature) keys would hold
        scanner, base, pos = BlockScanner(matcher, "s", REF), 0, 0
        while pos < len(data):
            end = data.find(b"\n", min(len(data) - 1, pos + rng.randint(1, 4000))) + 1 or \
                len(data)
            found = scanner.feed(data[pos:end])
            pos = end
            for f in found:
                got.append((f.signature.id, f.lineno))
                committed.add((f.signature.id, f.lineno))
            if rng.random() < 0.2:  # kill -9, then resume from the last safe point
                safe_bytes, safe_line = scanner.safe_point()
                base += safe_bytes
                pos = base
                scanner = BlockScanner(matcher, "s", REF, start_line=safe_line)
        got += [(f.signature.id, f.lineno) for f in scanner.flush()]
        committed |= {g for g in got}
        assert committed == set(want), log.name


def test_a_flush_at_a_quiet_point_loses_nothing_and_the_scan_goes_on(library: Library) -> None:
    """Two launches written with a pause between them: flushing in the pause (the daemon does
    after a quiet period) settles the first launch; the second continues the line numbers."""
    matcher = Matcher(library.signatures)
    first = (SAMPLES / "mtp_bare_assert_qwen3next.log").read_bytes()
    second = (SAMPLES / "docker_compose_oom.log").read_bytes()
    whole = BlockScanner(matcher, "s", REF)
    want = [(f.signature.id, f.lineno) for f in whole.feed(first + second) + whole.finish()]
    live = BlockScanner(matcher, "s", REF)
    got = live.feed(first) + live.flush()
    assert live.safe_point() == (len(first), first.count(b"\n") + 1)
    got += live.feed(second) + live.flush()
    assert [(f.signature.id, f.lineno) for f in got] == want


def test_a_stream_is_named_by_what_is_read_not_by_the_source() -> None:
    """The keys checkpoints are stored under: a journal selector's units as systemd names
    them, with their scope and machine (a journal file is its own); a file's absolute path."""
    import os

    from logwatch.sources.files import FileSource
    from logwatch.sources.journald import JournalSource, journal_stream

    m = "0123abcd"
    unit = journal_stream(["-u", "vllm"], m, 0)
    assert unit == journal_stream(["--unit=vllm.service"], m, 5)
    assert unit == "journal:machine=0123abcd unit=vllm.service"
    assert unit != journal_stream(["-u", "vllm"], "another-machine", 0)
    user = journal_stream(["--user-unit", "vllm"], m, 1000)
    assert user == "journal:machine=0123abcd user=1000 user_unit=vllm.service"
    assert user != journal_stream(["--user-unit", "vllm"], m, 1001) != unit
    in_file = journal_stream(["--file", "j/x.journal", "-u", "vllm@1"], m, 0)
    assert in_file == journal_stream(["-u", "vllm@1.service", "--file",
                                      os.path.abspath("j/x.journal")], "elsewhere", 7)
    assert in_file == f"journal:file={os.path.abspath('j/x.journal')} unit=vllm@1.service"
    assert JournalSource(["-u", "vllm"]).stream == JournalSource(
        ["-u", "vllm.service"], name="vllm:journal:-u vllm.service").stream
    assert FileSource("x.log").stream == FileSource(os.path.abspath("x.log"),
                                                    name="t:file:x.log").stream
