"""Catching up a backlog: the daemon keeps answering on its socket in the middle of it, says
how far behind it is, and holds a bounded number of findings in memory while it writes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from logwatch.daemon.client import Client, wait_ready
from logwatch.daemon.writes import MAX_PENDING
from logwatch.sources.base import Chunk, slices
from tests.conftest import ROOT
from tests.test_daemon import accepted_counts, spec_line


def access_line(n: int) -> bytes:
    return (f'INFO:     10.0.0.{n % 250}:{30000 + n % 30000} - "POST /v1/chat/completions '
            f'HTTP/1.1" 200 OK\n').encode()


@pytest.mark.slow
def test_a_backlog_is_read_with_the_socket_answering_all_along(tmp_path: Path) -> None:
    log, db, sock = tmp_path / "vllm.log", tmp_path / "h.duckdb", tmp_path / "lw.sock"
    with open(log, "wb") as out:  # ~12 MB, a finding every fourth line
        for block in range(60):
            out.write(b"".join(spec_line(n) if n % 4 == 0 else access_line(n)
                               for n in range(block * 1000, block * 1000 + 1000)))
    (tmp_path / "none.toml").write_text("")
    proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--file", str(log),
                             "--db", str(db), "--socket", str(sock), "--config",
                             str(tmp_path / "none.toml")], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: list[dict[str, Any]] = []

    async def follow() -> None:
        await wait_ready(sock, 60, alive=lambda: proc.poll() is None)
        deadline = time.monotonic() + 300
        async with Client(sock) as daemon:
            while True:
                assert time.monotonic() < deadline and proc.poll() is None
                state = dict(await daemon.status())
                seen.append(state)
                if state["findings_recorded"] == 15_000 and not state["pending"]:
                    return
                await asyncio.sleep(0.05)

    try:
        asyncio.run(follow())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    midway = [s for s in seen if 0 < s["lines"] < 60_000]
    assert len(midway) >= 3, "the socket did not answer while the backlog was read"
    behind = [src["behind_bytes"] for s in midway for src in s["sources"]
              if "behind_bytes" in src]
    assert behind and max(behind) > 0  # progress is shown
    assert max(s["pending"] for s in seen) <= MAX_PENDING + 1000
    assert accepted_counts(db) == list(range(0, 60_000, 4))


def test_slices_cut_at_line_ends_and_keep_positions() -> None:
    data = b"".join(b"line %d %s\n" % (n, b"x" * (n % 50)) for n in range(2000))
    chunk = Chunk("s", "g", data, 1000, new_generation=True,
                  marks=((1000 + data.index(b"line 500 "), "c500"),
                         (1000 + len(data), "end")))
    pieces = slices(chunk, 4096)
    assert len(pieces) > 10 and b"".join(p.data for p in pieces) == data
    assert all(p.data.endswith(b"\n") for p in pieces)
    assert [p.new_generation for p in pieces] == [True] + [False] * (len(pieces) - 1)
    offset = 1000
    for piece in pieces:
        assert piece.offset == offset
        assert all(piece.offset < m[0] <= piece.offset + len(piece.data) for m in piece.marks)
        offset += len(piece.data)
    assert sorted(m for p in pieces for m in p.marks) == sorted(chunk.marks)
    long_line = Chunk("s", "g", b"y" * 10_000 + b"\n", 0)
    assert slices(long_line, 4096) == [long_line]
