"""Whoever can write the log directory cannot make the daemon read what they could not read
themselves: vllm.log swapped for a link to a root-only file is refused and reported, and a
legitimate link (the operator's, or to vLLM's own log) is followed."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from logwatch.daemon.client import subscribe
from logwatch.daemon.protocol import LinesEvent
from logwatch.sources.file_access import link_directories, writers_could_read
from tests.following import Running, spec_line, wait_for

VLLM_UID = 65534  # the user vLLM runs as, owner of the log directory


def as_vllm(command: str) -> None:
    subprocess.run(["setpriv", f"--reuid={VLLM_UID}", f"--regid={VLLM_UID}",
                    "--clear-groups", "sh", "-c", command], check=True, timeout=30)


def fake_stat(uid: int, gid: int, mode: int) -> os.stat_result:
    return os.stat_result((mode, 0, 0, 1, uid, gid, 0, 0, 0, 0))


@pytest.mark.parametrize(("directory", "file", "refused"), [
    # (uid, gid, mode) of the directory and of the file
    ((0, 0, stat.S_IFDIR | 0o755), (0, 0, stat.S_IFREG | 0o600), False),  # root's alone
    ((VLLM_UID, VLLM_UID, stat.S_IFDIR | 0o755), (VLLM_UID, VLLM_UID, stat.S_IFREG | 0o600),
     False),  # vLLM's user and its own log
    ((VLLM_UID, VLLM_UID, stat.S_IFDIR | 0o755), (0, 0, stat.S_IFREG | 0o600), True),
    ((VLLM_UID, VLLM_UID, stat.S_IFDIR | 0o755), (0, 0, stat.S_IFREG | 0o644), False),
    ((0, 0, stat.S_IFDIR | 0o1777), (0, 0, stat.S_IFREG | 0o640), True),  # /tmp-like
    ((0, 0, stat.S_IFDIR | 0o1777), (0, 0, stat.S_IFREG | 0o644), False),
    ((0, VLLM_UID, stat.S_IFDIR | 0o775), (0, 0, stat.S_IFREG | 0o600), True),  # group
    ((0, VLLM_UID, stat.S_IFDIR | 0o775), (0, VLLM_UID, stat.S_IFREG | 0o640), False),
])
def test_who_may_have_put_the_file_there_could_read_it(
        directory: tuple[int, int, int], file: tuple[int, int, int], refused: bool) -> None:
    why = writers_could_read(fake_stat(*directory), fake_stat(*file), me=0)
    assert (why is not None) is refused, why


def test_every_link_on_the_way_counts(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "real.log").write_text("x\n")
    os.symlink(tmp_path / "b" / "real.log", tmp_path / "a" / "hop")
    os.symlink("hop", tmp_path / "a" / "vllm.log")
    assert link_directories(tmp_path / "a" / "vllm.log") == [
        tmp_path / "a", tmp_path / "a", tmp_path / "b"]


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory another user can reach (pytest's own are root's 0700)."""
    base = Path(tempfile.mkdtemp(prefix="logwatch-access-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the daemon reads as root, the "
                    "log directory's owner is another user")
def test_a_link_to_a_root_only_file_is_refused_and_said(shared_tmp: Path) -> None:
    tmp_path = shared_tmp
    secret = tmp_path / "root-only.txt"
    secret.write_bytes(spec_line(666) + b"root:$6$hash-that-must-stay-private:19000\n")
    secret.chmod(0o600)
    logs = tmp_path / "logs"
    logs.mkdir()
    os.chown(logs, VLLM_UID, VLLM_UID)
    log, db = logs / "vllm.log", tmp_path / "h.duckdb"
    as_vllm(f"printf '%s' '{spec_line(1).decode()}' > {log}")
    (tmp_path / "none.toml").write_text("")
    daemon = Running("--file", str(log), "--db", str(db), "--config",
                     str(tmp_path / "none.toml"), "--poll-interval", "0.2",
                     sock=tmp_path / "lw.sock")
    texts: list[str] = []

    async def watch() -> None:
        async with subscribe(daemon.sock, ["lines"], wait=30) as stream:
            as_vllm(f"mv {log} {log}.1 && ln -s {secret} {log}")  # the swap
            try:
                while True:  # until 8 s pass without one
                    event = await asyncio.wait_for(anext(stream), 8)
                    assert isinstance(event, LinesEvent)
                    texts.append(event.text)
            except TimeoutError:
                pass

    try:
        daemon.wait_status(lambda st: st["findings_recorded"] == 1, 60, "the first finding")
        asyncio.run(watch())
        wait_for(lambda: "could not read the file itself" in daemon.stderr, 30,
                 "the refusal in the daemon's log")
        findings = daemon.sql("SELECT count(*) FROM findings")[0][0]
    finally:
        assert daemon.stop() == 0
    assert not any("root:$6$" in text or "666" in text for text in texts), texts
    assert findings == 1
    assert "not read: uid 65534 can write its directory" in daemon.stderr
