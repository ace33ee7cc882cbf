"""A copytruncate whose rotated copy is nowhere to be found (copied elsewhere, compressed at
once): the note says a tail was lost only when bytes of the old file were in fact never
read, and how many; a reader that had read the file to its end is not told it lost any."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from logwatch.sources.files import FileSource
from tests.following import Running, filler_line, spec_line


def _truncation_notes(events: list[str]) -> list[str]:
    return [e for e in events if "copytruncate:" in e]


@pytest.mark.slow
def test_a_copytruncate_of_a_file_read_to_its_end_loses_nothing_and_says_so(
        tmp_path: Path) -> None:
    log, db, sock = tmp_path / "vllm.log", tmp_path / "h.duckdb", tmp_path / "lw.sock"
    backups = tmp_path / "backups"  # not beside the log: the daemon cannot find the copy
    backups.mkdir()
    log.write_bytes(b"".join(spec_line(n) if n % 2 == 0 else filler_line(n)
                             for n in range(10)))
    daemon = Running("--file", str(log), "--db", str(db), "--poll-interval", "0.2",
                     sock=sock)
    try:
        daemon.wait_status(lambda st: st["findings_recorded"] >= 5, 60, "the first findings")
        daemon.wait_status(lambda st: st["sources"][0]["state"] == "following", 30,
                           "the file read to its end")
        shutil.copyfile(log, backups / "vllm.log.1")  # copytruncate, by hand
        os.truncate(log, 0)
        with open(log, "ab") as out:
            out.write(spec_line(10))
        daemon.wait_status(lambda st: st["findings_recorded"] >= 6, 60, "the new finding")
    finally:
        assert daemon.stop() == 0
    notes = _truncation_notes(daemon.lines)  # the daemon's log: source_event
    assert notes, daemon.stderr
    assert not any("lost" in note for note in notes), notes
    assert any("read to its end" in note for note in notes), notes


async def test_a_copytruncate_while_the_reader_lags_names_the_bytes_lost(
        tmp_path: Path) -> None:
    """The reader holds after its first chunk (a paused consumer) while the file is
    copied away and truncated: what it had not read is said lost, with its size."""
    log = tmp_path / "vllm.log"
    line = filler_line(0)
    count = (20 << 20) // len(line)  # more than one read: the reader stops part-way
    log.write_bytes(line * count)
    size = log.stat().st_size
    source = FileSource(log, poll_interval=0.05, use_inotify=False)
    chunks = source.chunks()
    first = await anext(chunks)
    read = first.offset + len(first.data)
    assert read < size
    shutil.copyfile(log, tmp_path / "elsewhere")
    os.truncate(log, 0)
    with open(log, "ab") as out:
        out.write(spec_line(1))
    while True:  # the chunks go on in the truncated file
        chunk = await asyncio.wait_for(anext(chunks), 30)
        if chunk.new_generation:
            break
    await source.close()
    await chunks.aclose()
    notes = _truncation_notes(source.events)
    assert len(notes) == 1, source.events
    assert "lost" in notes[0] and f"{size - read:,} bytes" in notes[0], notes
