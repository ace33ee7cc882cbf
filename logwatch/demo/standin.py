"""A stand-in for `vllm serve`: `python -m logwatch.demo.standin serve MODEL_DIR [flags]`.

It reads its argv, environment and model directory as vLLM does, asks
`standin_outcome.outcome()` what the simulated release does on the simulated GPU, prints that
release's lines (standin_script) and then exits 1 after the crash, or serves `/health`,
`/v1/models` and `/v1/completions` on its address until SIGTERM/SIGINT.

Environment: LOGWATCH_STANDIN_GPU (h200 | b200 | rtx-pro-6000, default h200),
LOGWATCH_STANDIN_GPU_COUNT (default 8), LOGWATCH_STANDIN_VLLM (release, default 0.33.0),
LOGWATCH_STANDIN_PACE (multiplies the short pauses between phases, default 1; 0 for tests),
and vLLM's own VLLM_LOG_STATS_INTERVAL (seconds between stats lines, default 10).
Port 0 binds a free port; the `Starting vLLM ... on http://HOST:PORT` line names it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

from logwatch.core.safe_text.visible import visible
from logwatch.demo import standin_failures as failures
from logwatch.demo import standin_script as script
from logwatch.demo.standin_args import USAGE, UsageError, parse_serve
from logwatch.demo.standin_format import Line, Writer, style_for
from logwatch.demo.standin_outcome import (
    DEFAULT_RELEASE,
    GPUS,
    Launch,
    Outcome,
    outcome,
    release_of,
)
from logwatch.demo.standin_script import Scene
from logwatch.host.model_dir import read_model_dir

MAX_BODY = 1 << 20
DEFAULT_MAX_LEN = 262144


class Output:
    """Line-at-a-time writes to stdout/stderr from every thread, in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def write(self, lines: list[Line]) -> None:
        with self.lock:
            for line in lines:
                stream = sys.stdout if line.stream == "out" else sys.stderr
                stream.write(line.text + "\n")
                stream.flush()


def stamp() -> str:
    return time.strftime("%m-%d %H:%M:%S", time.localtime())


class Traffic:
    """Requests and generated tokens since the last stats line."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.tokens = 0

    def add(self, tokens: int) -> None:
        with self.lock:
            self.requests += 1
            self.tokens += tokens

    def take(self) -> tuple[int, int]:
        with self.lock:
            taken = (self.requests, self.tokens)
            self.requests = self.tokens = 0
            return taken


def make_handler(scene: Scene, out: Output, traffic: Traffic, access_log: bool
                 ) -> type[BaseHTTPRequestHandler]:
    launch = scene.launch

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "uvicorn"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:
            return  # access lines are written by log_request, uvicorn-style

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            if not access_log:
                return
            status = int(code) if str(code).isdigit() else 0
            phrase = self.responses.get(status, ("",))[0]
            client = f"{self.client_address[0]}:{self.client_address[1]}"
            out.write(script.access(scene, client, visible(self.requestline), status, phrase))

        def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, b"")
            elif self.path == "/v1/models":
                cards: list[dict[str, Any]] = [
                    {"id": name, "object": "model", "created": int(time.time()),
                     "owned_by": "vllm", "root": launch.model, "parent": None,
                     "max_model_len": scene.max_model_len, "permission": []}
                    for name in launch.served_model_names or (launch.model,)]
                self._send(200, script.json_body({"object": "list", "data": cards}))
            else:
                self._send(404, script.json_body({"detail": "Not Found"}))

        def do_POST(self) -> None:
            if self.path != "/v1/completions":
                self._send(404, script.json_body({"detail": "Not Found"}))
                return
            length_text = self.headers.get("content-length") or "0"
            length = int(length_text) if length_text.isdigit() else -1
            if not 0 <= length <= MAX_BODY:
                self._send(413, script.json_body({"detail": "Request too large"}))
                return
            body = _json_object(self.rfile.read(length) or b"{}")
            max_tokens = body.get("max_tokens", 16) if body is not None else None
            if body is None or not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
                self._send(400, script.json_body(
                    {"object": "error", "message": "expected a JSON object with an integer "
                     "max_tokens", "type": "BadRequestError", "param": None, "code": 400}))
                return
            model = body.get("model")
            if model is not None and model not in (launch.served_model_names or (launch.model,)):
                self._send(404, script.json_body(
                    {"object": "error", "message": f"The model `{model}` does not exist.",
                     "type": "NotFoundError", "param": None, "code": 404}))
                return
            prompt = str(body.get("prompt", ""))
            max_tokens = min(max(max_tokens, 1), 64)
            text = script.completion_text(prompt, max_tokens)
            prompt_tokens = max(1, len(prompt.split()))
            traffic.add(max_tokens)
            self._send(200, script.json_body({
                "id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
                "created": int(time.time()), "model": model or launch.served_name,
                "choices": [{"index": 0, "text": text, "logprobs": None,
                             "finish_reason": "length", "stop_reason": None}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens,
                          "total_tokens": prompt_tokens + max_tokens}}))

    return Handler


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _env_problem(env: dict[str, str]) -> str | None:
    gpu = env.get("LOGWATCH_STANDIN_GPU", "h200")
    if gpu not in GPUS:
        return f"LOGWATCH_STANDIN_GPU={gpu!r}: expected one of {', '.join(GPUS)}"
    try:
        release_of(env.get("LOGWATCH_STANDIN_VLLM", DEFAULT_RELEASE))
        float(env.get("LOGWATCH_STANDIN_PACE", "1"))
        int(env.get("LOGWATCH_STANDIN_GPU_COUNT", "8"))
    except ValueError as exc:
        return f"LOGWATCH_STANDIN_*: {exc}"
    return None


def _stats_interval(env: dict[str, str]) -> float:
    try:
        value = float(env.get("VLLM_LOG_STATS_INTERVAL", "10"))
    except ValueError:
        return 10.0
    return value if value > 0 else 10.0


def run(argv: list[str], env: dict[str, str]) -> int:
    problem = _env_problem(env)
    if problem:
        sys.stderr.write(f"logwatch stand-in: {visible(problem)}\n")
        return 2
    release = release_of(env.get("LOGWATCH_STANDIN_VLLM", DEFAULT_RELEASE))
    if not argv or argv[0] != "serve":
        sys.stderr.write("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch}"
                         " ...\nvllm: error: the stand-in only implements `vllm serve`\n")
        return 2
    try:
        launch, args = parse_serve(argv[1:], release)
    except UsageError as exc:
        sys.stderr.write(f"usage: {USAGE}\nvllm serve: error: {visible(str(exc))}\n")
        return 2
    facts, problems = read_model_dir(launch.model, launch.hf_overrides)
    unreadable = [p for p in problems if "config.json" in p] if facts else problems
    if facts is None or unreadable:  # vLLM cannot build a model config either
        for problem in unreadable:
            sys.stderr.write(f"logwatch stand-in: {visible(problem)}\n")
        return 1
    gpu = GPUS[env.get("LOGWATCH_STANDIN_GPU", "h200")]
    result = outcome(facts, launch, gpu, env.get("LOGWATCH_STANDIN_VLLM", DEFAULT_RELEASE), env,
                     int(env.get("LOGWATCH_STANDIN_GPU_COUNT", "8")))
    pace = max(float(env.get("LOGWATCH_STANDIN_PACE", "1")), 0.0)
    out = Output()
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    api_pid = os.getpid()
    scene = Scene(Writer(style_for(release, env), api_pid), facts, launch, gpu, result,
                  api_pid + 77, launch.max_model_len or DEFAULT_MAX_LEN)
    return serve_or_crash(scene, result, args.disable_log_stats,
                          not args.disable_uvicorn_access_log, pace, out, stop, received, env)


def serve_or_crash(scene: Scene, result: Outcome, no_stats: bool, access_log: bool,
                   pace: float, out: Output, stop: threading.Event, received: list[str],
                   env: dict[str, str]) -> int:
    def phase(lines: list[Line], pause: float) -> bool:
        out.write(lines)
        return not stop.wait(pause * pace)

    if not phase(script.api_start(scene, stamp), 0.2):
        return 128 + signal.SIGTERM
    if result.kind in ("unsupported_architecture", "too_few_gpus"):
        out.write(failures.unsupported_architecture(scene) if result.kind ==
                  "unsupported_architecture" else failures.too_few_gpus(scene))
        return 1
    for lines, pause in ((script.engine_start(scene, stamp), 0.3),
                         (script.load_weights(scene, stamp), 0.4)):
        if not phase(lines, pause):
            return 128 + signal.SIGTERM
    if result.fails:
        out.write(failures.crash(scene, stamp))
        return 1
    if not phase(script.engine_ready(scene, stamp), 0.3):
        return 128 + signal.SIGTERM
    launch: Launch = scene.launch
    traffic = Traffic()
    try:
        server = ThreadingHTTPServer((launch.host, launch.port),
                                     make_handler(scene, out, traffic, access_log))
    except (OSError, OverflowError) as exc:
        sys.stderr.write(f"logwatch stand-in: cannot listen on {visible(launch.host)}:"
                         f"{launch.port}: {visible(str(exc))}\n")
        return 1
    server.daemon_threads = True
    bound = server.server_address
    host = bound[0].decode() if isinstance(bound[0], bytes) else str(bound[0])
    port = int(bound[1])
    out.write(script.serving(scene, f"http://{host}:{port}", stamp))
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    interval = _stats_interval(env)
    while not stop.wait(interval):
        requests, tokens = traffic.take()
        if requests and not no_stats:
            out.write(script.stats(scene, requests, tokens, interval, stamp))
    server.shutdown()
    server.server_close()
    out.write(script.shutdown(scene, received[0] if received else "SIGTERM", stamp))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(list(sys.argv[1:] if argv is None else argv), dict(os.environ))


if __name__ == "__main__":
    sys.exit(main())
