"""The file source against hostile or unusual files: a line over 64 MiB (cut for matching,
the offset kept true, read once), a FIFO swapped in for the followed path (refused, named,
SIGTERM still honoured), and a first run that starts at the end of an old log."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import duckdb
import pytest

from logwatch.sources.reading import LineSplitter
from tests.following import Running, accepted_rows, run_daemon, spec_line
from tests.inprocess import Completed, logwatch_text

JOURNAL_REMOTE = next((p for p in ("/lib/systemd/systemd-journal-remote",
                                   "/usr/lib/systemd/systemd-journal-remote")
                       if Path(p).exists()), None)


def test_the_line_splitter_keeps_offsets_true_and_memory_bounded() -> None:
    """Random lines, some far over the limit, in random blocks: the pieces stand for every
    byte exactly (their spans add up to the input), one piece line per input line, and no
    more than the limit of one line is ever held."""
    rng = random.Random(5)
    limit = 100
    lines = [b"y" * rng.choice([0, 5, 99, 100, 101, 250, 1000]) + b"\n" for _ in range(400)]
    data = b"".join(lines) + b"z" * 333  # ends without a newline
    splitter, pieces, pos = LineSplitter(limit), [], 0
    while pos < len(data):
        size = rng.randint(1, 700)
        pieces += splitter.feed(data[pos:pos + size])
        pos += size
        assert len(splitter._head) <= limit
    last = splitter.finish()
    assert last is not None
    pieces.append(last)
    assert sum(p.span for p in pieces) == len(data)
    handed = b"".join(p.data for p in pieces).splitlines()
    assert handed == [ln[:limit] for ln in data.splitlines()]


def _long_line_log(log: Path) -> tuple[int, int]:
    """A finding, 7.5 MiB of other lines, a 65 MiB line, a finding: (lines, bytes)."""
    filler = b"INFO 11-29 10:00:00 [engine.py:1] " + b"." * 200 + b"\n"
    with open(log, "wb") as out:
        out.write(spec_line(0))
        # the long line starts 7.5 MiB in: an 8 MiB read ends inside it, as it would while
        # a writer is still writing it
        out.write(filler * ((15 << 19) // len(filler)))
        out.write(b"x" * (65 << 20) + b"\n")
        out.write(spec_line(2))
    data = log.read_bytes()
    return data.count(b"\n"), len(data)


@pytest.mark.slow
def test_a_line_over_64_mib_is_cut_for_matching_and_the_file_is_read_once(tmp_path: Path
                                                                         ) -> None:
    log, db, sock = tmp_path / "vllm.log", tmp_path / "h.duckdb", tmp_path / "lw.sock"
    lines, size = _long_line_log(log)
    daemon = Running("--file", str(log), "--db", str(db), "--poll-interval", "0.2",
                     sock=sock)
    try:
        daemon.wait_status(lambda st: st["findings_recorded"] >= 2, 90, "the two findings")
        with open(log, "ab") as out:  # the daemon goes on following after the long line
            out.write(spec_line(4))
        daemon.wait_status(lambda st: st["findings_recorded"] >= 3, 60, "the third finding")
        status = daemon.status()
        assert status is not None
        assert status["lines"] == lines + 1  # every line once: the file was not read again
    finally:
        assert daemon.stop() == 0
    assert accepted_rows(db) == [(0, 1), (2, lines), (4, lines + 1)]
    con = duckdb.connect(str(db), read_only=True)
    try:
        position = con.execute("SELECT position, line FROM checkpoints").fetchall()
    finally:
        con.close()
    assert position == [(size + len(spec_line(4)), lines + 2)]  # the file's true size
    assert "copytruncate" not in daemon.stderr


@pytest.mark.slow
def test_a_fifo_swapped_in_for_the_followed_file_is_refused_and_sigterm_works(
        tmp_path: Path) -> None:
    """Anyone who can write the log directory can put a FIFO at the path: opening it must not
    block the daemon (its socket, its signals), and a regular file put back is followed."""
    log, db, sock = tmp_path / "vllm.log", tmp_path / "h.duckdb", tmp_path / "lw.sock"
    log.write_bytes(spec_line(0))
    daemon = Running("--file", str(log), "--db", str(db), "--poll-interval", "0.2",
                     sock=sock)
    try:
        daemon.wait_status(lambda st: st["findings_recorded"] >= 1, 60, "the first finding")
        os.mkfifo(tmp_path / "fifo")
        os.replace(tmp_path / "fifo", log)
        deadline = time.monotonic() + 30
        while "not_a_regular_file" not in daemon.stderr:
            assert time.monotonic() < deadline, "the FIFO was never reported"
            assert daemon.proc.poll() is None
            time.sleep(0.05)
        assert daemon.status() is not None  # still answering
        (tmp_path / "new").write_bytes(spec_line(1))
        os.replace(tmp_path / "new", log)  # rotation puts a regular file back
        daemon.wait_status(lambda st: st["findings_recorded"] >= 2, 60,
                           "the finding in the file put back")
    finally:
        began = time.monotonic()
        daemon.proc.terminate()
        try:
            code = daemon.proc.wait(timeout=10)
        finally:
            if daemon.proc.poll() is None:
                daemon.kill()
        took = time.monotonic() - began
    assert code == 0 and took < 10
    daemon._reader.join(timeout=10)
    assert f"{log} is a FIFO, not a regular file" in daemon.stderr
    assert [n for n, _ in accepted_rows(db)] == [0, 1]


@pytest.mark.slow
def test_from_end_starts_a_first_run_at_the_last_line_and_a_checkpoint_wins(
        tmp_path: Path) -> None:
    log, db, sock = tmp_path / "vllm.log", tmp_path / "h.duckdb", tmp_path / "lw.sock"
    old = b"".join(spec_line(n) for n in range(10))
    log.write_bytes(old + spec_line(10)[:40])  # a writer half-way through a line
    daemon = Running("--file", str(log), "--db", str(db), "--from-end", sock=sock)
    try:
        daemon.wait_status(lambda st: st["sources"] and st["sources"][0]["next_line"] == 11,
                           60, "the daemon to start at line 11")
        with open(log, "ab") as out:
            out.write(spec_line(10)[40:] + spec_line(11))
        daemon.wait_status(lambda st: st["findings_recorded"] >= 2, 60, "two findings")
    finally:
        assert daemon.stop() == 0
    assert accepted_rows(db) == [(10, 11), (11, 12)]
    assert "started at the end of" in daemon.stderr
    with open(log, "ab") as out:
        out.write(spec_line(12))
    again = run_daemon("--file", str(log), "--db", str(db), "--from-end", "--no-socket",
                       findings=1)
    assert again.returncode == 0, again.stderr
    assert accepted_rows(db) == [(10, 11), (11, 12), (12, 13)]  # from the checkpoint


def _config(path: Path, source: str) -> Path:
    path.write_text(f'[[targets]]\nname = "vllm"\n[targets.source]\n{source}\n')
    return path


def _cli(*args: str) -> Completed[str]:
    return logwatch_text(*args)


@pytest.mark.slow
def test_a_file_moved_into_a_target_goes_on_where_it_stopped(tmp_path: Path) -> None:
    """A log followed with `--file`, then as a configured target (another source name): the
    checkpoint is the path's, so nothing is read again and line numbers go on. A position an
    older version stored under the target's name is still resumed from."""
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes(b"".join(spec_line(n) for n in range(5)))
    first = run_daemon("--file", str(log), "--db", str(db), "--until-idle", "1", "--no-socket")
    assert first.returncode == 0, first.stderr
    assert accepted_rows(db) == [(n, n + 1) for n in range(5)]
    config = _config(tmp_path / "vllm.toml", f'kind = "file"\npath = "{log}"')
    as_target = ("--config", str(config), "--db", str(db), "--until-idle", "1", "--no-socket")
    moved = run_daemon(*as_target)
    assert moved.returncode == 0, moved.stderr
    assert "0 lines read" in moved.stderr  # resumed at the checkpoint, not read again

    with open(log, "ab") as out:
        out.write(spec_line(5))
    con = duckdb.connect(str(db))
    try:  # as an older version stored it: under the target's name
        con.execute(f"UPDATE checkpoints SET source_id = 'vllm:file:{log}'")
    finally:
        con.close()
    legacy = run_daemon(*as_target)
    assert legacy.returncode == 0, legacy.stderr
    assert "1 lines read" in legacy.stderr
    assert accepted_rows(db) == [(n, n + 1) for n in range(6)]  # line 6, not line 1
    con = duckdb.connect(str(db), read_only=True)
    try:
        keys = {r[0] for r in con.execute("SELECT source_id FROM checkpoints").fetchall()}
    finally:
        con.close()
    assert f"file:{log}" in keys  # stored by stream from now on


@pytest.mark.slow
def test_a_file_moved_into_a_target_keeps_its_launch_numbering(tmp_path: Path) -> None:
    """The launches a file's earlier source name recorded take the target's name: the next
    launch is #3 after #1 and #2, not a second #1, and the history shows one source."""
    demo = (Path(__file__).parent.parent / "samples" / "logs" / "demo_marlin_and_mtp.log")
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes(demo.read_bytes())  # two launches, both failed
    first = run_daemon("--file", str(log), "--db", str(db), "--until-idle", "1", "--no-socket")
    assert first.returncode == 0, first.stderr
    config = _config(tmp_path / "vllm.toml", f'kind = "file"\npath = "{log}"')
    with open(log, "ab") as out:
        out.write(demo.read_bytes())  # two more
    moved = run_daemon("--config", str(config), "--db", str(db), "--until-idle", "1",
                       "--no-socket")
    assert moved.returncode == 0, moved.stderr
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT source, number FROM launches ORDER BY number").fetchall()
    finally:
        con.close()
    assert rows == [(f"vllm:file:{log}", n) for n in (1, 2, 3, 4)]


@pytest.mark.slow
def test_start_at_in_a_target_is_checked_shown_and_followed(tmp_path: Path) -> None:
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    log.write_bytes(b"".join(spec_line(n) for n in range(5)))
    good = _config(tmp_path / "good.toml",
                   f'kind = "file"\npath = "{log}"\nstart_at = "end"')
    assert _cli("check-config", "--config", str(good)).returncode == 0
    shown = _cli("show-config", "--config", str(good))
    assert "start_at end" in shown.stdout
    typo = _cli("check-config", "--config", str(_config(
        tmp_path / "typo.toml", f'kind = "file"\npath = "{log}"\nstart_at = "ned"')))
    assert typo.returncode == 1 and "start_at" in typo.stderr and "'end'" in typo.stderr
    stdin = _cli("check-config", "--config", str(_config(
        tmp_path / "stdin.toml", 'kind = "stdin"\nstart_at = "end"')))
    assert stdin.returncode == 1 and "applies to file and journald" in stdin.stderr
    result = run_daemon("--config", str(good), "--db", str(db),
                        "--no-socket")
    assert result.returncode == 0, result.stderr
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM findings").fetchone() == (0,)
        # the start is checkpointed: a restart goes on from there, not from the end again
        assert con.execute("SELECT position, line FROM checkpoints").fetchall() == [
            (log.stat().st_size, 6)]
    finally:
        con.close()


@pytest.mark.slow
@pytest.mark.skipif(JOURNAL_REMOTE is None, reason="systemd-journal-remote not installed")
def test_from_end_on_a_journal_skips_what_it_holds_and_anchors_a_cursor(tmp_path: Path
                                                                        ) -> None:
    from tests.test_journald import append, export_entry, findings

    journal, db = tmp_path / "j" / "vllm.journal", tmp_path / "h.duckdb"
    journal.parent.mkdir()
    t0 = int(time.time() * 1e6)
    append(journal, [export_entry("RuntimeError: NCCL error: unhandled system error", t0)])
    args = ("--journal-file", str(journal), "--db", str(db), "--no-socket", "--from-end")
    first = run_daemon(*args)  # until the start is anchored
    assert first.returncode == 0, first.stderr
    assert findings(db) == []
    append(journal, [export_entry("RuntimeError: CUDA error: an illegal memory access was "
                                  "encountered", t0 + 1000)])
    second = run_daemon(*args, findings=1)  # the anchored cursor wins over --from-end
    assert second.returncode == 0, second.stderr
    assert [s for s, _ in findings(db)] == ["distributed.cuda_error"]
    assert "started at the end of the journal" in first.stderr


def test_a_glob_from_the_end_skips_the_files_it_starts_with_not_those_that_appear(
        tmp_path: Path) -> None:
    import asyncio

    from logwatch.sources.base import Chunk
    from logwatch.sources.globbed import GlobSource

    (tmp_path / "a.log").write_bytes(spec_line(0) + spec_line(1))

    async def main() -> list[Chunk]:
        source = GlobSource(str(tmp_path / "*.log"), rescan=0.05, poll_interval=0.05,
                            start_at="end")
        got: list[Chunk] = []
        async for chunk in source.chunks():
            got.append(chunk)
            if len(got) == 1:
                (tmp_path / "b.log").write_bytes(spec_line(2))
            if any(c.data for c in got):
                break
        await source.close()
        return got

    anchor, new = asyncio.run(asyncio.wait_for(main(), 30))
    assert (anchor.source, anchor.data, anchor.offset, anchor.first_line) == (
        f"file:{tmp_path / 'a.log'}", b"", 2 * len(spec_line(0)), 3)
    assert (new.source, new.data, new.offset) == (f"file:{tmp_path / 'b.log'}", spec_line(2), 0)


def test_slicing_a_chunk_keeps_its_span_and_first_line() -> None:
    """The daemon scans a backlog in slices: the bytes a cut line stands for stay with it."""
    from logwatch.sources.base import Chunk, slices

    data = b"a\n" * 100 + b"b" * 300 + b"\n"  # the last line stands for 5,000 bytes
    chunk = Chunk("s", "g", data, 7, True, path="p", span=len(data) + 4700, first_line=40)
    pieces = slices(chunk, 64)
    assert len(pieces) > 2 and b"".join(p.data for p in pieces) == data
    assert sum(len(p.data) if p.span is None else p.span for p in pieces) == chunk.span
    assert [p.first_line for p in pieces] == [40] + [None] * (len(pieces) - 1)
    assert pieces[-1].span == len(pieces[-1].data) + 4700


def test_from_the_end_is_the_end_when_the_daemon_is_made_not_when_it_first_reads(
        tmp_path: Path) -> None:
    """`--from-end`: lines written after the daemon was made (and said it was ready) but
    before its reader first opened the file are read. Before, the end was taken at the
    first read, so those lines were skipped (seen as a flaky README example under load)."""
    import asyncio

    from logwatch.sources.base import Chunk
    from logwatch.sources.files import FileSource

    log = tmp_path / "vllm.log"
    log.write_bytes(spec_line(0) + spec_line(1))
    source = FileSource(log, poll_interval=0.05, start_at="end")
    with open(log, "ab") as writing:  # written before the reader ever ran
        writing.write(spec_line(2))

    async def main() -> list[Chunk]:
        got: list[Chunk] = []
        async for chunk in source.chunks():
            got.append(chunk)
            if any(c.data for c in got):
                break
        await source.close()
        return got

    anchor, new = asyncio.run(asyncio.wait_for(main(), 30))
    assert (anchor.data, anchor.offset, anchor.first_line) == (b"", 2 * len(spec_line(0)), 3)
    assert new.data == spec_line(2)
