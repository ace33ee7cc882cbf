"""`logwatch run --relaunch`'s executor (relaunch/run_child.py) with real child processes: the
run's status after a rollback is the failure the relaunch was to fix, not what the rollback's
SIGTERM made of the relaunch.

Found by the real-vLLM tier (docs/real-vllm.md): a real vLLM 0.32.0 stopped by the rollback
while it was still starting dies of the SIGTERM (status 143), and the run exited 143 instead
of the first launch's 1."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

from logwatch.core.remedy.plan import Launch
from logwatch.core.snapshot.argv import parse_launch
from logwatch.relaunch.run_child import RunChild
from logwatch.sources.process import ProcessSource

# `vllm serve MODEL`: the model names what the child does. "fails" exits 1; "starting" is
# still starting when it is stopped (SIGTERM's default action ends it); "three" exits 3.
VLLM = f"""#!{sys.executable}
import sys, time
what = sys.argv[2]
print(what, flush=True)
if what == "starting":
    time.sleep(60)
sys.exit({{"fails": 1, "three": 3}}.get(what, 0))
"""


def _vllm(tmp: Path, what: str) -> list[str]:
    script = tmp / "vllm"
    if not script.exists():
        script.write_text(VLLM)
        script.chmod(0o755)
    return [str(script), "serve", what]


def _run(tmp: Path, steps: Any) -> tuple[RunChild, list[int]]:
    """A real ProcessSource running a child that fails, a RunChild as its executor;
    `steps(child)` runs on a thread of its own (as an action does) once the first child
    ended. Returns the executor and each child's status, in order."""
    first = _vllm(tmp, "fails")
    source = ProcessSource(first, name="run:t", passthrough=False, stop_seconds=10)
    statuses: list[int] = []
    source.on_exit = statuses.append
    done = threading.Event()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        child = RunChild(source, Launch(parse_launch(first)), loop,
                         snapshot_of=lambda launch: None,  # type: ignore[arg-type,return-value]
                         record=lambda snapshot: None, settled=done.is_set)
        holder.append(child)
        first_ended = asyncio.Event()
        source.on_exit = lambda code: (statuses.append(code), first_ended.set())

        async def read() -> None:
            async for _ in source.chunks():
                pass

        reader = asyncio.create_task(read())
        await first_ended.wait()
        await asyncio.to_thread(steps, child)
        done.set()
        await asyncio.wait_for(reader, 30)

    holder: list[RunChild] = []
    asyncio.run(main())
    return holder[0], statuses


def test_a_relaunch_stopped_while_starting_leaves_the_failures_status(tmp_path: Path
                                                                     ) -> None:
    def steps(child: RunChild) -> None:
        # the relaunch, as `start` runs it
        child._launch(Launch(parse_launch(_vllm(tmp_path, "starting"))))
        child.roll_back()  # verification failed: stopped, nothing verified to put back

    child, statuses = _run(tmp_path, steps)
    assert statuses[0] == 1 and statuses[1] in (-15, 143), statuses  # SIGTERM killed it
    assert child.unverified
    assert child.failed_status(143) == 1  # the first launch's failure, not the SIGTERM's


def test_a_relaunch_that_failed_by_itself_gives_its_own_status(tmp_path: Path) -> None:
    def steps(child: RunChild) -> None:
        child._launch(Launch(parse_launch(_vllm(tmp_path, "three"))))
        while child.source.running():
            threading.Event().wait(0.05)
        child.roll_back()  # nothing left to stop: the relaunch's own failure stands

    child, statuses = _run(tmp_path, steps)
    assert statuses == [1, 3], statuses
    assert child.failed_status(3) == 3
