"""Verdicts an operator can trust: "healthy" is earned by evidence, a shutdown is not a crash, a
cut paste is not healthy, and the README's verdict table is the code's (core/report/verdict.py).

The property tests cut every failed sample after each of its lines and scan what is left: no
cut is healthy unless the server came up and the cut falls before the failure shows. Each
healthy sample is followed by a real vLLM 0.32.0 shutdown, teardown errors and all: never
failed."""

from __future__ import annotations

import gzip
import io
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.report.verdict import (
    FAILED,
    HEALTHY,
    INCOMPLETE,
    NO_VLLM_OUTPUT,
    RULES,
    UNRECOGNISED,
)
from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from logwatch.scan.offline import ScanInput, scan_inputs
from tests.conftest import ROOT, SAMPLES

README = ROOT / "README.md"
SIGINT = (SAMPLES / "real_032_sigint_teardown.log").read_text()


@pytest.fixture
def matcher(library: Library) -> Matcher:
    """One per test: a matcher counts its patterns' overruns and stops trying a signature
    that overran too often, which hundreds of scans on a loaded machine could reach."""
    return Matcher(library.signatures)


def scan(text: str | bytes, library: Library, matcher: Matcher) -> dict[str, Any]:
    data = text.encode() if isinstance(text, str) else text
    return scan_inputs([ScanInput("<stdin>", None, stream=True)], library,
                       stdin=io.BytesIO(data), matcher=matcher)


def sample_lines(log: Path) -> list[bytes]:
    """The log's lines, each with its newline (a line may hold a carriage return: vLLM 0.32
    writes them inside multi-line records)."""
    data = log.read_bytes()
    data = gzip.decompress(data) if log.suffix == ".gz" else data
    return [line + b"\n" for line in data.split(b"\n")[:-1]] + (
        [data.rsplit(b"\n", 1)[-1]] if not data.endswith(b"\n") else [])


def expected_verdict(log: Path) -> str:
    name = log.name.split(".log")[0]
    expect = tomllib.loads((log.parent / f"{name}.expect.toml").read_text(encoding="utf-8"))
    verdict: str = expect["verdict"]
    return verdict


SAMPLE_LOGS = sorted(p for p in SAMPLES.glob("*.log*") if not p.name.endswith(".toml"))
FAILED_SAMPLES = [p for p in SAMPLE_LOGS if expected_verdict(p) != HEALTHY]
HEALTHY_SAMPLES = [p for p in SAMPLE_LOGS if expected_verdict(p) == HEALTHY]


def test_the_readme_verdict_table_is_the_code() -> None:
    text = README.read_text(encoding="utf-8")
    table = text.split("<!-- verdict table -->")[1].split("<!-- /verdict table -->")[0]
    rows = [row for row in table.strip().splitlines()[2:]]
    got = [tuple(cell.strip() for cell in row.strip("|").split(" | ")) for row in rows]
    assert got == [(f"`{r.verdict}`", f"`{r.reason}`", r.evidence) for r in RULES]


def _line(level: str, message: str, pid: int = 4566) -> str:
    return f"(APIServer pid={pid}) {level} 12-04 19:07:10 [api_server.py:100] {message}\n"


def _up() -> str:
    """The real 0.32.0 server up to `Application startup complete.` (serving)."""
    lines = SIGINT.splitlines(keepends=True)
    end = next(n for n, ln in enumerate(lines) if "Application startup complete" in ln)
    return "".join(lines[:end + 1])


def _start_only() -> str:
    """The real 0.32.0 start-up before the weights load: no line says it came up."""
    lines = SIGINT.splitlines(keepends=True)
    end = next(n for n, ln in enumerate(lines) if "Starting to load model" in ln)
    return "".join(lines[:end + 1])


def _shutdown() -> str:
    """The real 0.32.0 Ctrl-C: `[shutdown]` lines, the teardown's EngineDeadError at ERROR."""
    lines = SIGINT.splitlines(keepends=True)
    start = next(n for n, ln in enumerate(lines) if "shutdown triggered" in ln)
    return "".join(lines[start:])


STATS = ("(APIServer pid=4566) INFO 12-04 19:07:20 [loggers.py:259] Engine 000: Avg prompt "
         "throughput: 61.0 tokens/s, Avg generation throughput: 12.4 tokens/s, Running: 2 reqs,"
         " Waiting: 0 reqs, GPU KV cache usage: 0.3%, Prefix cache hit rate: 0.0%\n")


@pytest.mark.parametrize(("text", "verdict", "reason"), [
    (_up(), HEALTHY, "serving"),
    (_up() + _shutdown(), HEALTHY, "serving"),
    (STATS, HEALTHY, "serving"),  # the middle of a busy server's log: its stats say it serves
    (_start_only(), INCOMPLETE, "never_came_up"),
    (_start_only() + _shutdown(), INCOMPLETE, "stopped_before_serving"),
    ("hello\nworld\n", NO_VLLM_OUTPUT, "no_vllm_output"),
    (_start_only() + _line("ERROR", "Zorblax planner gave up on shard 3"),
     UNRECOGNISED, "unrecognised_fatal"),
    (_up() + _line("ERROR", "Zorblax planner gave up on shard 3"), "errors", "errors"),
], ids=["up", "up-then-ctrl-c", "stats-only", "start-only", "stopped-starting", "not-vllm",
        "error-while-starting", "error-while-serving"])
def test_each_verdict_from_its_evidence(library: Library, matcher: Matcher, text: str,
                                        verdict: str, reason: str) -> None:
    report = scan(text, library, matcher)
    assert (report["verdict"], report["verdict_reason"]) == (verdict, reason)


def test_a_known_failure_and_a_cut_traceback(library: Library, matcher: Matcher) -> None:
    lines = (SAMPLES / "real_032_cpu_startup_failures.log").read_text().splitlines(True)
    narrow = next(n for n, ln in enumerate(lines) if "exceeds dimension size" in ln)
    known = scan("".join(lines[narrow - 30:narrow + 1]), library, matcher)
    assert (known["verdict"], known["verdict_reason"]) == (FAILED, "root_cause")
    cut = scan("".join(lines[narrow - 30:narrow]), library, matcher)  # its exception left out
    assert (cut["verdict"], cut["verdict_reason"]) == (FAILED, "cause_not_in_excerpt")
    root = cut["incidents"][cut["root_cause"]]
    assert root["captures"]["area"] == "weight_loading"


def _first_failure_line(report: dict[str, Any]) -> int:
    """The first line of the report's failure: the first sighting of a fatal incident or of
    one at error severity (an `errors` report has no fatal one)."""
    lines = [i["first_seen"]["line"] for i in report["incidents"]
             if i["fatal"] or i["severity"] in ("error", "critical")]
    return min(lines)


@pytest.mark.parametrize("log", FAILED_SAMPLES, ids=lambda p: p.name)
def test_no_cut_of_a_failed_sample_is_healthy_once_the_failure_shows(
        log: Path, library: Library, matcher: Matcher) -> None:
    """Cut after every line: a cut is healthy only where the server came up and the failure
    has not begun yet (a server that served, then crashed); never from the failure on, and
    never without the evidence that it came up."""
    lines = sample_lines(log)
    whole = scan(b"".join(lines), library, matcher)
    assert whole["verdict"] != HEALTHY
    failure = _first_failure_line(whole)
    for end in range(1, len(lines) + 1):
        report = scan(b"".join(lines[:end]), library, matcher)
        if report["verdict"] != HEALTHY:
            continue
        assert end < failure, f"{log.name}: healthy when cut after line {end}"
        assert report["launches"] and report["launches"][0]["served"], (log.name, end)


@pytest.mark.parametrize("log", HEALTHY_SAMPLES, ids=lambda p: p.name)
def test_a_healthy_sample_followed_by_its_shutdown_is_not_failed(
        log: Path, library: Library, matcher: Matcher) -> None:
    text = b"".join(sample_lines(log))
    report = scan(text + _shutdown().encode(), library, matcher)
    assert (report["verdict"], [i["signature"] for i in report["incidents"] if i["fatal"]]) \
        == (HEALTHY, [])


# -- user content is never evidence ---------------------------------------------------------

def _quoted(text: str) -> str:
    """A signature example's log text as a user would quote it: one line, headers and all."""
    return re.sub(r"\s*\n\s*", " ", text.strip()).replace("'", "\\'")


def test_a_busy_server_whose_prompts_quote_every_signature_is_healthy(
        library: Library, matcher: Matcher) -> None:
    """Request logging on (DEBUG): every example of every signature quoted in a prompt, a
    JSON body and a generated output, in the forms vLLM 0.32.0 logs them, between stats
    lines of a serving server; then a clean Ctrl-C. Healthy, and nothing from the quotes."""
    quotes = [_quoted(example.text) for signature in library.signatures
              for example in signature.examples]
    body = []
    for n, quote in enumerate(quotes):
        rid = f"chatcmpl-{n:05d}"
        body += [
            f"(APIServer pid=4566) DEBUG 12-04 19:07:10 [request_logger.py:55] Request {rid} "
            f"details: prompt: 'why does my log say: {quote}', prompt_token_ids: [1, 2], "
            "prompt_embeds shape: None.\n",
            f"(APIServer pid=4566) DEBUG 12-04 19:07:10 [request_logger.py:40] Request {rid} "
            f'JSON body: {{"model": "m", "messages": [{{"role": "user", "content": "{quote}"}}]}}'
            "\n",
            f"(APIServer pid=4566) INFO 12-04 19:07:10 [request_logger.py:65] Received request "
            f"{rid}: params: SamplingParams(n=1), lora_request: None.\n",
            f"(APIServer pid=4566) INFO 12-04 19:07:11 [logger.py:71] Generated response {rid}: "
            f"output: 'It means {quote}', output_token_ids: [3], finish_reason: stop\n",
            'INFO:     127.0.0.1:36750 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n',
        ]
        if n % 50 == 0:
            body.append(STATS)
    report = scan(_up() + "".join(body) + _shutdown(), library, matcher)
    loud = [(i["signature"], i["first_seen"]["line"]) for i in report["incidents"]
            if i["severity"] not in ("info",)]
    assert (report["verdict"], loud) == (HEALTHY, [])
