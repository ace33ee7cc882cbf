"""One launch, both streams: vLLM 0.32.0 writes its logger (the worker's traceback that names
the cause) to stdout and the engine's generic wrappers to stderr. `vllm serve ... > out 2> err`
leaves them in two files; `logwatch scan --one-run out err` reads them as one run's streams: one
launch whose root cause is the worker's, the wrappers its consequences. Without the flag each
file is its own source, and the stderr alone says the cause is on the stdout.

The stdout is the first launch of the real 0.32.0 wrong-shape run (the logger's lines of the
committed sample); the stderr is the committed stderr of a real run of that case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import SAMPLES
from tests.inprocess import logwatch_text


def _stdout() -> str:
    """The logger's lines (what vLLM writes to stdout) of the first real launch."""
    text = (SAMPLES / "real_032_cpu_startup_failures.log").read_text()
    lines = text.splitlines(keepends=True)
    pid = next(ln for ln in lines if ln.startswith("(APIServer")).split(")")[0] + ")"
    ends = [n for n, ln in enumerate(lines) if ln.startswith("(APIServer") and pid not in ln]
    first = lines[:ends[0]] if ends else lines
    return "".join(ln for ln in first if ln.startswith("("))


def _scan(*args: str) -> dict[str, Any]:
    done = logwatch_text("scan", "--json", *args)
    assert done.returncode == 1, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _roots(report: dict[str, Any]) -> list[str | None]:
    return [report["incidents"][launch["root_cause"]]["signature"]
            if launch["root_cause"] is not None else None for launch in report["launches"]]


def test_two_streams_of_one_run_are_one_launch(tmp_path: Path) -> None:
    out, err = tmp_path / "out", tmp_path / "err"
    out.write_text(_stdout())
    err.write_text((SAMPLES / "real_032_stderr_only.log").read_text())

    apart = _scan(str(out), str(err))
    assert sorted(_roots(apart)) == ["engine.worker_failed", "weights.narrow_out_of_range"]
    assert "cause_on_stdout" in {d["cause"] for d in apart["diagnoses"]}

    together = _scan("--one-run", str(out), str(err))
    assert _roots(together) == ["weights.narrow_out_of_range"]
    assert "cause_on_stdout" not in {d["cause"] for d in together["diagnoses"]}
    signatures = {i["signature"]: i for i in together["incidents"]}
    # the stderr's wrappers are in the launch, as consequences, with their own file's lines
    assert {"engine.init_failed", "engine.worker_failed"} <= set(signatures)
    assert signatures["engine.init_failed"]["first_seen"]["source"] == str(err)
    assert signatures["weights.narrow_out_of_range"]["first_seen"]["source"] == str(out)
