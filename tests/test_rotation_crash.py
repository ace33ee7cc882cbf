"""kill -9 twenty times while a writer appends and logrotate rotates (create and copytruncate,
compressed with delaycompress), up to two rotations while the daemon is down: every finding
on disk recorded once, at its line in its generation, nothing missing, nothing twice."""

from __future__ import annotations

import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.following import Running, accepted_rows, filler_line, run_daemon, spec_line
from tests.test_file_rotation import every_generation

LOGROTATE = shutil.which("logrotate") or ("/usr/sbin/logrotate"
                                          if Path("/usr/sbin/logrotate").exists() else None)
DIRECTIVES = {"create": "create 0644", "copytruncate": "copytruncate"}


class Writer:
    """Appends numbered lines (every third a finding), reopening the path for each batch
    like a writer restarted after rotation; quiet while a rotation runs, so that what
    copytruncate keeps on disk is exactly what was written."""

    def __init__(self, log: Path) -> None:
        self.log, self.n, self.findings = log, 0, 0

    def write(self, count: int, path: Path | None = None) -> None:
        lines = []
        for _ in range(count):
            if self.n % 3 == 0:
                lines.append(spec_line(self.n))
                self.findings += 1
            else:
                lines.append(filler_line(self.n))
            self.n += 1
        with open(path or self.log, "ab") as out:
            out.write(b"".join(lines))

    def rotate(self, how: str, rng: random.Random) -> None:
        assert LOGROTATE is not None
        root = self.log.parent.parent
        conf = root / f"{how}.conf"
        conf.write_text(f"{self.log} {{\n    {DIRECTIVES[how]}\n    compress\n    delaycompress"
                        "\n    rotate 200\n    missingok\n}\n")
        conf.chmod(0o644)
        subprocess.run([LOGROTATE, "-f", "-s", str(root / "logrotate.state"), str(conf)],
                       check=True, capture_output=True, timeout=30)
        if how == "create" and rng.random() < 0.5:  # a writer that still had its old fd
            self.write(rng.randint(1, 20), self.log.with_name(self.log.name + ".1"))


@pytest.mark.slow
@pytest.mark.skipif(LOGROTATE is None, reason="logrotate is not installed")
def test_kill_9_twenty_times_across_rotations_records_every_finding_once(tmp_path: Path
                                                                        ) -> None:
    rng = random.Random(20)
    logs, db = tmp_path / "logs", tmp_path / "h.duckdb"
    logs.mkdir(mode=0o755)
    log = logs / "vllm.log"
    log.touch()
    writer = Writer(log)
    down_rotations = 0
    for run in range(20):
        daemon = Running("--file", str(log), "--db", str(db), "--poll-interval", "0.2",
                         sock=tmp_path / f"lw{run}.sock")
        daemon.wait_ready(60)
        if run == 0:  # before its first commit a daemon has no checkpoint: a restart is a
            writer.write(10)  # first run again, and reads only the current file
            daemon.wait_status(lambda st: st["findings_recorded"] > 0, 60, "a first commit")
        for _ in range(rng.randint(1, 6)):  # following: writes and a rename rotation
            writer.write(rng.randint(5, 80))
            if rng.random() < 0.15:
                writer.rotate("create", rng)
            time.sleep(rng.uniform(0, 0.1))  # the writer's pace
        time.sleep(rng.uniform(0, 0.3))  # then kill -9 at a random point
        daemon.kill()
        for _ in range(rng.choice((0, 1, 1, 2))):  # rotations while it is down
            writer.rotate(rng.choice(("create", "copytruncate")), rng)
            writer.write(rng.randint(0, 40))
            down_rotations += 1
    want = every_generation(log)  # from the files on disk, gunzipped, each on its own
    final = run_daemon("--file", str(log), "--db", str(db), "--no-socket",
                       findings=len(want) - len(accepted_rows(db)))
    assert final.returncode == 0, final.stderr
    assert len(want) == writer.findings  # the writer was quiet in every copy window
    got = accepted_rows(db)
    assert len(got) == len({n for n, _ in got})  # no finding twice
    assert got == want  # none missing, each at its line in its generation
    assert down_rotations >= 10
