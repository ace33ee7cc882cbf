"""`logwatch run`'s pre-flight: the launch it is about to start, judged by `logwatch
preflight`'s prediction (core/diagnosis/preflight.py) over the served model directory's files,
before the child exists. `warn` (the default) says each predicted failure on stderr and starts
it anyway; `strict` starts nothing when one is predicted; `off` does not look."""

from __future__ import annotations

import os

from logwatch.cli.output import warn
from logwatch.core.diagnosis.preflight import NOT_READ, Prediction, predict
from logwatch.core.snapshot.model import Snapshot
from logwatch.host.checkpoint_files import model_files
from logwatch.host.vllm_cli_data import shipped_vocabulary

MODES = ("off", "warn", "strict")


def run_preflight(snapshot: Snapshot, mode: str) -> Prediction | None:
    """The prediction for a vLLM launch (None: `off`, or not a vLLM server command line),
    its failures said on stderr."""
    if mode == "off" or not snapshot.launch:
        return None
    served = snapshot.model.path if snapshot.model is not None else snapshot.launch.get("model")
    try:
        files = model_files(str(served)) if served else NOT_READ
        prediction = predict(snapshot, shipped_vocabulary(), files, os.path.isfile)
    except Exception as exc:  # never the reason vLLM is not started: said, and on it goes
        warn(f"logwatch run: preflight: could not judge the launch ({type(exc).__name__}: "
             f"{str(exc)[:200]}); starting it")
        return None
    for problem in prediction.problems:
        warn(f"logwatch run: preflight: FAIL {problem.title}: {problem.reason}")
    if prediction.problems:
        maybe = len(prediction.uncertain)
        warn(f"logwatch run: preflight: {len(prediction.problems)} failure(s) predicted"
             + (f", {maybe} possible" if maybe else "") + " (`logwatch preflight` says more); "
             + ("not started (--preflight strict)" if mode == "strict"
                else "starting it all the same (--preflight strict refuses)"))
    return prediction
