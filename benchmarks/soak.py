"""A bounded soak of the live daemon (`make soak`, not part of `make test`): everything that goes
wrong on a busy host, at once, for a few minutes.

    python benchmarks/soak.py [--seconds 240] [--rate 10000] [--rotate-every 30]
                              [--kill-every 60] [--no-full-disk]

A writer appends `--rate` lines/s to a log (vLLM's access lines, one ERROR line in
`--marker-every` carrying a sequence number), renamed away every `--rotate-every` seconds as
logrotate does; the daemon (`logwatch daemon --file`) is killed with SIGKILL every
`--kill-every` seconds and started again; once, its database's file system is filled to the
last byte for 15 s (a tmpfs of its own; needs root, else skipped and said); a client asks the
control socket for the status four times a second. At the end, with the writer stopped and the
daemon caught up, the history is read: every marker line written must be counted once (the
incidents' counts add up to the markers written: fewer is a loss, more a double).

Prints lines written, markers in / ingested / doubled / lost, the daemon's RSS (first minute,
last minute, max) and the socket's answer times (p99, max), and exits 1 when it does not hold:
a marker lost or doubled, an answer slower than 1 s, or RSS in the last minute more than
1.5x (+ 20 MiB) the first minute's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.live_bench import rss_mib  # noqa: E402
from logwatch.daemon import client  # noqa: E402

TICK = 0.01
MARKER_SIGNATURE = "generic.error_line"
MAX_ANSWER_S = 1.0


def access_line(rng: random.Random) -> bytes:
    """uvicorn's access line, from a client port the kernel would pick: no two files begin
    alike (live_bench's numbered ports repeat every 30,000 lines, and a rotation every
    300,000 lines gave every file the same first bytes)."""
    return (f'INFO:     10.0.{rng.randrange(4)}.{rng.randrange(250)}:{rng.randrange(32768, 60999)}'
            f' - "POST /v1/chat/completions HTTP/1.1" 200 OK\n').encode()


def marker_line(seq: int) -> bytes:
    """An ERROR line no signature knows (the fallback counts it), numbered."""
    return (f"(APIServer pid=7) ERROR 11-29 10:00:{seq % 60:02d} [zorblax_soak.py:1] Zorblax "
            f"shard {seq} gave up\n").encode()


class Writer(threading.Thread):
    """`rate` lines/s into `log` in 10 ms ticks, renamed away every `rotate_every` s."""

    def __init__(self, log: Path, rate: int, seconds: float, rotate_every: float,
                 marker_every: int) -> None:
        super().__init__(daemon=True)
        self.log, self.rate, self.seconds = log, rate, seconds
        self.rotate_every, self.marker_every = rotate_every, marker_every
        self.lines = self.markers = self.rotations = 0
        self.rng = random.Random(7)

    def _rotate(self) -> None:
        for older in range(3, 0, -1):  # vllm.log.3 dropped, .2 -> .3, .1 -> .2
            path = self.log.with_name(f"{self.log.name}.{older}")
            if path.exists():
                if older == 3:
                    path.unlink()
                else:
                    path.rename(self.log.with_name(f"{self.log.name}.{older + 1}"))
        self.log.rename(self.log.with_name(self.log.name + ".1"))
        self.rotations += 1

    def run(self) -> None:
        per_tick = max(1, int(self.rate * TICK))
        start = time.monotonic()
        next_rotation = start + self.rotate_every
        out = open(self.log, "ab", buffering=0)  # noqa: SIM115 (reopened on rotation)
        try:
            tick = 0
            while time.monotonic() - start < self.seconds:
                if time.monotonic() >= next_rotation:
                    out.close()
                    self._rotate()
                    out = open(self.log, "ab", buffering=0)  # noqa: SIM115
                    next_rotation += self.rotate_every
                for _ in range(per_tick):
                    self.lines += 1
                    if self.lines % self.marker_every == 0:
                        self.markers += 1
                        out.write(marker_line(self.markers))
                    else:
                        out.write(access_line(self.rng))
                tick += 1
                delay = start + tick * TICK - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        finally:
            out.close()


class Daemon:
    """The daemon under test, started again after each kill."""

    def __init__(self, workdir: Path, log: Path, db: Path) -> None:
        self.workdir, self.log, self.db = workdir, log, db
        self.sock = workdir / "lw.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr = open(workdir / "daemon.stderr", "ab")  # noqa: SIM115
        self.up = threading.Event()
        self.kills = 0
        self.refused = 0  # starts that exited before they answered

    def start(self) -> None:
        """Started as systemd's `Restart=always` would: again a second later while it exits
        at once (it cannot open its database on a full disk)."""
        while True:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "logwatch", "daemon", "--file", str(self.log), "--db",
                 str(self.db), "--socket", str(self.sock), "--log-format", "json"],
                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=self.stderr)
            try:
                asyncio.run(client.wait_ready(self.sock, 60, alive=self._alive))
            except client.DaemonUnavailable:
                self.refused += 1
                time.sleep(1.0)
                continue
            self.up.set()
            return

    def _alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        self.up.clear()
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self.kills += 1

    def stop(self) -> int:
        self.up.clear()
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return -9


class Asker(threading.Thread):
    """The status four times a second while the daemon is up: each answer's time."""

    def __init__(self, daemon: Daemon) -> None:
        super().__init__(daemon=True)
        self.daemon_under_test = daemon
        self.times: list[float] = []
        self.failures = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        asyncio.run(self._ask())

    async def _ask(self) -> None:
        while not self.stopping.is_set():
            if self.daemon_under_test.up.is_set():
                began = time.perf_counter()
                try:
                    answer = await client.request(self.daemon_under_test.sock, "status",
                                                  timeout=10)
                except (OSError, client.DaemonUnavailable, TimeoutError):
                    answer = None
                if answer is not None and answer.get("ok") and \
                        self.daemon_under_test.up.is_set():
                    self.times.append(time.perf_counter() - began)
                elif self.daemon_under_test.up.is_set():
                    self.failures += 1
            await asyncio.sleep(0.25)


@contextlib.contextmanager
def small_filesystem(path: Path, mib: int) -> Iterator[bool]:
    """A tmpfs of `mib` MiB at `path` (root only); yields whether it is one."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(path)],
        capture_output=True, check=False).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill(path: Path) -> Path:
    """A file that takes every free byte of `path`'s file system."""
    filler = path / "filler"
    with open(filler, "wb") as out:
        block = b"\0" * (1 << 20)
        with contextlib.suppress(OSError):
            while True:
                out.write(block)
                out.flush()
    return filler


def caught_up(daemon: Daemon, timeout: float) -> bool:
    """Until the daemon has read every line of the current file and committed what it
    found, or `timeout`."""
    deadline = time.monotonic() + timeout
    lines = daemon.log.read_bytes().count(b"\n")
    while time.monotonic() < deadline:
        try:
            status = asyncio.run(client.request(daemon.sock, "status", timeout=10))["status"]
        except (OSError, KeyError, client.DaemonUnavailable, TimeoutError):
            status = {}
        followed = [s for s in status.get("sources", []) if s.get("path") == str(daemon.log)
                    or s.get("name") == str(daemon.log)]
        if followed and followed[0].get("next_line", 0) > lines and not status.get("pending"):
            return True
        time.sleep(0.5)
    return False


def counted(db: Path) -> int:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute("SELECT coalesce(sum(count), 0) FROM incidents WHERE signature = ?",
                          [MARKER_SIGNATURE]).fetchone()
    return int(row[0]) if row else 0


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=240)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--rotate-every", type=float, default=30)
    parser.add_argument("--kill-every", type=float, default=60)
    parser.add_argument("--marker-every", type=int, default=200)
    parser.add_argument("--no-full-disk", action="store_true")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="logwatch-soak-"))
    log, dbdir = workdir / "vllm.log", workdir / "db"
    log.write_bytes(b"")
    with small_filesystem(dbdir, 256) as mounted:
        full_disk = mounted and not args.no_full_disk
        if not full_disk:
            print("full disk: skipped (" + ("--no-full-disk" if mounted or args.no_full_disk
                                            else "a tmpfs needs root") + ")")
        daemon = Daemon(workdir, log, dbdir / "h.duckdb")
        daemon.start()
        writer = Writer(log, args.rate, args.seconds, args.rotate_every, args.marker_every)
        asker = Asker(daemon)
        rss: list[tuple[float, float]] = []
        started = time.monotonic()
        writer.start()
        asker.start()
        next_kill = started + args.kill_every
        full_at = started + args.seconds / 2 if full_disk else None
        filler: Path | None = None
        while writer.is_alive():
            now = time.monotonic()
            if now >= next_kill:
                daemon.kill()
                daemon.start()
                next_kill += args.kill_every
            if full_at is not None and now >= full_at and filler is None:
                filler = fill(dbdir)
                print(f"full disk at {now - started:.0f} s for 15 s")
                # freed on a timer: a restart waits for the disk, not for this loop
                threading.Timer(15, filler.unlink).start()
            assert daemon.proc is not None
            if daemon.proc.poll() is None:
                with contextlib.suppress(OSError):
                    rss.append((now - started, rss_mib(daemon.proc.pid)))
            time.sleep(1.0)
        while filler is not None and filler.exists():
            time.sleep(0.5)
        done = caught_up(daemon, 120)
        asker.stopping.set()
        asker.join(15)
        code = daemon.stop()
        ingested = counted(daemon.db)
    kept = os.environ.get("LOGWATCH_SOAK_KEEP")
    if kept:
        print(f"kept {workdir} (its daemon.stderr)")
    else:
        shutil.rmtree(workdir, ignore_errors=True)

    first = [r for t, r in rss if t <= 60] or [0.0]
    last = [r for t, r in rss if t >= max(0.0, args.seconds - 60)] or [0.0]
    first_avg, last_avg = sum(first) / len(first), sum(last) / len(last)
    doubled, lost = max(0, ingested - writer.markers), max(0, writer.markers - ingested)
    p99, slowest = percentile(asker.times, 0.99), max(asker.times, default=0.0)
    print(f"{writer.lines:,} lines written in {args.seconds:.0f} s at {args.rate:,}/s, "
          f"{writer.rotations} rotations, {daemon.kills} kill -9"
          + (", one full disk" if full_disk else ""))
    print(f"markers: in {writer.markers:,}, ingested {ingested:,}, doubled {doubled}, "
          f"lost {lost}" + ("" if done else " (the daemon had not caught up)"))
    print(f"daemon RSS: first minute {first_avg:.0f} MiB, last minute {last_avg:.0f} MiB, "
          f"max {max((r for _, r in rss), default=0.0):.0f} MiB")
    print(f"socket: {len(asker.times)} answers, p99 {p99 * 1000:.0f} ms, max "
          f"{slowest * 1000:.0f} ms, {asker.failures} unanswered while up; daemon exit {code}")
    print(f"starts refused (the daemon exited before it answered, as on a full disk): "
          f"{daemon.refused}")
    holds = (doubled == 0 and lost == 0 and slowest <= MAX_ANSWER_S
             and last_avg <= first_avg * 1.5 + 20)
    print("holds" if holds else "DOES NOT HOLD")
    return 0 if holds else 1


if __name__ == "__main__":
    raise SystemExit(main())
