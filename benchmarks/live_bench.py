"""Measure the live daemon: write-to-committed latency, CPU, lag and memory at given rates.

    python benchmarks/live_bench.py [--rates 1000,10000,50000] [--seconds 20]
                                    [--rss-minutes 0] [--feed access|serving]

For each rate a fresh `logwatch daemon --file LOG` runs as its own process. A writer thread
appends lines to LOG in 10 ms ticks, one write(2) per line as vLLM's logging does (access
lines); one line in `--finding-every` is a SpecDecoding line that becomes a finding,
and its number and write time are noted. The benchmark subscribes to the daemon's control
socket and takes the moment the `committed` event naming that line arrives (the finding is
in DuckDB then). Prints, per rate: p50/p99/max latency, the daemon's CPU (utime+stime over
wall time, from /proc), its lag at the end (lines written minus lines read) and its RSS.
`--rss-minutes N` adds a run of N minutes at 1k lines/s that samples RSS every 10 s; `--each`
prints every finding's time, in the order written.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from logwatch.daemon import client  # noqa: E402
from logwatch.daemon.protocol import CommittedEvent  # noqa: E402

TICK = 0.01
CLK_TCK = os.sysconf("SC_CLK_TCK")


def access_line(n: int) -> bytes:
    return (f'INFO:     10.0.{n % 10}.{n % 250}:{30000 + n % 30000} - "POST /v1/chat/'
            f'completions HTTP/1.1" 200 OK\n').encode()


SHARED_GENERATOR = ROOT.parent / "shared" / "perf" / "gen_vllm_log.py"


def serving_lines(workdir: Path) -> list[bytes]:
    """The benign lines of the shared yardstick's serving log (8 MB, seed 3): request
    lifecycle lines, prompts that quote errors, aborted requests, access lines. Lines that
    give a finding (stats, failures, start-ups) are left out; the markers stand for them."""
    from logwatch.core.lines.benign import is_benign

    out = workdir / "serving.log"
    subprocess.run([sys.executable, str(SHARED_GENERATOR), "--size", "8M", "--out", str(out),
                    "--seed", "3"], check=True, stdout=subprocess.DEVNULL)
    lines = [ln + b"\n" for ln in out.read_bytes().split(b"\n")]
    out.unlink()
    return [ln for ln in lines if is_benign(ln, 0) or ln.startswith(b"INFO:     ")]


def finding_line(n: int) -> bytes:
    return (f"(APIServer pid=7) INFO 11-29 10:00:{n % 60:02d} [metrics.py:101] SpecDecoding "
            f"metrics: Mean acceptance length: 2.50, Accepted: {n} tokens, Drafted: "
            f"{n + 1000} tokens, Avg Draft acceptance rate: 80.0%\n").encode()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Writer(threading.Thread):
    """Appends `rate` lines/s in ticks; notes when each finding line hit the file."""

    def __init__(self, path: Path, rate: int, seconds: float, per_write: int = 1,
                 finding_every: int = 100, feed: list[bytes] | None = None) -> None:
        super().__init__(daemon=True)
        self.path, self.rate, self.seconds = path, rate, seconds
        self.feed = feed  # the lines between markers, cycled (None: access lines)
        self.per_write, self.finding_every = per_write, finding_every
        self.written = 0
        self.finding_times: dict[int, float] = {}  # line number -> write time

    def run(self) -> None:
        per_tick = max(1, round(self.rate * TICK))
        start = time.perf_counter()
        with open(self.path, "ab", buffering=0) as out:
            tick = 0
            while time.perf_counter() - start < self.seconds:
                lines, marks = [], []
                for _ in range(per_tick):
                    self.written += 1
                    if self.written % self.finding_every == 0:
                        lines.append(finding_line(self.written))
                        marks.append(self.written)
                    elif self.feed:
                        lines.append(self.feed[self.written % len(self.feed)])
                    else:
                        lines.append(access_line(self.written))
                for i in range(0, len(lines), self.per_write):  # vLLM: a write per line
                    out.write(b"".join(lines[i:i + self.per_write]))
                wrote = time.perf_counter()
                for n in marks:
                    self.finding_times[n] = wrote
                tick += 1
                delay = start + tick * TICK - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)


async def subscribe(sock: Path, committed: dict[int, float], stop: asyncio.Event,
                    subscribed: threading.Event) -> None:
    async with client.subscribe(sock, ["committed"]) as events:
        subscribed.set()
        stopping = asyncio.create_task(stop.wait())
        while not stop.is_set():
            coming = asyncio.ensure_future(anext(events))
            await asyncio.wait([coming, stopping], return_when=asyncio.FIRST_COMPLETED)
            if not coming.done():
                coming.cancel()
                break
            event = coming.result()
            if isinstance(event, CommittedEvent):
                now = time.perf_counter()
                for f in event.findings:
                    committed.setdefault(int(f["line"]), now)


def start_daemon(workdir: Path, log: Path) -> tuple[subprocess.Popen[bytes], Path]:
    sock = workdir / "lw.sock"
    proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--file", str(log),
                             "--db", str(workdir / "h.duckdb"), "--socket", str(sock)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        asyncio.run(client.wait_ready(sock, 30, alive=lambda: proc.poll() is None))
    except (TimeoutError, OSError) as exc:
        proc.kill()
        raise SystemExit(f"the daemon did not come up: {exc}") from None
    return proc, sock


def lines_read(sock: Path) -> int:
    async def ask() -> int:
        async with client.Client(sock) as daemon:
            return (await daemon.status())["lines"]

    return asyncio.run(ask())


def run_rate(rate: int, seconds: float, rss_every: float = 0.0,
             finding_every: int = 100, feed: list[bytes] | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="logwatch-live-") as tmp:
        workdir = Path(tmp)
        log = workdir / "vllm.log"
        log.write_bytes(b"")
        proc, sock = start_daemon(workdir, log)
        committed: dict[int, float] = {}
        stop = asyncio.Event()
        loop = asyncio.new_event_loop()
        subscribed = threading.Event()
        sub = threading.Thread(target=loop.run_until_complete,
                               args=(subscribe(sock, committed, stop, subscribed),), daemon=True)
        sub.start()
        if not subscribed.wait(30):
            raise SystemExit("the subscription was not acknowledged")
        writer = Writer(log, rate, seconds, finding_every=finding_every, feed=feed)
        cpu0, wall0 = cpu_seconds(proc.pid), time.perf_counter()
        writer.start()
        rss: list[float] = []
        while writer.is_alive():
            writer.join(rss_every or 1.0)
            rss.append(rss_mib(proc.pid))
        cpu1, wall1 = cpu_seconds(proc.pid), time.perf_counter()
        lag = writer.written - lines_read(sock)
        time.sleep(3)  # let the last findings commit
        loop.call_soon_threadsafe(stop.set)
        sub.join(5)
        proc.terminate()
        proc.wait(30)
    delays = sorted((committed[n] - t) * 1000 for n, t in writer.finding_times.items()
                    if n in committed)
    missing = len(writer.finding_times) - len(delays)
    in_order = [(committed[n] - t) * 1000 for n, t in sorted(writer.finding_times.items())
                if n in committed]
    q = (statistics.quantiles(delays, n=100, method="inclusive") if len(delays) >= 2
         else [float("nan")] * 99)
    return {"rate": rate, "written": writer.written, "findings": len(writer.finding_times),
            "missing": missing, "p50": q[49], "p99": q[98], "max": max(delays, default=0),
            "cpu": 100 * (cpu1 - cpu0) / (wall1 - wall0), "lag": lag, "in_order": in_order,
            "rss_first": rss[0] if rss else 0, "rss_last": rss[-1] if rss else 0,
            "rss_max": max(rss, default=0),
            # one sample per ten minutes (rss_every apart), to see whether it levels off
            "rss_by_10min": rss[::max(1, round(600 / rss_every))] if rss_every else []}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000,10000,50000")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rss-minutes", type=float, default=0)
    parser.add_argument("--finding-every", type=int, default=100,
                        help="one finding line per N lines (100: a stress case; a healthy "
                        "server logs a SpecDecoding line every 10 s, 1 in 10,000 at 1k/s)")
    parser.add_argument("--feed", choices=("access", "serving"), default="access",
                        help="the lines between markers: uvicorn access lines, or the benign "
                        "lines of the shared yardstick's serving log (../shared/perf)")
    parser.add_argument("--each", action="store_true",
                        help="print every finding's write -> committed time, in the order "
                        "written (with a few findings p99 is the slowest one or two: see which)")
    args = parser.parse_args()
    feed = None
    if args.feed == "serving":
        with tempfile.TemporaryDirectory(prefix="logwatch-feed-") as tmp:
            feed = serving_lines(Path(tmp))
        print(f"feed: {len(feed):,} benign lines of {SHARED_GENERATOR.name} --size 8M --seed 3, "
              "cycled")
    print(f"{'lines/s':>8} {'written':>9} {'findings':>8} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'max ms':>7} {'CPU %':>6} {'us/line':>7} {'lag':>6} {'RSS MiB':>8}")
    for rate in (int(r) for r in args.rates.split(",")):
        r = run_rate(rate, args.seconds, finding_every=args.finding_every, feed=feed)
        per_line = r["cpu"] / 100 / rate * 1e6  # CPU seconds per second, per line
        print(f"{rate:>8,} {r['written']:>9,} {r['findings']:>8,} {r['p50']:>7.1f} "
              f"{r['p99']:>7.1f} {r['max']:>7.1f} {r['cpu']:>6.1f} {per_line:>7.1f} "
              f"{r['lag']:>6,} {r['rss_max']:>8.1f}"
              + (f"  ({r['missing']} not committed)" if r["missing"] else ""), flush=True)
        if args.each:
            print("  each, ms: " + " ".join(f"{d:.0f}" for d in r["in_order"]), flush=True)
    if args.rss_minutes:
        r = run_rate(1000, args.rss_minutes * 60, rss_every=10,
                     finding_every=args.finding_every)
        print(f"RSS over {args.rss_minutes:g} min at 1,000 lines/s: first {r['rss_first']:.1f} "
              f"MiB, last {r['rss_last']:.1f} MiB, max {r['rss_max']:.1f} MiB; "
              f"CPU {r['cpu']:.1f}%")
        print("  every 10 min: " + ", ".join(f"{v:.1f}" for v in r["rss_by_10min"]) + " MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
