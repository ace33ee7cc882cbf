"""A curated message as the log text an operator really gets: the traceback tail after the
engine's failure lines, the API server's own traceback, or one formatted log line."""

from __future__ import annotations

import posixpath

from tools.vllm_vocab.curated import Curated
from tools.vllm_vocab.sources import release_key
from tools.vllm_vocab.template import fill, pieces
from tools.vllm_vocab.values import plausible
from tools.vllm_vocab.vocabulary import raised_as

STAMP = "12-01 03:12:44"
SITE = "/usr/local/lib/python3.12/dist-packages/"
ENGINE = "(EngineCore_DP0 pid=2391) "
API = "(APIServer pid=2210) "
# Before this release the engine process was EngineCore_0 and API-server lines had no prefix.
PREFIXES_FROM = (0, 10, 2)
EARLY_ENGINE = "(EngineCore_0 pid=2391) "


def _prefixes(entry: Curated) -> tuple[str, str]:
    """The (engine, API server) line prefixes of the newest release that prints the message."""
    if release_key(max(entry.releases, key=release_key)) < PREFIXES_FROM:
        return EARLY_ENGINE, ""
    return ENGINE, API
CORE_TAG = "[core.py:708] "
# Config classes are pydantic dataclasses from this release on: a ValueError raised while one
# is validated reaches the log as pydantic's ValidationError with "Value error, <message>".
PYDANTIC_CONFIG_FROM = (0, 11, 0)


def message_text(entry: Curated) -> str:
    """The message with every placeholder filled with a plausible value."""
    values = {name: entry.values.get(name, plausible(name))
              for _, name in pieces(entry.template) if name is not None}
    return fill(entry.template, values)


def _frame(entry: Curated, statement: str) -> list[str]:
    return [f'  File "{SITE}{entry.file}", line 412, in {entry.function.split(".")[-1]}',
            f"    {statement}"]


def _exception(entry: Curated) -> tuple[list[str], str]:
    """The innermost frames and the exception text (`Class: message` or `AssertionError`)."""
    text = message_text(entry)
    if entry.kind == "torch_check":
        # the custom op is named after the C++ entry point the check sits in
        # (a macro's name, all capitals, is not an op: the file's is)
        op = entry.function if entry.function.isidentifier() and not \
            entry.function.isupper() else posixpath.splitext(posixpath.basename(entry.file))[0]
        frames = [f'  File "{SITE}vllm/_custom_ops.py", line 1022, in {op}',
                  f"    return torch.ops._C.{op}(",
                  f'  File "{SITE}torch/_ops.py", line 1243, in __call__',
                  "    return self._op(*args, **kwargs)"]
        return frames, f"{raised_as(entry.kind, entry.label)}: {text}"
    if entry.kind == "assert" and text.startswith("assert "):
        return _frame(entry, text), "AssertionError"  # a bare assert: its line is the clue
    statement = "assert" if entry.kind == "assert" else f"raise {entry.label}("
    return _frame(entry, statement), f"{entry.label}: {text}"


def _prefixed(prefix: str, tag: str, lines: list[str], level: str = "ERROR") -> list[str]:
    return [f"{prefix}{level} {STAMP} {tag}{line}" for line in lines]


def _pydantic_owner(entry: Curated) -> str | None:
    """The config class whose validation raised it, when pydantic wraps the error: raises in
    vllm/config run while a config dataclass validates (its __post_init__ or what it calls), and
    so do those the entry names a `wrapped_by` class for."""
    newest = max(entry.releases, key=release_key)
    if release_key(newest) < PYDANTIC_CONFIG_FROM:
        return None
    if entry.wrapped_by:
        return entry.wrapped_by
    if not entry.file.startswith("vllm/config/"):
        return None
    owner = entry.function.split(".")[0]
    if owner.endswith("Config"):
        return owner
    stem = posixpath.splitext(posixpath.basename(entry.file))[0]
    return "VllmConfig" if stem in ("vllm", "__init__") else stem.title() + "Config"


def _engine_failure(entry: Curated) -> list[str]:
    frames, error = _exception(entry)
    tail = [f'  File "{SITE}vllm/v1/engine/core.py", line 699, in run_engine_core',
            "    engine_core = EngineCoreProc(*args, **kwargs)", *frames, *error.split("\n")]
    engine, api = _prefixes(entry)
    lines = _prefixed(engine, CORE_TAG, ["EngineCore failed to start.",
                                        "Traceback (most recent call last):", *tail])
    lines += [f"Process {engine[1:].split()[0]}:", "Traceback (most recent call last):",
              '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
              "    self.run()", *tail]
    api_tail = [
        "Traceback (most recent call last):",
        f'  File "{SITE}vllm/v1/engine/utils.py", line 926, in wait_for_engine_startup',
        "    raise RuntimeError(",
        "RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {}"]
    return lines + [api + line for line in api_tail]


def _api_failure(entry: Curated) -> list[str]:
    frames, error = _exception(entry)
    head = [f"INFO {STAMP} [api_server.py:1896] vLLM API server version "
            f"{max(entry.releases, key=release_key)}",
            "Traceback (most recent call last):",
            '  File "/usr/local/bin/vllm", line 10, in <module>', "    sys.exit(main())",
            f'  File "{SITE}vllm/engine/arg_utils.py", line 1100, in create_engine_config',
            "    model_config = self.create_model_config()", *frames]
    owner = _pydantic_owner(entry)
    if owner is not None:
        message = error.split(": ", 1)[-1]
        error = (f"pydantic_core._pydantic_core.ValidationError: 1 validation error for {owner}"
                 f"\n  Value error, {message} [type=value_error, input_value=ArgsKwargs((), "
                 "{}), input_type=ArgsKwargs]\n    For further information visit "
                 "https://errors.pydantic.dev/2.11/v/value_error")
    api = _prefixes(entry)[1]
    return [api + line for line in [*head, *error.split("\n")]]


def _log_line(entry: Curated) -> list[str]:
    engine, api = _prefixes(entry)
    prefix = api if entry.process == "api" else engine
    tag = f"[{posixpath.basename(entry.file)}:233] "
    first, *rest = message_text(entry).split("\n")
    return [f"{prefix}{entry.label} {STAMP} {tag}{first}", *(prefix + line for line in rest)]


WORKER = "(Worker pid=3144) "
WORKER_TAG = "[multiproc_executor.py:953] "
# The multiprocessing executor's workers log their start-up failure themselves from this
# release on (the real 0.32.0 output: docs/real-vllm.md); the engine's lines follow.
WORKER_FORM_FROM = (0, 10, 2)


def _worker_failure(entry: Curated) -> list[str]:
    """A worker's start-up failure as vLLM 0.32 prints it: the worker's own ERROR lines
    (`WorkerProc failed to start.` and the traceback), then the engine core's wrapper."""
    frames, error = _exception(entry)
    tail = [f'  File "{SITE}vllm/v1/executor/multiproc_executor.py", line 924, in worker_main',
            "    worker = WorkerProc(*args, **kwargs)",
            f'  File "{SITE}vllm/v1/worker/gpu_worker.py", line 240, in load_model',
            "    self.model_runner.load_model()", *frames, *error.split("\n")]
    lines = _prefixed(WORKER, WORKER_TAG, ["WorkerProc failed to start.",
                                           "Traceback (most recent call last):", *tail])
    engine, api = _prefixes(entry)
    lines += _prefixed(engine, CORE_TAG, [
        "EngineCore failed to start.", "Traceback (most recent call last):",
        f'  File "{SITE}vllm/v1/executor/multiproc_executor.py", line 160, in _init_executor',
        "    raise e from None",
        "Exception: WorkerProc initialization failed due to an exception in a background "
        "process. See stack trace for root cause."])
    return [*lines, api + "RuntimeError: Engine core initialization failed. See root cause "
            "above. Failed core proc(s): {}"]


def forms(entry: Curated) -> dict[str, str]:
    """Each form vLLM prints the message in, newline-terminated: a log call its line; a
    failure raised in the API server that server's traceback; one raised in the engine the
    engine core's traceback and, from 0.10.2, a worker's own lines before the engine's."""
    if entry.kind == "log":
        return {"log line": "\n".join(_log_line(entry)) + "\n"}
    if entry.process == "api":
        return {"API server": "\n".join(_api_failure(entry)) + "\n"}
    out = {"engine": "\n".join(_engine_failure(entry)) + "\n"}
    if release_key(max(entry.releases, key=release_key)) >= WORKER_FORM_FROM:
        out["worker"] = "\n".join(_worker_failure(entry)) + "\n"
    return out


def render(entry: Curated) -> str:
    """The log text an operator would paste for this message, newline-terminated."""
    if entry.kind == "log":
        lines = _log_line(entry)
    elif entry.process == "api":
        lines = _api_failure(entry)
    else:
        lines = _engine_failure(entry)
    return "\n".join(lines) + "\n"


def headline(entry: Curated) -> str:
    """The one line that carries the message, as the log shows it (placeholders filled)."""
    if entry.kind == "log":
        return message_text(entry).split("\n")[0]
    _, error = _exception(entry)
    return error.split("\n")[0]
