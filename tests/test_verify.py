"""Verifying a relaunch: the judgement over a launch's real findings, and the probes against a
real HTTP server on loopback."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from logwatch.core.remedy.verify import Probes, judge
from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.findings import Finding
from logwatch.core.signatures.library import Library
from logwatch.core.snapshot.argv import parse_launch
from logwatch.relaunch.verify import endpoint, logged_port, probe, served_name, wait_healthy
from logwatch.scan.blocks import read_blocks
from tests.conftest import SAMPLES, roomy_matcher

GOOD = Probes(200, ("/models/q",), "Hi!")


def findings(library: Library, text: str) -> list[Finding]:
    scanner = BlockScanner(roomy_matcher(library), "t", datetime(2026, 11, 30))
    found: list[Finding] = []
    for block in read_blocks(io.BytesIO(text.encode())):
        found += scanner.feed(block)
    return found + scanner.finish()


HEAD = "(APIServer pid=7) INFO 11-29 22:38:{s:02d} [{f}] "
STARTED = HEAD.format(s=10, f="launcher.py:50") + "Application startup complete.\n"
FLASHINFER = (HEAD.format(s=1, f="__init__.py:212")
              + "Using FlashInferCutlassNvFp4LinearKernel for NVFP4 GEMM\n")


def spec_line(rate: float) -> str:
    return (HEAD.format(s=30, f="metrics.py:101") + "SpecDecoding metrics: Mean acceptance "
            "length: 2.41, Accepted throughput: 300.00 tokens/s, Drafted throughput: 400.00 "
            "tokens/s, Accepted: 3000 tokens, Drafted: 4000 tokens, Per-position acceptance "
            f"rate: 0.850, 0.650, Avg Draft acceptance rate: {rate}%\n")


def test_a_healthy_relaunch_passes_every_check(library: Library) -> None:
    verdict = judge(findings(library, FLASHINFER + STARTED + spec_line(75.0)), GOOD,
                    "/models/q", uses_mtp=True)
    assert verdict.passed, verdict.failed
    assert {c.name for c in verdict.checks} == {
        "startup_complete", "health", "serves_model", "completion", "no_fatal_finding",
        "not_marlin", "draft_acceptance"}


def test_a_marlin_kernel_means_the_change_did_not_take_effect(library: Library) -> None:
    """The seed: "if gptq_marlin_repack still appears, the change did not take effect". The
    sample 0.33 start-up picks Marlin kernels although it serves."""
    text = (SAMPLES / "healthy_033_startup.log").read_text()
    verdict = judge(findings(library, text), GOOD, "/models/q", uses_mtp=False)
    (failed,) = verdict.failed
    assert failed.name == "not_marlin" and "did not take effect" in failed.why


def test_garbage_drafts_and_a_missing_start_fail(library: Library) -> None:
    verdict = judge(findings(library, FLASHINFER + spec_line(0.0)), GOOD, "/models/q",
                    uses_mtp=True)
    assert {c.name for c in verdict.failed} == {"startup_complete", "draft_acceptance"}


def test_a_wrong_model_or_no_answer_fails(library: Library) -> None:
    started = findings(library, FLASHINFER + STARTED)
    wrong = judge(started, Probes(200, ("/models/other",), "x"), "/models/q", uses_mtp=False)
    assert [c.name for c in wrong.failed] == ["serves_model"]
    silent = judge(started, Probes(None, None, None, {"health": "refused"}), "/models/q",
                   uses_mtp=False)
    assert {c.name for c in silent.failed} == {"health", "serves_model", "completion"}
    assert "refused" in silent.failed[0].why


class _Server(BaseHTTPRequestHandler):
    served = "/models/q"

    def do_GET(self) -> None:
        if self.path == "/health":
            self._answer(200, None)
        elif self.path == "/v1/models":
            self._answer(200, {"object": "list", "data": [{"id": self.served}]})
        else:
            self._answer(404, {"error": "no"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length))
        if self.path == "/v1/completions" and body.get("model") == self.served:
            self._answer(200, {"choices": [{"text": " world"}]})
        else:
            self._answer(404, {"error": f"model {body.get('model')} does not exist"})

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_probes_ask_a_real_server(server: str) -> None:
    import time

    assert wait_healthy(server, time.monotonic() + 5)
    assert probe(server, "/models/q") == Probes(200, ("/models/q",), " world", {})
    other = probe(server, "/models/other")
    assert other.completion is None and other.errors["completion"] == "answered 404"


def test_a_closed_port_is_no_answer_with_its_reason() -> None:
    import socket
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: refused
        base = f"http://127.0.0.1:{port}"
        got = probe(base, "m", timeout=2)
        assert got.health_status is None and "refused" in got.errors["health"].lower()
        assert not wait_healthy(base, time.monotonic() + 0.3, interval=0.05)


def test_the_endpoint_and_name_come_from_the_launchs_own_argv() -> None:
    spec = parse_launch(["vllm", "serve", "/models/q", "--host", "0.0.0.0", "--port", "8011",
                         "--served-model-name", "qwen", "alias"])
    assert endpoint(spec) == "http://127.0.0.1:8011" and served_name(spec) == "qwen"
    plain = parse_launch(["vllm", "serve", "/models/q", "--host", "::"])
    assert endpoint(plain) == "http://[::1]:8000" and served_name(plain) == "/models/q"


def test_the_port_is_the_one_vllm_logged_the_host_the_launchs_own(library: Library) -> None:
    """`--port 0`: vLLM names the port it bound in `Starting vLLM server on http://...`;
    the probes go there, on the launch's own --host: a log line never names the machine."""
    spec = parse_launch(["vllm", "serve", "/models/q", "--port", "0"])
    said = findings(library, HEAD.format(s=9, f="entry.py:80")
                    + "Starting vLLM server on http://evil.example:41234\n" + STARTED)
    assert logged_port(said) == 41234
    assert endpoint(spec, logged_port(said)) == "http://127.0.0.1:41234"
    older = findings(library, HEAD.format(s=9, f="api_server.py:1900")
                     + "Starting vLLM API server 0 on http://0.0.0.0:8123\n")
    assert logged_port(older) == 8123
    for url in ("http://0.0.0.0:99999", "http://0.0.0.0:x", "http://0.0.0.0"):
        bad = findings(library, HEAD.format(s=9, f="entry.py:80")
                       + f"Starting vLLM server on {url}\n")
        assert logged_port(bad) is None, url
