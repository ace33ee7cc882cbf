"""How a vLLM release writes its lines, for the stand-in: the header, which process names it
uses, where the `(Name pid=N) ` prefix goes, and the source file:line of each message.

Read in the sdists (0.11.2, 0.25.1, 0.26.0, 0.29.0, 0.31.0, 0.33.0) and seen from a real 0.32.0
(docs/real-vllm.md): before 0.31.0 `decorate_logs` wraps stdout/stderr so every written line
(uvicorn's and raw tracebacks too) starts with the prefix, always in cyan in 0.11.2 and only
when colour is on later; from 0.31.0 the prefix is part of the `vllm` logger's format and
other output has none. The engine core is `EngineCore_DP0` in 0.11.2
and `EngineCore` without data parallelism in 0.25.1 on. A release between two read ones is
written like the older one. Pure: the clock and pids come from the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

from logwatch.core.quant.ignore_rules import Release
from logwatch.core.safe_text.visible import visible

CYAN, RESET = "\x1b[1;36m", "\x1b[0;0m"

# message key -> file:line, per release read (the call site in that release's sources)
_SITES: dict[Release, dict[str, str]] = {
    (0, 11, 2): {
        "platform": "__init__.py:226", "version": "api_server.py:1977",
        "args": "utils.py:253", "arch": "model.py:631", "max_len": "model.py:1745",
        "chunked": "scheduler.py:217", "engine": "core.py:94", "nccl": "pynccl.py:112",
        "load": "gpu_model_runner.py:3260", "weights": "default_loader.py:315",
        "fp4_marlin": "marlin_utils_fp4.py:205", "pad": "marlin_utils.py:239",
        "drafter": "gpu_model_runner.py:3284", "loaded": "gpu_model_runner.py:3339",
        "kv_mem": "gpu_worker.py:360", "kv_size": "kv_cache_utils.py:1229",
        "graphs": "gpu_model_runner.py:4245", "init": "core.py:251",
        "tasks": "api_server.py:1725", "serving": "api_server.py:2053",
        "routes": "launcher.py:38", "route": "launcher.py:46",
        "worker_failed": "multiproc_executor.py:743", "core_failed": "core.py:842",
        "stats": "loggers.py:215", "spec": "metrics.py:100",
    },
    (0, 25, 1): {
        "platform": "__init__.py:246", "version": "api_utils.py:339",
        "args": "api_utils.py:273", "arch": "model.py:619", "max_len": "model.py:1776",
        "chunked": "scheduler.py:253", "engine": "core.py:115", "nccl": "pynccl.py:113",
        "load": "gpu_model_runner.py:5210", "weights": "default_loader.py:431",
        "fp4_marlin": "marlin.py:35", "pad": "marlin_utils.py:239",
        "drafter": "gpu_model_runner.py:5233", "loaded": "gpu_model_runner.py:5307",
        "kv_mem": "gpu_worker.py:539", "kv_size": "kv_cache_utils.py:2146",
        "graphs": "gpu_model_runner.py:6708", "init": "core.py:328",
        "tasks": "api_server.py:612", "serving": "api_server.py:616",
        "routes": "launcher.py:37", "route": "launcher.py:46", "env": "envs.py:2041",
        "worker_failed": "multiproc_executor.py:898", "core_failed": "core.py:1231",
        "stats": "loggers.py:283", "spec": "metrics.py:120",
        "shutdown": "launcher.py:100", "core_signal": "core.py:1215",
        "workers_exited": "multiproc_executor.py:433",
    },
    (0, 32, 0): {  # the call sites in the installed 0.32.0 (the real-vLLM tier's release)
        "platform": "__init__.py:290", "version": "api_utils.py:347",
        "args": "api_utils.py:286", "arch": "model.py:733", "max_len": "model.py:2152",
        "chunked": "scheduler.py:307", "engine": "core.py:133", "nccl": "pynccl.py:148",
        "load": "gpu_model_runner.py:5039", "weights": "default_loader.py:501",
        "fp4_marlin": "marlin.py:34", "pad": "marlin_utils.py:239",
        "drafter": "gpu_model_runner.py:5071", "loaded": "gpu_model_runner.py:5149",
        "kv_mem": "gpu_worker.py:759", "kv_size": "kv_cache_utils.py:2327",
        "graphs": "gpu_model_runner.py:6581", "init": "core.py:402",
        "tasks": "entry.py:136", "serving": "entry.py:140",
        "routes": "launcher.py:186", "route": "launcher.py:195", "env": "interface.py:1457",
        "worker_failed": "multiproc_executor.py:1063", "core_failed": "core.py:1510",
        "stats": "loggers.py:283", "spec": "metrics.py:120",
        "shutdown": "launcher.py:254", "core_signal": "core.py:1454",
        "workers_exited": "multiproc_executor.py:479", "output_handler": "async_llm.py:906",
    },
    (0, 33, 0): {
        "platform": "__init__.py:287", "version": "startup.py:38",
        "args": "startup.py:96", "arch": "model.py:744", "max_len": "model.py:2170",
        "chunked": "scheduler.py:311", "engine": "core.py:140", "nccl": "pynccl.py:148",
        "load": "gpu_model_runner.py:4979", "weights": "default_loader.py:507",
        "fp4_marlin": "marlin.py:35", "pad": "marlin_utils.py:239",
        "drafter": "gpu_model_runner.py:5010", "loaded": "gpu_model_runner.py:5089",
        "kv_mem": "gpu_worker.py:773", "kv_size": "kv_cache_utils.py:1147",
        "graphs": "gpu_model_runner.py:6517", "init": "core.py:396",
        "tasks": "entry.py:135", "serving": "entry.py:139",
        "routes": "launcher.py:188", "route": "launcher.py:197", "env": "interface.py:1470",
        "worker_failed": "multiproc_executor.py:1057", "core_failed": "core.py:1584",
        "stats": "loggers.py:283", "spec": "metrics.py:120",
        "shutdown": "launcher.py:256", "core_signal": "core.py:1526",
        "workers_exited": "multiproc_executor.py:587",
    },
}


@dataclass(frozen=True, slots=True)
class ReleaseStyle:
    release: Release
    read_as: Release  # the release whose sources gave the style
    colour: bool  # the prefix in cyan (0.11.2 always; later only when asked)

    @property
    def stream_prefix(self) -> bool:
        """Every output line prefixed (decorate_logs wrapping the streams) before 0.31.0,
        where the prefix moved into the `vllm` logger's records (read in the 0.29.0 and
        0.31.0 sdists; a real 0.32.0 prints uvicorn's lines and tqdm's bars bare)."""
        return self.release < (0, 31, 0)

    @property
    def logo(self) -> bool:
        return self.read_as >= (0, 25, 1)

    @property
    def engine_name(self) -> str:
        return "EngineCore_DP0" if self.read_as < (0, 25, 1) else "EngineCore"

    @property
    def shutdown_tags(self) -> bool:
        return self.read_as >= (0, 25, 1)

    def site(self, key: str) -> str:
        return _SITES[self.read_as].get(key, "api_server.py:1")


def style_for(release: Release, env: dict[str, str]) -> ReleaseStyle:
    read_as = max(r for r in _SITES if r <= release) if release >= min(_SITES) else min(_SITES)
    colour = read_as < (0, 25, 1) or (env.get("VLLM_LOGGING_COLOR") == "1"
                                      and not env.get("NO_COLOR"))
    return ReleaseStyle(release, read_as, colour)


@dataclass(frozen=True, slots=True)
class Line:
    stream: str  # "out" or "err"
    text: str


class Writer:
    """Renders the lines of one simulated vLLM, process by process."""

    def __init__(self, style: ReleaseStyle, api_pid: int) -> None:
        self.style = style
        self.api_pid = api_pid

    def _prefix(self, proc: str, pid: int) -> str:
        if proc == "MainProcess" and self.style.stream_prefix:
            return ""  # logged before decorate_logs wraps the streams
        if self.style.colour and self.style.stream_prefix:
            return f"{CYAN}({proc} pid={pid}){RESET} "
        return f"({proc} pid={pid}) "

    def log(self, proc: str, pid: int, level: str, key: str, message: str,
            stamp: str) -> list[Line]:
        """A `vllm` logger record: each line of a multi-line message repeats the header, and
        every line but the last ends in a carriage return (vLLM's formatter joins them with
        `\r\n`, in every release read from 0.11.2 on; a real 0.32.0 writes it to files too)."""
        head = f"{level} {stamp} [{self.style.site(key)}] "
        parts = message.split("\n")
        return [Line("out", self._prefix(proc, pid) + head + visible(part)
                     + ("\r" if n < len(parts) - 1 else ""))
                for n, part in enumerate(parts)]

    def raw(self, proc: str, pid: int, text: str, stream: str = "err") -> list[Line]:
        """Output outside the `vllm` logger (uvicorn, multiprocessing's traceback): prefixed
        only where the release wraps the streams."""
        prefix = self._prefix(proc, pid) if self.style.stream_prefix else ""
        return [Line(stream, prefix + visible(part)) for part in text.split("\n")]

    def api(self, level: str, key: str, message: str, stamp: str) -> list[Line]:
        return self.log("APIServer", self.api_pid, level, key, message, stamp)

    def uvicorn(self, message: str, stream: str = "err") -> list[Line]:
        return self.raw("APIServer", self.api_pid, f"INFO:     {message}", stream)
