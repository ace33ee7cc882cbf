"""Nothing hostile reaches a terminal: escape sequences from log lines and file names are shown
(`^[`, `\\x9b`, `\\u202e`) in every text output, and escaped in every JSON output, across
scan, sql (table, CSV, JSON), history, status, error messages, the daemon's console log and
the metrics; on pipes and on a pseudo-terminal, where colours and console logging switch on."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import pty
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from logwatch.daemon.client import request, wait_ready
from tests.conftest import ROOT, free_port, read_pty
from tests.inprocess import Completed, logwatch_text

# What a log line can carry: every one of these does something to a terminal that obeys it.
PAYLOAD = ("\x1b]52;c;cm0gLXJmIH4K\x07"  # OSC 52: write the clipboard
           "\x1b]0;pwned\x1b\\"  # OSC 0: the window title
           "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\"  # OSC 8: a hyperlink
           "\x1bP$q\"p\x1b\\"  # DCS: a terminal query
           "\x90$qm\x9c"  # 8-bit DCS
           "\x9d0;c1\x9c"  # 8-bit OSC
           "\x9b6n"  # C1 CSI: ask for the cursor position (the answer lands in the shell)
           "\x1b[6n"  # the same in 7 bits
           "\u202eexe.txt")  # right-to-left override
FORBIDDEN = ("\x1b", "\x9b", "\x07", "\x90", "\x9c", "\x9d", "\u202e")
SHOWN = "^[]52;c;cm0gLXJmIH4K^G"  # the visible form of the OSC 52 above
FILE_NAME = "vllm\x1b]0;title\x07\x9b6n\u202e.log"
FILE_SHOWN = "vllm^[]0;title^G\\x9b6n\\u202e.log"
# A model path on the command line: it reaches the configuration snapshot.
MODEL = "/models/m\x1b]0;t\x07\x9b6n\u202e"
MODEL_SHOWN = "/models/m^[]0;t^G\\x9b6n\\u202e"
# Table cells are clipped at 48 characters: this query shows the payload first.
PAYLOAD_FIRST = ("SELECT substr(text, strpos(text, '/models/')) AS text FROM findings "
                 "WHERE text LIKE '%/models/%'")
# Colours and line erasing are what logwatch itself writes to a terminal.
OWN_SEQUENCES = re.compile(r"\x1b\[[0-9;]*[mK]")


def hostile_log() -> str:
    return "\n".join([
        "2026-06-02T09:00:01.000000Z (APIServer pid=11) INFO 06-02 09:00:01 "
        "[api_server.py:1896] vLLM API server version 0.11.0",
        # the payload inside a capture: it reaches captures, evidence and the explanation
        "2026-06-02T09:00:02.000000Z (APIServer pid=11) ERROR 06-02 09:00:02 [api_server.py:1] "
        f"ValueError: Invalid repository ID or local directory specified: '/models/{PAYLOAD}'.",
        # a carriage return hiding what came before, and the payload after the message
        f"\x1b]0;cr\x07hidden\r2026-06-02T09:00:03.000000Z (Worker_TP0 pid=61) ERROR 06-02 "
        "09:00:03 [multiproc_executor.py:702] torch.OutOfMemoryError: CUDA out of memory. "
        f"Tried to allocate 1.75 GiB. {PAYLOAD}",
    ]) + "\n"


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / FILE_NAME
    path.write_text(hostile_log(), encoding="utf-8")
    return path


def cli(*args: str | Path) -> Completed[str]:
    return logwatch_text(*map(str, args))


def assert_clean(text: str, shown: Sequence[str] = (SHOWN,)) -> None:
    """No raw control sequence, and the visible form there (so the check could fail)."""
    raw = [repr(c) for c in FORBIDDEN if c in text]
    assert not raw, f"raw {', '.join(raw)} in output:\n{text[:3000]!r}"
    for piece in shown:
        assert piece in text, f"{piece!r} not in output:\n{text[:3000]}"


def on_pty(*args: str | Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a pseudo-terminal; (exit code, what it showed)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "logwatch", *map(str, args)], cwd=ROOT,
                            stdout=slave, stderr=slave, stdin=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})
    os.close(slave)
    seen = read_pty(master)  # until the child closes its side
    return proc.wait(timeout=120), seen.decode("utf-8", errors="replace")


def test_scan_text_shows_payload_and_file_name(log: Path) -> None:
    out = cli("scan", log, "--cmdline", f"vllm serve {MODEL}")
    assert out.returncode == 1, out.stderr  # fatal incidents found
    assert_clean(out.stdout, [SHOWN, FILE_SHOWN, "\\x9b6n", "\\u202eexe.txt", "^[P$q",
                              f"model {MODEL_SHOWN}"])
    assert "ROOT CAUSE" in out.stdout and "CUDA out of memory" in out.stdout


@pytest.mark.slow
def test_scan_on_a_terminal_obeys_only_its_own_colours(log: Path) -> None:
    code, seen = on_pty("scan", log, env={"LOGWATCH_PROGRESS_AFTER": "0"})
    assert code == 1, seen
    assert "\x1b[1;4m" in seen  # colours are on: the TTY path ran
    assert_clean(OWN_SEQUENCES.sub("", seen), [SHOWN, FILE_SHOWN])


def test_scan_json_escapes_and_keeps_the_values(log: Path) -> None:
    out = cli("scan", "--json", log)
    assert out.returncode == 1, out.stderr
    assert_clean(out.stdout, ["\\u001b]52;c;", "\\u009b6n", "\\u202eexe.txt"])
    report = json.loads(out.stdout)
    model = next(i for i in report["incidents"] if i["signature"] == "model.not_found")
    assert model["first_seen"]["source"] == str(log)
    assert PAYLOAD.replace("\x1b[6n", "") in model["captures"]["model"]  # CSI colour: stripped


def test_scan_input_errors_quote_the_name_visibly(tmp_path: Path) -> None:
    out = cli("scan", tmp_path / FILE_NAME)
    assert out.returncode == 2
    assert_clean(out.stderr, [FILE_SHOWN, "no such file"])


@pytest.mark.slow
def test_history_sql_and_status_show_database_values_visibly(log: Path, tmp_path: Path
                                                            ) -> None:
    db = tmp_path / "h.duckdb"
    scanned = cli("scan", "--db", db, log, "--cmdline", f"vllm serve {MODEL}")
    assert scanned.returncode == 1 and "recorded in" in scanned.stderr, scanned.stderr
    query = "SELECT f.text, s.label FROM findings f JOIN sources s ON s.id = f.source_id"
    # table cells are clipped at 48 characters: show the payload and the file name first
    table = cli("sql", "--db", db, "--socket", tmp_path / "none.sock",
                "SELECT substr(f.text, strpos(f.text, '/models/')) AS text, "
                "parse_filename(s.label) AS label FROM findings f "
                "JOIN sources s ON s.id = f.source_id WHERE f.text LIKE '%/models/%'")
    assert table.returncode == 0, table.stderr
    assert_clean(table.stdout, ["/models/" + SHOWN, FILE_SHOWN])
    wide = cli("sql", "--db", db, "--socket", tmp_path / "none.sock",
               "SELECT captures, explanation FROM incidents WHERE signature = 'model.not_found'")
    assert_clean(wide.stdout, ["^[]52;c"])
    named = cli("sql", "--db", db, "--socket", tmp_path / "none.sock",
                "SELECT 1 AS \"col\x1b]0;x\x07\"")
    assert_clean(named.stdout, ["col^[]0;x^G"])

    as_csv = cli("sql", "--db", db, "--socket", tmp_path / "none.sock", "--csv", query)
    assert as_csv.returncode == 0, as_csv.stderr
    assert_clean(as_csv.stdout, [SHOWN, FILE_SHOWN])
    rows = list(csv.reader(io.StringIO(as_csv.stdout)))
    assert rows[0] == ["text", "label"] and len(rows) == 4  # still CSV: a header, 3 findings
    assert any(SHOWN in row[0] for row in rows[1:])

    as_json = cli("sql", "--db", db, "--socket", tmp_path / "none.sock", "--json", query)
    assert as_json.returncode == 0, as_json.stderr
    assert_clean(as_json.stdout, ["\\u001b]52;c;", "\\u009b6n", "\\u202e"])
    values = json.loads(as_json.stdout)["rows"]
    assert {r["label"] for r in values} == {str(log)}  # the stored value, recovered
    assert any("\x1b]52;c;cm0gLXJmIH4K\x07" in r["text"] for r in values)

    history = cli("history", "--db", db)
    assert history.returncode == 0, history.stderr
    assert_clean(history.stdout, ["model.not_found", MODEL_SHOWN])
    status = cli("status", "--db", db, "--socket", tmp_path / "none.sock")
    assert status.returncode == 3 and "no daemon running" in status.stdout

    failed = cli("sql", "--db", db, "--socket", tmp_path / "none.sock",
                 f"SELECT '{PAYLOAD}' FROM no_such_table")
    assert failed.returncode == 2
    assert_clean(failed.stderr, ["no_such_table"])


@pytest.mark.slow
def test_sql_table_on_a_terminal(log: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    assert cli("scan", "--db", db, log).returncode == 1
    code, seen = on_pty("sql", "--db", db, "--socket", tmp_path / "none.sock",
                        PAYLOAD_FIRST)
    assert code == 0, seen
    assert_clean(seen, ["^[]52;c;"])


@dataclass
class Daemon:
    proc: subprocess.Popen[bytes]
    sock: Path
    db: Path
    port: int
    console: list[bytes]
    reader: threading.Thread

    def stop(self) -> str:
        """Stop it; everything it wrote to its terminal."""
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=30)
        self.reader.join(timeout=30)
        return b"".join(self.console).decode("utf-8", errors="replace")


@pytest.fixture
def daemon(log: Path, tmp_path: Path) -> Daemon:
    """A daemon following the hostile file, its stdout and stderr on a pseudo-terminal (the
    console log), with a control socket and metrics; returned once the findings committed."""
    db, sock, port = tmp_path / "d.duckdb", tmp_path / "run" / "lw.sock", free_port()
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--file", str(log),
                             "--db", str(db), "--socket", str(sock),
                             "--metrics", f"127.0.0.1:{port}"], cwd=ROOT,
                            stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    console: list[bytes] = []
    reader = threading.Thread(target=lambda: console.append(read_pty(master)), daemon=True)
    reader.start()
    running = Daemon(proc, sock, db, port, console, reader)
    try:
        asyncio.run(wait_ready(sock, 30, alive=lambda: proc.poll() is None))
    except OSError:
        pytest.fail(f"daemon did not come up: {running.stop()}")
    deadline = time.monotonic() + 30
    while True:
        st = asyncio.run(request(sock, "status"))["status"]
        if st["lines"] >= 3 and st["findings_recorded"] >= 2 and not st["pending"]:
            break
        if time.monotonic() > deadline:
            pytest.fail(f"the findings were not committed: {running.stop()}")
        time.sleep(0.1)
    return running


@pytest.mark.slow
def test_daemon_status_sql_metrics_and_console(daemon: Daemon, log: Path) -> None:
    try:
        status = cli("status", "--socket", daemon.sock)
        # exit 1: the hostile log's launch failed (model not found)
        assert status.returncode == 1 and "daemon running" in status.stdout, status.stderr
        assert_clean(status.stdout, [f"file:{log.parent.resolve()}/{FILE_SHOWN}"])
        as_json = cli("status", "--socket", daemon.sock, "--json")
        assert_clean(as_json.stdout, ["\\u001b]0;title\\u0007"])
        state = json.loads(as_json.stdout)
        assert state["sources"][0]["name"] == f"file:{log.resolve()}"

        for fmt in ([], ["--csv"]):
            out = cli("sql", "--socket", daemon.sock, *fmt, PAYLOAD_FIRST)
            assert out.returncode == 0, out.stderr
            assert_clean(out.stdout, ["^[]52;c;"])
        out = cli("sql", "--socket", daemon.sock, "--json", "SELECT text FROM findings")
        assert_clean(out.stdout, ["\\u001b]52;c;"])
        rows = json.loads(out.stdout)["rows"]
        assert any(PAYLOAD.replace("\x1b[6n", "") in r["text"] for r in rows)
        failed = cli("sql", "--socket", daemon.sock, f"SELECT '{PAYLOAD}' FROM no_such_table")
        assert failed.returncode == 2
        assert_clean(failed.stderr, ["no_such_table"])

        with urllib.request.urlopen(f"http://127.0.0.1:{daemon.port}/metrics", timeout=5) as r:
            metrics = r.read().decode("utf-8")
        assert_clean(metrics, [f'source="file:{log.parent.resolve()}/'
                               + FILE_SHOWN.replace("\\", "\\\\") + '"'])
    finally:
        console = daemon.stop()
    assert "started" in console  # the console log ran on the terminal
    assert_clean(OWN_SEQUENCES.sub("", console), ["vllm^[]0;title^G"])


HOSTILE_SIGNATURE = '''id = "site.hostile"
version = 1
status = "experimental"
severity = "warning"
fatal = false
category = "lifecycle"
title = "Hostile \\u001b]0;sig\\u0007 title \\u009b6n \\u202e"
vllm_versions = "all"
remedy = "none"
explanation = """
Something odd: {thing}."""

[[patterns]]
regex = \'\'\'frobnicator failed: (?P<thing>\\S+)\'\'\'
literals = ["frobnicator failed: "]

[[examples]]
text = \'\'\'ERROR frobnicator failed: widget\'\'\'
captures = { thing = "widget" }

[[counter_examples]]
text = \'\'\'INFO frobnicator ok\'\'\'
'''


def test_signature_commands_and_library_errors(tmp_path: Path) -> None:
    site = tmp_path / "site" / "site"
    site.mkdir(parents=True)
    (site / "hostile.toml").write_text(HOSTILE_SIGNATURE, encoding="utf-8")
    title = "Hostile ^[]0;sig^G title \\x9b6n \\u202e"
    for action in (["list"], ["show", "site.hostile"]):
        out = cli("signatures", "--signatures", site.parent, *action)
        assert out.returncode == 0, out.stderr
        assert_clean(out.stdout, [title])
    broken = tmp_path / "broken" / "site"
    broken.mkdir(parents=True)
    (broken / "bad\x1b]0;t\x07.toml").write_text("id = 1\n", encoding="utf-8")
    out = cli("signatures", "--signatures", broken.parent, "list")
    assert out.returncode == 2 and "did not load" in out.stderr
    assert_clean(out.stderr, ["bad^[]0;t^G.toml"])


def test_snapshot_show_and_diff(tmp_path: Path) -> None:
    shown = cli("snapshot", "show", "--cmdline", f"vllm serve {MODEL}")
    assert shown.returncode == 0, shown.stderr
    assert_clean(shown.stdout, [MODEL_SHOWN])
    as_json = cli("snapshot", "show", "--json", "--cmdline", f"vllm serve {MODEL}")
    assert_clean(as_json.stdout, ["\\u001b]0;t\\u0007"])
    assert MODEL in json.loads(as_json.stdout)["argv"]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"hash": "a\x1b]0;x\x07", "launch": {"k\x1b]0;y\x07": 1}}))
    b.write_text(json.dumps({"hash": "b", "launch": {"k\x1b]0;y\x07": 2}}))
    diff = cli("snapshot", "diff", a, b)
    assert diff.returncode == 1, diff.stderr
    assert_clean(diff.stdout, ["a^[]0;x^G -> b", "launch.k^[]0;y^G: 1 -> 2"])


def test_metric_labels_show_control_characters() -> None:
    from logwatch.daemon.metrics import render

    text = render([("logwatch_lines_read_total", {"source": f"file:/x/{FILE_NAME}\n\"\\"}, 3)])
    assert_clean(text, ['{source="file:/x/vllm^[]0;title^G\\\\x9b6n\\\\u202e.log\\n\\"\\\\"} 3'])


def test_progress_label_is_shown_visibly() -> None:
    from logwatch.scan.progress import Progress

    assert Progress(io.StringIO(), label=f"scanning {FILE_NAME}").label == (
        f"scanning {FILE_SHOWN}")


def test_the_json_report_written_in_pieces_is_the_text_json_dumps_gives(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`scan --json` writes its report as it is encoded (a backlog's is hundreds of MB):
    the same text, controls escaped the same way wherever a piece ends."""
    from logwatch.cli.scan_command import JSON_PIECE, write_json
    from logwatch.core.safe_text.visible import json_escaped

    evil = "\u202e\x7f\x9b"
    report = {"launches": [{"text": ("x" * (JSON_PIECE // 3 - n)) + evil * 3}
                           for n in range(7)], "stats": {"lines": 3}}
    write_json(report)
    out = capsys.readouterr().out
    lines = [json.dumps(item, ensure_ascii=False) for item in report["launches"]]
    assert out == json_escaped('{\n  "launches": [\n    ' + ",\n    ".join(lines)
                               + '\n  ],\n  "stats": {"lines": 3}\n}') + "\n"
    assert json.loads(out) == report and "\u202e" not in out
