"""Measure the daemon catching up a backlog: throughput, memory, and whether it stays awake.

    python benchmarks/catchup_bench.py [--size-mb 500] [--finding-every 2]

Writes a log of `--size-mb` MB in which one line in `--finding-every` is a SpecDecoding line
(a finding; 2 = every other line, a failure-heavy backlog), starts `logwatch daemon --file`
on it with no checkpoint, and asks its control socket for `status` every 100 ms until every
byte is read and every finding committed. Prints the catch-up rate (MB/s), the slowest
status answer (how long the event loop went without answering: the socket, the commits and
the watchdog all live there), the daemon's peak RSS (VmHWM) and the lag it reported along
the way (`behind_bytes`), against `grep -c` on the same file for scale.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from logwatch.daemon import client  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from live_bench import access_line, finding_line  # noqa: E402


def write_backlog(path: Path, size: int, every: int) -> int:
    findings, n = 0, 0
    with open(path, "wb") as out:
        while out.tell() < size:
            block = []
            for _ in range(10_000):
                if n % every == 0:
                    block.append(finding_line(n))
                    findings += 1
                else:
                    block.append(access_line(n))
                n += 1
            out.write(b"".join(block))
    return findings


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def follow(sock: Path, proc: subprocess.Popen[bytes], findings: int
                 ) -> tuple[float, float, int, float, list[int]]:
    """Ask for status every 100 ms until every finding is committed: the time it took, the
    slowest answer, how many answers, the peak RSS and the lag reported along the way."""
    started = time.monotonic()
    await client.wait_ready(sock, 60, alive=lambda: proc.poll() is None)
    slowest, answers, behind_seen, peak = 0.0, 0, [], 0.0
    async with client.Client(sock, timeout=120) as daemon:
        while True:
            asked = time.monotonic()
            state = await daemon.status()
            took = time.monotonic() - asked
            slowest, answers = max(slowest, took), answers + 1
            peak = max(peak, peak_rss_mib(proc.pid))
            behind = [s.get("behind_bytes", 0) for s in state["sources"]]
            if behind:
                behind_seen.append(behind[0])
            if state["findings_recorded"] >= findings and not state["pending"]:
                return time.monotonic() - started, slowest, answers, peak, behind_seen
            await asyncio.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--finding-every", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log, db, sock = Path(tmp) / "vllm.log", Path(tmp) / "h.duckdb", Path(tmp) / "lw.sock"
        findings = write_backlog(log, args.size_mb << 20, args.finding_every)
        size = log.stat().st_size
        started = time.monotonic()
        grep = subprocess.run(["grep", "-c", "SpecDecoding", str(log)], capture_output=True,
                              text=True, check=False, env={**os.environ, "LC_ALL": "C"})
        grep_s = time.monotonic() - started
        print(f"backlog: {size / 1e6:,.0f} MB, {findings:,} finding lines "
              f"(grep -c: {grep.stdout.strip()} in {grep_s:.2f} s)")
        (Path(tmp) / "none.toml").write_text("")
        proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--file",
                                 str(log), "--db", str(db), "--socket", str(sock), "--config",
                                 str(Path(tmp) / "none.toml")], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            took_s, slowest, answers, peak, behind_seen = asyncio.run(
                follow(sock, proc, findings))
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        print(f"caught up in {took_s:.1f} s: {size / 1e6 / took_s:,.1f} MB/s, "
              f"{findings / took_s:,.0f} findings/s "
              f"({took_s / max(grep_s, 1e-9):,.0f}x grep's time)")
        print(f"status answered {answers} times, slowest {slowest * 1000:,.0f} ms; "
              f"peak RSS {peak:,.0f} MiB; behind_bytes reported from "
              f"{max(behind_seen, default=0) / 1e6:,.0f} MB down to "
              f"{min(behind_seen, default=0) / 1e6:,.0f} MB")


if __name__ == "__main__":
    main()
