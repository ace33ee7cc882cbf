"""Wake-ups from real inotify: a burst of line-per-write appends makes few wake-ups, and other
files in the directory make none."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from logwatch.sources.inotify import open_watch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")


@pytest.mark.slow
def test_a_burst_of_writes_coalesces_and_other_files_are_ignored(tmp_path: Path) -> None:
    log, other = tmp_path / "vllm.log", tmp_path / "other.txt"
    log.write_bytes(b"")

    async def main() -> tuple[int, int, int]:
        watch = open_watch(log, asyncio.get_running_loop())
        assert watch is not None
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)

        async def writer() -> None:
            for n in range(2000):  # one write(2) per line, as vLLM's logging does
                os.write(fd, b"line %d\n" % n)
                if n % 50 == 0:
                    await asyncio.sleep(0.005)

        task = asyncio.create_task(writer())
        while not task.done():
            await watch.wait(1.0)
        while not watch.quiet:  # the burst's last events, drained a window later (a busy
            await watch.wait(1.0)  # machine: later still), are the burst's
        burst = watch.reads
        other.write_bytes(b"x\n" * 10)  # not the followed file
        await watch.wait(0.3)
        after_other = watch.reads
        with open(tmp_path / "vllm.log.1", "ab") as rotated:  # a rotated copy still counts
            rotated.write(b"y\n")
        await watch.wait(1.0)
        os.close(fd)
        watch.stop()
        return burst, after_other, watch.reads

    burst, after_other, after_rotated = asyncio.run(main())
    assert 1 <= burst < 200  # 2000 events, a wake-up per coalescing window at most
    assert after_other == burst
    assert after_rotated == burst + 1


def test_no_inotify_for_a_missing_directory(tmp_path: Path) -> None:
    async def main() -> object:
        return open_watch(tmp_path / "missing" / "vllm.log", asyncio.get_running_loop())

    assert asyncio.run(main()) is None
