"""Secrets in a vLLM log never reach `logwatch scan`'s output, the daemon's socket events, or
the bytes of the DuckDB file: every masked form from test_redact on lines that match
signatures, so they land in evidence, captures, incident keys and explanations."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from logwatch.daemon.client import raw_subscription
from tests.conftest import ROOT
from tests.inprocess import logwatch
from tests.test_redact import FORMS as ALL_FORMS
from tests.test_redact import GH, HF

# one form to a line; a form whose value is on the next line gets a record of its own below
FORMS = [form for form in ALL_FORMS if "\n" not in form.text]
NEXT_LINE = "the password is" + "\n" + "hunter6-NEXT was refused"

URL_SECRET = "https://user:p@ss@word@hub.example.com/acme/model"
LINES = [
    "(APIServer pid=1) INFO 11-29 22:38:00 [api_server.py:1] vLLM server version 0.33.0, "
    f"serving model https://{GH}@github.com/acme/model-head",
    "(APIServer pid=1) INFO 11-29 22:38:00 [startup.py:75] non-default args: {'model_tag': "
    f"'/models/qwen-args', 'api_key': ['first-k3y', 'second-k3y'], 'hf_token': '{HF}', "
    "'port': 8000}",
    *(f"(EngineCore_DP0 pid=8) ERROR 11-29 22:38:01 [core.py:{100 + i}] RuntimeError: CUDA "
      f"error: marker-{i:03d} {form.text} (end-{i:03d})" for i, form in enumerate(FORMS)),
    "(EngineCore_DP0 pid=8) ERROR 11-29 22:38:02 [core.py:1100] EngineCore failed to start.",
    # the value on the line after the key: masked by its record, in every line shown
    "(EngineCore_DP0 pid=8) ERROR 11-29 22:38:02 [core.py:1099] RuntimeError: CUDA error: "
    "next-line-head login failed, " + NEXT_LINE.split("\n")[0],
    "(EngineCore_DP0 pid=8) ERROR 11-29 22:38:02 [core.py:1099]   "
    + NEXT_LINE.split("\n")[1],
    "(EngineCore_DP0 pid=8) ERROR 11-29 22:38:02 [core.py:1100] Traceback (most recent call "
    "last):",
    '(EngineCore_DP0 pid=8) ERROR 11-29 22:38:02 [core.py:1100]   File "/app/fetch.py", line '
    "7, in fetch",
    '(EngineCore_DP0 pid=8) ERROR 11-29 22:38:02 [core.py:1100]     session.get("https://'
    'user:p@ss@word@proxy.example.com:3128/frame-code")',
    "(EngineCore_DP0 pid=8) ERROR 11-29 22:38:02 [core.py:1100] ValueError: Invalid repository "
    f"ID or local directory specified: '{URL_SECRET}'.",
    "(EngineCore pid=8) ERROR 11-29 22:38:03 [core.py:900] Worker failed with error 'login "
    "failed: password='correct horse battery' at worker-error', please check the stack trace "
    "above for the root cause",
    # vLLM's JSON log format: the evidence is the line as written, quotes escaped
    '{"asctime": "2026-11-29 22:38:04,551", "levelname": "ERROR", "name": "vllm.v1.engine.core",'
    ' "processName": "EngineCore_DP0", "process": 4402, "message": "RuntimeError: CUDA error: '
    'json-line login password=\\"lunar orbit velvet\\" failed"}',
]
LOG = ("\n".join(LINES) + "\n").encode()
SECRETS = sorted({s for form in ALL_FORMS for s in form.secrets}
                 | {"p@ss@word", "ss@word", HF[3:], "first-k3y", "second-k3y"})
# Positive controls: text next to the secrets that must be found where the secrets are not,
# so a check that could not see strings in these bytes (compressed, encoded) fails instead.
MARKERS = [f"marker-{i:03d}" for i in range(len(FORMS))] + [
    f"end-{i:03d}" for i in range(len(FORMS))] + [
    "model-head", "qwen-args", "frame-code", "hub.example.com/acme/model", "worker-error",
    "json-line", "next-line-head"]


def expected_findings(library: Library) -> set[tuple[str, int]]:
    scanner = BlockScanner(Matcher(library.signatures), "x", datetime.now())
    return {(f.signature.id, f.lineno) for f in scanner.feed(LOG) + scanner.finish()}


def raw_database(db: Path) -> bytes:
    """The database file and its write-ahead log as bytes, after the writer has exited."""
    wal = db.with_name(db.name + ".wal")
    return db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def assert_no_secret(blob: bytes, where: str) -> None:
    leaked = [s for s in SECRETS if s.encode() in blob]
    assert not leaked, f"{where} holds {leaked}"


def assert_markers(blob: bytes, where: str, markers: list[str] = MARKERS) -> None:
    missing = [m for m in markers if m.encode() not in blob]
    assert not missing, f"{where} lacks the positive controls {missing}"


def recorded_findings(db: Path) -> set[tuple[str, int]]:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return {(s, n) for s, n in con.execute("SELECT signature, line FROM findings").fetchall()}
    finally:
        con.close()


def test_the_log_exercises_every_form(library: Library) -> None:
    """Each form's line is a finding, so each secret reaches evidence and captures."""
    found = expected_findings(library)
    for i in range(len(FORMS)):
        assert ("distributed.cuda_error", 3 + i) in found, FORMS[i].name
    assert ("distributed.cuda_error", len(LINES)) in found  # the JSON-format line
    for signature in ("lifecycle.version", "lifecycle.non_default_args", "model.not_found",
                      "engine.core_failed_to_start", "engine.worker_failed"):
        assert any(s == signature for s, _ in found), signature


@pytest.mark.slow
def test_scan_keeps_secrets_out_of_its_output_and_the_database(tmp_path: Path,
                                                               library: Library) -> None:
    log, db = tmp_path / "vllm.log", tmp_path / "history.duckdb"
    log.write_bytes(LOG)
    text = logwatch("scan", "--db", str(db), str(log))
    assert text.returncode == 1, text.stderr  # fatal incidents found
    as_json = logwatch("scan", "--json", str(log))
    assert as_json.returncode == 1, as_json.stderr
    report = json.loads(as_json.stdout)
    assert {c for i in report["incidents"] for c in i["captures"].values()}  # captures exist

    for name, blob in (("scan stdout", text.stdout), ("scan stderr", text.stderr),
                       ("scan --json stdout", as_json.stdout), ("the database", raw_database(db))):
        # the log's own path is no leak (under xdist it holds "popen-gw0", a short secret's text)
        assert_no_secret(blob.replace(str(tmp_path).encode(), b"<tmp>"), name)
    assert_markers(as_json.stdout, "scan --json stdout")
    assert_markers(raw_database(db), "the database")
    assert b"***" in text.stdout
    assert recorded_findings(db) == expected_findings(library)


@pytest.mark.slow
def test_the_daemon_keeps_secrets_out_of_events_and_the_database(tmp_path: Path,
                                                                 library: Library) -> None:
    db, sock, config = tmp_path / "live.duckdb", tmp_path / "run" / "lw.sock", tmp_path / "c.toml"
    config.write_text("")
    expected = expected_findings(library)
    proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--stdin", "--db",
                             str(db), "--socket", str(sock), "--config", str(config)], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None

    async def watch() -> list[bytes]:
        reader, writer = await raw_subscription(  # the bytes on the wire are checked
            sock, ["lines", "finding", "incident", "committed"], wait=60)
        assert proc.stdin is not None
        proc.stdin.write(LOG)
        proc.stdin.flush()
        raw: list[bytes] = []
        findings: set[tuple[str, int]] = set()
        committed: set[tuple[str, int]] = set()
        while findings != expected or not expected <= committed:
            line = await asyncio.wait_for(reader.readline(), 60)
            assert line, "the daemon closed the subscription early"
            raw.append(line)
            event: dict[str, Any] = json.loads(line)
            if event["event"] == "finding":
                findings.add((event["signature"], event["line"]))
            elif event["event"] == "committed":
                committed |= {(f["signature"], f["line"]) for f in event["findings"]}
        writer.close()
        return raw

    try:
        events = asyncio.run(watch())
    finally:  # closes stdin: at the end of its input the daemon settles, commits and exits
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    decoded = [json.loads(e) for e in events]
    lines_text = "".join(e["text"] for e in decoded if e["event"] == "lines").encode()
    captures = json.dumps([e["captures"] for e in decoded if e["event"] == "finding"],
                          ensure_ascii=False).encode()
    for name, blob in (("the raw events", b"".join(events)), ("lines events", lines_text),
                       ("finding captures", captures), ("daemon stdout", out),
                       ("daemon stderr", err), ("the database", raw_database(db))):
        assert_no_secret(blob, name)
    assert_markers(lines_text, "lines events")
    # the daemon stores the matched line of a finding; a traceback frame is in no capture
    matched_only = [m for m in MARKERS if m != "frame-code"]
    assert_markers(captures, "finding captures", matched_only)
    assert_markers(raw_database(db), "the database", matched_only)
    assert recorded_findings(db) == expected
