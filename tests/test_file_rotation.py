"""Rotation while the daemon is down: every generation it has not finished is read, found
among the rotated files by its first bytes (renamed, copied, compressed, dated), oldest
first, each finding once; a checkpoint that matches nothing is said, not silently dropped."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from logwatch.sources.rotated import rotated_siblings
from tests.following import accepted_in, accepted_rows, filler_line, run_daemon, spec_line

LOGROTATE = shutil.which("logrotate") or ("/usr/sbin/logrotate"
                                          if Path("/usr/sbin/logrotate").exists() else None)


def write(log: Path, first: int, count: int) -> None:
    """`count` lines from number `first`: every other one a finding, the rest filler."""
    with open(log, "ab") as out:
        out.write(b"".join(spec_line(n) if n % 2 == 0 else filler_line(n)
                           for n in range(first, first + count)))


def logrotate(log: Path, directives: str) -> None:
    """One forced rotation by the real logrotate (its own state file beside the log)."""
    assert LOGROTATE is not None
    conf = log.parent.parent / "logrotate.conf"
    conf.write_text(f"{log} {{\n    {directives}\n    rotate 20\n    missingok\n}}\n")
    conf.chmod(0o644)
    subprocess.run([LOGROTATE, "-f", "-s", str(log.parent.parent / "logrotate.state"),
                    str(conf)], check=True, capture_output=True, timeout=30)


def dated(log: Path, day: str, compress: bool) -> None:
    """What logrotate does with `dateext` (and `create`): vllm.log-DATE[.gz], a new file."""
    target = log.with_name(f"{log.name}-{day}")
    log.rename(target)
    if compress:
        with open(target, "rb") as src, gzip.open(f"{target}.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        target.unlink()
    log.touch()


def every_generation(log: Path) -> list[tuple[int, int]]:
    """(accepted, line) of every spec line on disk, each file read on its own (gunzipped):
    what the daemon must have recorded, computed from the files alone."""
    want: list[tuple[int, int]] = []
    for path in [log, *(r.path for r in rotated_siblings(log))]:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        want += [(n, line) for line, n in accepted_in(data)]
    return sorted(want)


ROTATIONS: dict[str, Callable[[Path, int], None]] = {
    "create": lambda log, i: logrotate(log, "create 0644"),
    "copytruncate": lambda log, i: logrotate(log, "copytruncate"),
    "create-compress": lambda log, i: logrotate(log, "create 0644\n    compress"),
    "copytruncate-delaycompress": lambda log, i: logrotate(
        log, "copytruncate\n    compress\n    delaycompress"),
    "dateext": lambda log, i: dated(log, f"2026112{i}", compress=i == 0),
}


@pytest.mark.skipif(LOGROTATE is None, reason="logrotate is not installed")
@pytest.mark.parametrize("how", list(ROTATIONS))
def test_two_rotations_while_down_read_every_generation_once(tmp_path: Path,
                                                            how: str) -> None:
    logs, db = tmp_path / "logs", tmp_path / "h.duckdb"
    logs.mkdir(mode=0o755)
    log = logs / "vllm.log"
    args = ("--file", str(log), "--db", str(db), "--no-socket")
    write(log, 0, 200)
    first = run_daemon(*args, findings=100)
    assert first.returncode == 0, first.stderr
    write(log, 200, 200)  # the checkpointed generation goes on after the daemon stopped
    ROTATIONS[how](log, 0)
    write(log, 400, 200)  # a generation the daemon never saw as vllm.log
    ROTATIONS[how](log, 1)
    write(log, 600, 200)
    assert len(rotated_siblings(log)) == 2
    want = every_generation(log)
    second = run_daemon(*args, findings=len(want) - 100)
    assert second.returncode == 0, second.stderr
    got = accepted_rows(db)
    assert got == want  # each finding once, at its line in its file
    assert [n for n, _ in got] == list(range(0, 800, 2))
    assert "not found" not in second.stderr and "is neither" not in second.stderr


def test_a_copy_put_in_place_of_the_file_is_resumed_not_read_again(tmp_path: Path) -> None:
    """Another inode, the same first bytes and at least the checkpoint's length: the current
    file IS the checkpointed generation (restored from a backup, copied back by an editor)."""
    log, db = tmp_path / "vllm.log", tmp_path / "h.duckdb"
    args = ("--file", str(log), "--db", str(db), "--no-socket")
    write(log, 0, 100)
    assert run_daemon(*args, findings=50).returncode == 0
    shutil.copyfile(log, tmp_path / "copy")
    os.replace(tmp_path / "copy", log)
    write(log, 100, 100)
    again = run_daemon(*args, findings=50)
    assert again.returncode == 0, again.stderr
    assert accepted_rows(db) == every_generation(log)
    assert "a copy of it" in again.stderr


def test_a_checkpointed_generation_found_nowhere_is_reported(tmp_path: Path) -> None:
    logs, db = tmp_path / "logs", tmp_path / "h.duckdb"
    logs.mkdir()
    log = logs / "vllm.log"
    args = ("--file", str(log), "--db", str(db), "--no-socket")
    write(log, 0, 100)
    assert run_daemon(*args, findings=50).returncode == 0
    log.unlink()  # rotated away and deleted (rotate 0), a new generation in its place
    write(log, 100, 100)
    again = run_daemon(*args, findings=50)
    assert again.returncode == 0, again.stderr
    assert "is neither" in again.stderr and "reading" in again.stderr
    assert [n for n, _ in accepted_rows(db)] == list(range(0, 200, 2))


def test_rotated_names_are_ordered_as_logrotate_ages_them(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    names = ["vllm.log.1", "vllm.log.2.gz", "vllm.log.10", "vllm.log.3", "vllm.log.bak",
             "vllm.log.swp", "vllm.log.2", "other.log.1", "vllm.log"]
    for i, name in enumerate(names):
        (tmp_path / name).write_bytes(b"x")
        os.utime(tmp_path / name, (1000 - i, 1000 - i))  # mtimes say nothing
    assert [r.path.name for r in rotated_siblings(log)] == [
        "vllm.log.10", "vllm.log.3", "vllm.log.2", "vllm.log.1"]  # .2 kept over .2.gz
    for name in ("vllm.log-20261130", "vllm.log-20261129.gz", "vllm.log.2026-11-28",
                 "vllm.log-20261130-1764500000"):
        (tmp_path / name).write_bytes(b"x")
    assert [r.path.name for r in rotated_siblings(log)][4:] == [
        "vllm.log.2026-11-28", "vllm.log-20261129.gz", "vllm.log-20261130",
        "vllm.log-20261130-1764500000"]


@pytest.mark.skipif(LOGROTATE is None, reason="logrotate is not installed")
def test_a_first_run_from_the_oldest_reads_the_rotated_files_first(tmp_path: Path) -> None:
    """No checkpoint yet: by default the current file alone is read (a new daemon on a host
    does not page about last week's rotated crashes); `--from-oldest` reads every rotated
    generation first, oldest first (compressed ones too), each with its own line numbers,
    then the current file; a restart then reads nothing twice."""
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "vllm.log"
    for first in (0, 100, 200):  # two rotations, the older compressed: .2.gz, .1, current
        write(log, first, 100)
        if first < 200:
            logrotate(log, "create 0644\n    compress\n    delaycompress")
    assert [r.path.name for r in rotated_siblings(log)] == ["vllm.log.2.gz", "vllm.log.1"]

    plain = tmp_path / "plain.duckdb"
    default = run_daemon("--file", str(log), "--db", str(plain), "--no-socket", findings=50)
    assert default.returncode == 0, default.stderr
    assert [n for n, _ in accepted_rows(plain)] == list(range(200, 300, 2))

    db = tmp_path / "h.duckdb"
    args = ("--file", str(log), "--db", str(db), "--no-socket", "--from-oldest")
    oldest = run_daemon(*args, findings=150)
    assert oldest.returncode == 0, oldest.stderr
    assert accepted_rows(db) == every_generation(log)
    assert [n for n, _ in accepted_rows(db)] == list(range(0, 300, 2))
    assert "reading 2 rotated file(s)" in oldest.stderr
    again = run_daemon(*args, "--until-idle", "1")
    assert again.returncode == 0, again.stderr
    assert "0 lines read" in again.stderr  # resumed at the checkpoint
    assert accepted_rows(db) == every_generation(log)  # nothing doubled


def test_from_oldest_is_refused_for_a_glob(tmp_path: Path) -> None:
    """A glob follows every file it matches (the rotated ones when it matches them): reading
    each match's rotated files as well would read some twice, so the pair is refused."""
    from tests.inprocess import logwatch_text

    flag = logwatch_text("daemon", "--file", str(tmp_path / "*.log"), "--from-oldest",
                         "--db", str(tmp_path / "h.duckdb"), "--no-socket")
    assert flag.returncode == 2 and "is a glob" in flag.stderr
    conf = tmp_path / "glob.toml"
    conf.write_text(f'[[targets]]\nname = "vllm"\n[targets.source]\nkind = "file"\n'
                    f'path = "{tmp_path}/*.log"\nstart_at = "oldest"\n')
    checked = logwatch_text("check-config", "--config", str(conf))
    assert checked.returncode == 1 and "not a glob" in checked.stderr
    conf.write_text(f'[[targets]]\nname = "vllm"\n[targets.source]\nkind = "file"\n'
                    f'path = "{tmp_path}/vllm.log"\nstart_at = "oldest"\n')
    assert logwatch_text("check-config", "--config", str(conf)).returncode == 0
