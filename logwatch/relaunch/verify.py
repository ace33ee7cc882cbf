"""Gathering what core.remedy.verify judges about a relaunch: the launch's findings as they arrive
(from wherever its output is read), and its server's answers on loopback (`/health`,
`/v1/models`, one tiny completion), within timeouts.

The server is asked where vLLM said it serves: the port of its `Starting vLLM ... server on
http://HOST:PORT` line (lifecycle.server_starting; `--port 0` binds a free one), else the
launch's own `--port` (else 8000). The host is always the launch's own `--host` (loopback for
all interfaces): a line of the log can never point the probes at another machine. No proxy is
used.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from logwatch.core.launches.lifecycle import ACCEPTANCE_READINGS, READY_SIGNATURES
from logwatch.core.remedy.verify import Probes, Verdict, judge
from logwatch.core.signatures.findings import Finding
from logwatch.core.snapshot.argv import LaunchSpec

DEFAULT_PORT = 8000  # vLLM's
SERVER_STARTING = "lifecycle.server_starting"  # `Starting vLLM server on {url}`
MAX_ANSWER_BYTES = 1 << 20
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def endpoint(spec: LaunchSpec, logged_port: int | None = None) -> str:
    """The base URL a launch serves on, reached on loopback: on `logged_port` when vLLM
    said which, else on its --port."""
    host = spec.value("--host") or "127.0.0.1"
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    port = spec.value("--port") or str(DEFAULT_PORT)
    if not port.isdigit():
        port = str(DEFAULT_PORT)
    if logged_port is not None:
        port = str(logged_port)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def logged_port(findings: Sequence[Finding]) -> int | None:
    """The port of the last address the launch logged it serves on (None: none logged, or
    not a port)."""
    for finding in reversed(findings):
        if finding.signature.id != SERVER_STARTING:
            continue
        try:
            port = urllib.parse.urlsplit(finding.captures.get("url", "")).port
        except ValueError:
            continue
        if port is not None and 0 < port < 65536:
            return port
    return None


def served_name(spec: LaunchSpec) -> str | None:
    """The model name the launch serves: --served-model-name's first, else the model."""
    named = spec.value("--served-model-name")
    return named.split()[0] if named else spec.model


def _call(url: str, body: dict[str, Any] | None, timeout: float) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={
        "Content-Type": "application/json"} if data is not None else {})
    try:
        with _OPENER.open(request, timeout=timeout) as answer:
            return answer.status, answer.read(MAX_ANSWER_BYTES)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(MAX_ANSWER_BYTES)


def probe(base: str, model: str, timeout: float = 10.0) -> Probes:
    """Ask the three questions once; each failure is kept with its reason."""
    errors: dict[str, str] = {}
    health = models = completion = None
    try:
        health, _ = _call(base + "/health", None, timeout)
    except (OSError, ValueError) as exc:
        errors["health"] = str(exc)
    try:
        status, body = _call(base + "/v1/models", None, timeout)
        if status == 200:
            models = tuple(str(m.get("id")) for m in json.loads(body).get("data", [])
                           if isinstance(m, dict))
        else:
            errors["models"] = f"answered {status}"
    except (OSError, ValueError, AttributeError) as exc:
        errors["models"] = str(exc)
    try:
        status, body = _call(base + "/v1/completions",
                             {"model": model, "prompt": "Hello", "max_tokens": 4}, timeout)
        if status == 200:
            choices = json.loads(body).get("choices") or [{}]
            completion = str(choices[0].get("text", ""))
        else:
            errors["completion"] = f"answered {status}"
    except (OSError, ValueError, AttributeError, IndexError) as exc:
        errors["completion"] = str(exc)
    return Probes(health, models, completion, errors)


def wait_healthy(base: str, deadline: float, interval: float = 0.2) -> bool:
    """Until `/health` answers 200 or the monotonic `deadline` passes."""
    while True:
        try:
            if _call(base + "/health", None, min(5.0, max(deadline - time.monotonic(), 0.1))
                     )[0] == 200:
                return True
        except (OSError, ValueError):
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)  # polling a server still starting, within the deadline


HEALTH_SECONDS = 30.0  # after the start line, for /health to answer
DRAIN_SECONDS = 2.0  # after the process died, for its last lines to be read
POLL_SECONDS = 0.2


def verify_launch(spec: LaunchSpec, findings: Callable[[], Sequence[Finding]],
                  alive: Callable[[], bool | None], start_seconds: float,
                  soak_seconds: float, base: str | None = None) -> Verdict:
    """Wait (at most `start_seconds`) for the launch to log that it serves, to log a fatal
    finding, or to die; then ask its server, and with MTP keep asking (the soak's traffic:
    vLLM logs draft acceptance only for intervals with requests) until a reading arrives or
    `soak_seconds` pass; then judge. `findings()` gives the launch's findings so far;
    `alive()` says whether its process runs (None: not known)."""
    deadline = time.monotonic() + start_seconds
    drain_until: float | None = None
    while True:
        seen = findings()
        if any(f.signature.id in READY_SIGNATURES or f.signature.fatal for f in seen):
            break
        now = time.monotonic()
        if drain_until is None and alive() is False:
            drain_until = now + DRAIN_SECONDS
        if now >= deadline or (drain_until is not None and now >= drain_until):
            break
        time.sleep(POLL_SECONDS)  # the launch is loading, within its deadline
    name = served_name(spec) or ""
    base = base or endpoint(spec, logged_port(seen))
    answers = Probes(errors={"health": "the launch never logged that it serves"})
    if any(f.signature.id in READY_SIGNATURES for f in seen):
        wait_healthy(base, time.monotonic() + HEALTH_SECONDS)
        soak_end = time.monotonic() + soak_seconds
        while True:
            answers = probe(base, name)
            if not spec.uses_mtp or time.monotonic() >= soak_end or any(
                    f.signature.id in ACCEPTANCE_READINGS for f in findings()):
                break
            time.sleep(POLL_SECONDS)  # the soak: vLLM logs a reading per interval
    return judge(findings(), answers, name, spec.uses_mtp)
