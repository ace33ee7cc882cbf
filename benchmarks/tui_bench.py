"""Measure the TUI's live log under load: input rate held, frame time, CPU, idle CPU.

    python benchmarks/tui_bench.py [--rates 1000,10000,20000] [--seconds 10]
                                   [--size 160x50] [--idle 5]

For each rate a fresh `logwatch daemon --file LOG` runs as its own process and a writer
process appends access lines to LOG (10 ms ticks, a write per line, one finding line in 100,
as benchmarks/live_bench.py does). The TUI (`LogwatchApp`) runs headless in this process on
the live-log screen, following, subscribed to the daemon as `logwatch tui` is: Textual lays
out and renders every frame; only the bytes to the terminal are thrown away.

Per rate it prints: lines written and lines that reached the TUI (`held`: the share of the
input it kept up with; the rest were still in flight or dropped, and the screen counts any it
dropped), the frames drawn per second, frame time p50/p99/max (a screen update: layout,
render, compose of the changed lines), the event loop's worst lateness (how long a key press
could wait), the TUI's CPU while the input flows and after it stops (`idle`), and for
comparison the CPU of `tail -F LOG > /dev/null` following the same file at the same rate
(the least a follower costs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from live_bench import cpu_seconds, start_daemon  # noqa: E402
from textual.screen import Screen  # noqa: E402

from logwatch.tui.app import LogwatchApp  # noqa: E402
from logwatch.tui.screens.log import LogScreen  # noqa: E402
from logwatch.tui.state import LIVE  # noqa: E402

WRITER = """
import sys, time
sys.path.insert(0, {here!r})
from live_bench import Writer
writer = Writer(__import__("pathlib").Path({log!r}), {rate}, {seconds})
writer.run()
print(writer.written)
"""


def frame_timer() -> tuple[list[float], Callable[[], None]]:
    """Every screen update's duration (Textual's update timer callback), and an undo."""
    frames: list[float] = []
    original = Screen._on_timer_update

    def timed(self: Screen[Any]) -> None:
        start = time.perf_counter()
        original(self)
        frames.append(time.perf_counter() - start)

    Screen._on_timer_update = timed  # type: ignore[method-assign]

    def undo() -> None:
        Screen._on_timer_update = original  # type: ignore[method-assign]
    return frames, undo


def run_rate(rate: int, seconds: float, size: tuple[int, int], idle: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="logwatch-tui-bench-") as tmp:
        workdir = Path(tmp)
        log = workdir / "vllm.log"
        log.write_bytes(b"")
        daemon, sock = start_daemon(workdir, log)
        tail = subprocess.Popen(["tail", "-F", "-n", "0", str(log)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        result: dict[str, Any] = {"rate": rate}
        app = LogwatchApp(sock, workdir / "h.duckdb")
        frames, undo = frame_timer()

        async def drive(pilot: Any) -> None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while app.connection.kind != LIVE:
                if loop.time() > deadline:
                    raise SystemExit("the TUI did not connect")
                await pilot.pause(0.05)
            await pilot.press("l")
            while not isinstance(app.screen, LogScreen):
                await pilot.pause(0.05)
            lateness = [0.0]
            stop = asyncio.Event()

            async def probe() -> None:  # how late a 10 ms timer fires: a key would wait
                while not stop.is_set():
                    before = loop.time()
                    await asyncio.sleep(0.01)
                    lateness[0] = max(lateness[0], loop.time() - before - 0.01)

            probing = asyncio.create_task(probe())
            frames.clear()
            writer = await asyncio.create_subprocess_exec(
                sys.executable, "-c", WRITER.format(here=str(HERE), log=str(log), rate=rate,
                                                    seconds=seconds),
                stdout=asyncio.subprocess.PIPE)
            cpu0, tail0, wall0 = time.process_time(), cpu_seconds(tail.pid), loop.time()
            out, _ = await writer.communicate()
            wall1 = loop.time()
            cpu1, tail1 = time.process_time(), cpu_seconds(tail.pid)
            result["frames"] = list(frames)
            result["wall"] = wall1 - wall0
            result["written"] = int(out.decode().strip() or 0)
            result["held_at_end"] = app.ring.end + len(app.pending)
            await asyncio.sleep(2)  # what was in flight arrives
            result["received"] = app.ring.end + len(app.pending)
            result["dropped"] = app.dropped_lines
            result["dropped_events"] = app.dropped_events
            result["cpu"] = 100 * (cpu1 - cpu0) / (wall1 - wall0)
            result["tail_cpu"] = 100 * (tail1 - tail0) / (wall1 - wall0)
            result["lateness"] = lateness[0]
            stop.set()
            await probing  # (its 100 wake-ups a second would count as the TUI's idle CPU)
            idle0, idle_wall0 = time.process_time(), loop.time()
            await asyncio.sleep(idle)
            result["idle_cpu"] = 100 * (time.process_time() - idle0) / (loop.time() - idle_wall0)
            app.exit()

        try:
            app.run(headless=True, size=size, auto_pilot=drive)
        finally:
            undo()
            tail.terminate()
            daemon.terminate()
            daemon.wait(30)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000,10000,20000")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--size", default="160x50", help="the terminal, COLUMNSxLINES")
    parser.add_argument("--idle", type=float, default=5, help="seconds measured after")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    print(f"TUI {width}x{height}, live log following, {os.cpu_count()} CPUs; "
          f"{args.seconds:g} s per rate")
    print(f"{'lines/s':>8} {'written':>9} {'held':>6} {'fps':>5} {'frame p50':>9} "
          f"{'p99':>6} {'max ms':>7} {'late ms':>7} {'CPU %':>6} {'idle %':>6} "
          f"{'tail -F %':>9} {'ratio':>6}")
    for rate in (int(r) for r in args.rates.split(",")):
        r = run_rate(rate, args.seconds, (width, height), args.idle)
        ms = sorted(f * 1000 for f in r["frames"]) or [float("nan")]
        q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) >= 2 else ms * 99
        held = r["received"] / r["written"] if r["written"] else float("nan")
        ratio = r["cpu"] / r["tail_cpu"] if r["tail_cpu"] > 0 else float("inf")
        print(f"{rate:>8,} {r['written']:>9,} {held:>6.1%} {len(ms) / r['wall']:>5.1f} "
              f"{q[49]:>9.2f} {q[98]:>6.2f} {max(ms):>7.2f} {r['lateness'] * 1000:>7.1f} "
              f"{r['cpu']:>6.1f} {r['idle_cpu']:>6.2f} {r['tail_cpu']:>9.1f} {ratio:>5.1f}x"
              + (f"  (dropped {r['dropped']:,} lines, {r['dropped_events']:,} events)"
                 if r["dropped"] or r["dropped_events"] else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
