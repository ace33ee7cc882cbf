"""Never a false all-clear: failures no signature knows, input with no vLLM line, a child that
exits non-zero — each is reported as what it is, by the scan, `run` and the daemon alike."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from logwatch.cli.exit_codes import EXIT_FATAL_FOUND, EXIT_NO_VLLM_OUTPUT, EXIT_OK
from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.library import Library
from logwatch.scan.blocks import read_blocks
from tests.conftest import SAMPLES, roomy_matcher
from tests.following import Running
from tests.inprocess import logwatch_text

HEAD = "(EngineCore_DP0 pid=77) ERROR 11-20 08:00:12 [core.py:708] "
KEYERROR_LOG = "".join(HEAD + line + "\n" for line in (
    "EngineCore failed to start.",
    "Traceback (most recent call last):",
    '  File "/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 699, in '
    "run_engine_core",
    "    engine_core = EngineCoreProc(*args, **kwargs)",
    '  File "/venv/lib/python3.12/site-packages/vllm/zorblax/planner.py", line 41, in plan',
    "    return table[key]",
    '  File "/venv/lib/python3.12/site-packages/torch/_ops.py", line 9, in __getitem__',
    "    raise KeyError(key)",
    "KeyError: 'zorblax_slot_12'",
))


def scan_json(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = logwatch_text("scan", "--json", str(path), *extra)
    assert done.returncode in (EXIT_OK, EXIT_FATAL_FOUND, EXIT_NO_VLLM_OUTPUT), done.stderr
    return done.returncode, json.loads(done.stdout)


def root_of(report: dict[str, Any]) -> dict[str, Any]:
    assert report["root_cause"] is not None, report["incidents"]
    root: dict[str, Any] = report["incidents"][report["root_cause"]]
    return root


@pytest.mark.slow  # two scans, the first of this file's: it loads the library
def test_an_unknown_exception_is_an_unrecognised_fatal_error(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(KEYERROR_LOG)
    code, report = scan_json(log)
    assert code == EXIT_FATAL_FOUND and report["verdict"] == "unrecognised"
    root = root_of(report)
    # placed (core.signatures.placed): the innermost vLLM frame is in no area of vLLM; the
    # engine core's frame above it is
    assert root["signature"] == "engine.unrecognised_error" and root["fatal"]
    assert root["captures"] == {"exc_type": "KeyError", "message": "'zorblax_slot_12'",
                                "frame": "vllm/zorblax/planner.py:41 in plan",
                                "area": "engine",
                                "area_title": "the engine core and its workers"}
    assert root["processes"] == ["EngineCore_DP0"]
    text = " ".join(logwatch_text("scan", str(log)).stdout.split())  # wrapped at 80 columns
    assert ("unrecognised fatal error in the engine core and its workers (KeyError: "
            "'zorblax_slot_12')") in text
    assert "looks healthy" not in text


def test_enginecore_hit_an_exception_with_an_unknown_cause(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(HEAD + "EngineCore hit an exception.\n")
    code, report = scan_json(log)
    root = root_of(report)
    assert code == EXIT_FATAL_FOUND
    # 0.7.3-0.8.4's wording of "EngineCore failed to start": the engine's own signature,
    # a consequence whose cause no signature knows, and the launch failed
    assert (root["signature"], root["captures"]) == ("engine.core_failed_to_start",
                                                     {"what": "hit an exception"})
    assert report["verdict"] == "failed"


def test_a_process_death_is_fatal_and_exit_zero_is_not(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text("Process SpawnProcess-3 exited with code 0\n"
                   "(APIServer pid=5) INFO 11-20 08:00:01 [api_server.py:1] started\n"
                   "Zorblax helper 991 was killed\n")
    code, report = scan_json(log)
    assert code == EXIT_FATAL_FOUND
    assert [(i["signature"], i["captures"]) for i in report["incidents"]] == [
        ("generic.process_died", {"what": "was killed"})]


def test_an_error_line_before_the_server_came_up_is_the_root_cause(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    lines = [HEAD + f"Zorblax handshake failed on port {9000 + i}\n" for i in range(50)]
    log.write_text("".join(lines))
    code, report = scan_json(log)
    root = root_of(report)
    # the logger tag names the engine core's file: the error is placed there
    assert code == EXIT_FATAL_FOUND and root["signature"] == "engine.unrecognised_error_line"
    assert root["count"] == 50
    # fifty lines, one template, one group with the count
    assert [(g["template"], g["count"]) for g in report["unrecognised"]] == [
        ("Zorblax handshake failed on port <num>", 50)]


VERSION_LINE = ("(APIServer pid=1) INFO 03-01 20:10:30 [api_server.py:1896] vLLM API server "
                "version 0.9.1\n")


@pytest.mark.parametrize("level", ["ERROR", "CRITICAL"])
def test_an_error_line_that_names_no_error_word_is_not_healthy(tmp_path: Path,
                                                                level: str) -> None:
    # the level says it: "gave up" holds none of the words an error message usually does
    log = tmp_path / "vllm.log"
    log.write_text(VERSION_LINE + f"(APIServer pid=1) {level} 03-01 20:10:41 [frob.py:12] "
                                  "Zorblax planner gave up on shard 3\n")
    for mode in ("prefilter", "full"):
        code, report = scan_json(log, "--mode", mode)
        assert code == EXIT_FATAL_FOUND and report["verdict"] == "unrecognised", mode
        root = root_of(report)
        assert (root["signature"], root["fatal"], root["captures"]) == (
            "generic.error_line", True, {"message": "Zorblax planner gave up on shard 3"})
        assert [(g["template"], g["count"]) for g in report["unrecognised"]] == [
            ("Zorblax planner gave up on shard <num>", 1)]
    assert "looks healthy" not in logwatch_text("scan", str(log)).stdout


@pytest.mark.parametrize(("exception", "signature", "captures"), [
    ("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: zorblax",
     "engine.unrecognised_error",
     {"exc_type": "torch._dynamo.exc.BackendCompilerFailed",
      "message": "backend='inductor' raised: zorblax",
      "frame": "vllm/v1/engine/core.py:690 in run", "area": "engine",
      "area_title": "the engine core and its workers"}),
    ("KeyboardInterrupt", "engine.unrecognised_error_line",
     {"message": "KeyboardInterrupt", "area": "engine",
      "area_title": "the engine core and its workers"})])
@pytest.mark.parametrize("header", [True, False])
def test_a_traceback_ending_in_an_unusual_exception_is_not_healthy(
        tmp_path: Path, exception: str, signature: str, captures: dict[str, str],
        header: bool) -> None:
    """A traceback ending in an exception whose type ends in neither Error nor Exception
    (torch's BackendCompilerFailed) is the unrecognised exception; one the exception rule
    leaves alone (KeyboardInterrupt) is still an error when vLLM logs it at ERROR. Either
    was reported healthy, exit 0."""
    head = "(EngineCore_DP0 pid=8) ERROR 11-29 10:00:05 [core.py:700] " if header else ""
    log = tmp_path / "vllm.log"
    log.write_text(VERSION_LINE + "".join(head + line + "\n" for line in (
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/site-packages/vllm/v1/engine/core.py", line 690, in run',
        "    compile()", exception)))
    if not header and signature.endswith("_line"):  # printed to stderr: no level
        # an operator's Ctrl-C during the start-up: nothing wrong, but it never came up
        assert scan_json(log)[1]["verdict"] == "incomplete"
        return
    for mode in ("prefilter", "full"):
        code, report = scan_json(log, "--mode", mode)
        assert code == EXIT_FATAL_FOUND and report["verdict"] == "unrecognised", mode
        root = root_of(report)
        assert (root["signature"], root["captures"]) == (signature, captures)


@pytest.mark.parametrize(("line", "what"), [
    ("Fatal Python error: Segmentation fault", "Fatal Python error: Segmentation fault"),
    ("terminate called after throwing an instance of 'c10::Error'",
     "terminate called after throwing an instance of 'c10::Error'"),
    ("Aborted (core dumped)", "Aborted (core dumped)"),
    ("/usr/bin/bash: line 1:  4242 Killed                  vllm serve /models/q", "Killed"),
    ("*** SIGSEGV received at time=1732874400 on cpu 3 ***", "SIGSEGV received")])
def test_a_native_crash_is_not_healthy(tmp_path: Path, line: str, what: str) -> None:
    """A process that died in native code prints no traceback: the interpreter's report, a
    C++ terminate, a shell's job status or a signal handler's banner is all there is. Each
    was reported healthy, exit 0."""
    log = tmp_path / "vllm.log"
    log.write_text(VERSION_LINE + line + "\n")
    code, report = scan_json(log)
    assert code == EXIT_FATAL_FOUND and report["verdict"] == "unrecognised"
    root = root_of(report)
    assert (root["signature"], root["captures"]) == ("generic.process_died", {"what": what})


@pytest.mark.parametrize(("tail", "signature"), [
    (["    return self._call_impl(*args, **kwargs)"], "generic.uncaught_exception"),
    (['  File "/usr/lib/python3/site-packages/vllm/v1/worker/gpu_worker.py", line 240, in '
      "load_model", "    self.model_runner.load_model()"], "engine.unrecognised_error")])
def test_a_traceback_cut_at_its_head_is_not_healthy(tmp_path: Path, tail: list[str],
                                                    signature: str) -> None:
    """What a log's tail shows of a traceback (`kubectl logs --tail`, a rotated file): some
    frames and the exception, printed raw, its head cut off. It was reported healthy."""
    log = tmp_path / "vllm.log"
    log.write_text(VERSION_LINE + "\n".join([*tail, "RuntimeError: zorblax gave up"]) + "\n")
    for mode in ("prefilter", "full"):
        code, report = scan_json(log, "--mode", mode)
        assert code == EXIT_FATAL_FOUND and report["verdict"] == "unrecognised", mode
        root = root_of(report)
        assert (root["signature"], root["captures"]["exc_type"]) == (signature, "RuntimeError")


def test_indented_output_followed_by_plain_text_is_no_traceback(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(VERSION_LINE + "    Building wheel for zorblax (setup.py)\n"
                   "Zorblax Error count: 0\nRuntimeErrors seen: none\n")
    code, report = scan_json(log)
    assert code == EXIT_OK and [i["signature"] for i in report["incidents"]] == [
        "lifecycle.version"], report["incidents"]
    assert report["verdict"] == "incomplete"  # nothing wrong, nothing says it came up


ERROR_RECORDS = "".join(line + "\n" for line in (
    "(EngineCore_DP0 pid=8) ERROR 03-01 20:10:41 [frob.py:12] Zorblax planner gave up on:",
    "(EngineCore_DP0 pid=8) ERROR 03-01 20:10:41 [frob.py:12]   shard 3 (error budget spent)",
    "(EngineCore_DP0 pid=8) ERROR 03-01 20:10:41 [frob.py:12]   shard 5",
    "(APIServer pid=1) CRITICAL 03-01 20:10:43 [frob.py:40] Zorblax token "
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345 refused: " + "z" * 600,
    "(APIServer pid=1) ERROR 03-01 20:10:44 [serving.py:1] Received request cmpl-1: prompt: "
    "'Zorblax gave up'",
    "(APIServer pid=1) WARNING 03-01 20:10:45 [frob.py:12] Zorblax planner gave up on shard 4",
    "E0301 20:10:46.123456 77 frob.cc:12] Zorblax gave up",
    "E0301 20:10:47.123456 77 frob.cc:12] Frobnication failed on shard 6",
    "(EngineCore_DP0 pid=9) ERROR 03-01 20:10:48 [frob.py:20]     zorblax_frame(shard=3)",
))


def error_line_findings(library: Library, data: bytes, full: bool, block: int
                        ) -> list[tuple[int, int, int, dict[str, str]]]:
    matcher = roomy_matcher(library, "python")
    scanner = BlockScanner(matcher, "t", datetime(2026, 3, 2), full=full)
    found = [f for chunk in read_blocks(io.BytesIO(data), block_bytes=block)
             for f in scanner.feed(chunk)] + scanner.finish()
    return [(f.lineno, f.record_lineno, f.record_last_lineno, f.captures) for f in found
            if f.signature.id == "generic.error_line"]


def test_error_records_by_their_level_alone_in_both_scan_paths(library: Library) -> None:
    data = (VERSION_LINE + ERROR_RECORDS).encode()
    found = error_line_findings(library, data, full=True, block=1 << 20)
    # the record's first line, whatever its indented lines say; the message cut at 500
    # characters, its secret masked; a user's prompt, a warning and a glog line that says
    # no error word are not errors of vLLM (glog's E names no level word the prefilter sees),
    # nor is an indented line heading a record (a cut traceback: its head not at hand)
    assert [f[:3] for f in found] == [(2, 2, 4), (5, 5, 5), (9, 9, 9)]
    said = "Zorblax token hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345 refused: "
    assert found[1][3] == {"message": "Zorblax token *** refused: " + "z" * (500 - len(said))}
    assert found[2][3] == {"message": "Frobnication failed on shard 6"}
    for block in (64, 200, 4096):
        assert error_line_findings(library, data, full=False, block=block) == found, block


def test_a_lone_traceback_header_at_error_is_no_error_line(library: Library) -> None:
    # the traceback itself went to stderr: its exception is the finding, not the header
    stderr = KEYERROR_LOG.replace(HEAD, "").split("\n", 1)[1]  # from its Traceback line on
    data = (VERSION_LINE + "(APIServer pid=1) ERROR 03-01 20:10:41 [api_server.py:1800] "
            "Traceback (most recent call last):\n" + stderr).encode()
    for full in (True, False):
        matcher = roomy_matcher(library, "python")
        scanner = BlockScanner(matcher, "t", datetime(2026, 3, 2), full=full)
        found = scanner.feed(data) + scanner.finish()
        assert [(f.signature.id, f.lineno) for f in found if f.signature.severity != "info"] \
            == [("engine.unrecognised_error", 10)], full


def test_an_error_line_while_serving_is_an_error_not_a_failure(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text((SAMPLES / "healthy_033_startup.log").read_text()
                   + "(APIServer pid=1) ERROR 11-20 08:00:12 [serving.py:9] Zorblax request "
                     "17 failed\n"
                   + "(APIServer pid=1) ERROR 11-20 08:00:13 [serving.py:9] Zorblax request "
                     "18 gave up\n")
    code, report = scan_json(log)
    assert report["root_cause"] is None and report["verdict"] == "errors"
    assert code == EXIT_OK
    errors = [i for i in report["incidents"] if i["severity"] == "error"]
    assert [(i["signature"], i["fatal"], i["count"]) for i in errors] == [
        ("api_server.unrecognised_error_line", False, 2)]
    assert [g["template"] for g in report["unrecognised"]] == [
        "Zorblax request <num> failed", "Zorblax request <num> gave up"]


def test_warnings_with_a_traceback_are_not_failures(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    warn = "(APIServer pid=1) WARNING 11-20 08:00:12 [utils.py:9] "
    log.write_text(warn + "Traceback (most recent call last):\n"
                   + warn + '  File "/venv/vllm/x.py", line 3, in <module>\n'
                   + warn + "ModuleNotFoundError: No module named 'zorblax'\n")
    code, report = scan_json(log)
    assert code == EXIT_OK and report["incidents"] == []


def test_a_known_failure_grows_no_unrecognised_root_cause(tmp_path: Path) -> None:
    code, report = scan_json(SAMPLES / "demo_marlin_and_mtp.log")
    assert code == EXIT_FATAL_FOUND and report["verdict"] == "failed"
    roots = [report["incidents"][launch["root_cause"]]["signature"]
             for launch in report["launches"]]
    assert roots == ["weights.tensor_size_mismatch", "marlin.repack_tile_n"]
    generic = [i for i in report["incidents"] if i["signature"].startswith("generic.")]
    assert all(not i["fatal"] for i in generic), generic
    assert report["unrecognised"] == []


def test_a_second_unknown_error_beside_a_known_cause_is_demoted(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text((SAMPLES / "hard_wrapped_tile_k.log").read_text().rstrip("\n") + "\n"
                   + "Zorblax helper 991 was killed\n")
    _, report = scan_json(log, "--mode", "full")
    root = root_of(report)
    assert root["signature"] == "marlin.repack_tile_k"
    demoted = [i for i in report["incidents"] if i["signature"] == "generic.process_died"]
    assert len(demoted) == 1 and not demoted[0]["fatal"]


@pytest.mark.parametrize("content", [b"", b"root:x:0:0:root:/root:/bin/bash\n"
                                          b"daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n",
                                     b"-- No entries --\n"],
                         ids=["empty", "passwd", "journalctl-no-entries"])
def test_input_with_no_vllm_line_is_not_healthy(tmp_path: Path, content: bytes) -> None:
    log = tmp_path / "input"
    log.write_bytes(content)
    done = logwatch_text("scan", str(log))
    assert done.returncode == EXIT_NO_VLLM_OUTPUT == 3
    assert "No vLLM output recognised" in done.stdout and "healthy" not in done.stdout
    code, report = scan_json(log)
    assert code == 3 and report["verdict"] == "no_vllm_output"
    assert report["stats"]["vllm_output"] is False


def test_the_exit_code_is_named_in_help() -> None:
    done = logwatch_text("--help")
    assert "3 when no line of the input was written by vLLM" in " ".join(done.stdout.split())


REMOTE = next((p for p in ("/lib/systemd/systemd-journal-remote",
                           "/usr/lib/systemd/systemd-journal-remote") if Path(p).exists()), None)


@pytest.mark.slow
@pytest.mark.skipif(REMOTE is None or shutil.which("journalctl") is None,
                    reason="systemd-journal-remote / journalctl not installed")
def test_a_journal_with_no_vllm_and_an_empty_one(tmp_path: Path) -> None:
    from tests.test_journald import append, export_entry

    journal = tmp_path / "j" / "other.journal"
    journal.parent.mkdir()
    append(journal, [export_entry("Accepted publickey for alice from 10.0.0.2", 1_700 * 10**12),
                     export_entry("pam_unix(sshd:session): session opened", 1_701 * 10**12)])
    for selector in ([], ["-u", "vllm-absent.service"]):  # some entries, then none at all
        text = subprocess.run(["journalctl", "--file", str(journal), "-o", "short-iso",
                               "--no-pager", *selector], capture_output=True, check=False,
                              timeout=60).stdout
        done = logwatch_text("scan", "-", stdin=text)
        assert done.returncode == EXIT_NO_VLLM_OUTPUT, (selector, text, done.stdout)
        assert "No vLLM output recognised" in done.stdout


@pytest.mark.slow
def test_run_with_a_child_that_exits_3_printing_nothing_known(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    child = tmp_path / "child.py"
    child.write_text("import sys\nprint('warming the zorblax')\nsys.exit(3)\n")
    done = subprocess.run([sys.executable, "-m", "logwatch", "run", "--db", str(db), "--quiet",
                           "--gpu-capability", "9.0", "--", sys.executable, str(child)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3, done.stderr
    assert "root cause: unrecognised fatal error (exit status 3)" in done.stderr
    assert "looks healthy" not in done.stderr
    con = duckdb.connect(str(db), read_only=True)
    try:
        launch = con.execute("SELECT outcome, exit_code, root_signature, root_cause "
                             "FROM launches").fetchall()
        incidents = con.execute("SELECT id, signature, fatal, root_cause FROM incidents"
                                ).fetchall()
    finally:
        con.close()
    assert [row[:3] for row in launch] == [("failed", 3, "generic.exit_status")]
    assert [(i[1], i[2], i[3]) for i in incidents] == [("generic.exit_status", True, True)]
    assert incidents[0][0] == launch[0][3]


@pytest.mark.slow
def test_daemon_status_says_a_source_gave_no_vllm_output(tmp_path: Path) -> None:
    log = tmp_path / "other.log"
    log.write_text("root:x:0:0:root:/root:/bin/bash\n")
    daemon = Running("--file", str(log), "--db", str(tmp_path / "h.duckdb"),
                     sock=tmp_path / "lw.sock")
    try:
        daemon.wait_status(lambda st: st["lines"] >= 1 and st["sources"]
                           and st["sources"][0]["vllm_output"] is False, 60,
                           "the line read, no vLLM output")
        with log.open("a") as out:
            out.write(HEAD + "EngineCore hit an exception.\n")
        daemon.wait_status(lambda st: st["sources"][0]["vllm_output"] is True, 60,
                           "the vLLM line recognised")
    finally:
        assert daemon.stop() == 0, daemon.stderr


def test_an_unknown_exception_while_serving_is_an_error_not_a_failure(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    serving = "(APIServer pid=1) ERROR 11-20 08:00:12 [serving_chat.py:9] "
    started = (SAMPLES / "healthy_033_startup.log").read_text().splitlines(keepends=True)
    log.write_text("".join(started[:40]) + "".join(serving + line + "\n" for line in (
            "Error in preprocessing prompt inputs",
            "Traceback (most recent call last):",
            '  File "/venv/vllm/entrypoints/openai/serving_chat.py", line 9, in create',
            "ZorblaxError: prompt 17 has no zorblax")))
    code, report = scan_json(log)
    [launch] = report["launches"]
    assert report["root_cause"] is None and report["verdict"] == "errors", report["launches"]
    assert code == EXIT_OK and launch["outcome"] == "serving"
    [exc] = [i for i in report["incidents"] if i["signature"] == "api_server.unrecognised_error"]
    assert not exc["fatal"] and exc["captures"]["exc_type"] == "ZorblaxError"


@pytest.mark.slow
@pytest.mark.parametrize("case", ["unknown-failures", "known-failure-and-a-kill",
                                  "error-lines-without-an-error-word"])
def test_the_daemon_and_the_scan_agree_on_unrecognised_failures(
        tmp_path: Path, library: Library, case: str) -> None:
    from logwatch.scan.offline import resolve_inputs, scan_inputs
    from logwatch.scan.triage import SnapshotOptions
    from logwatch.store.db import open_store
    from logwatch.store.record import ScanRecorder
    from tests.test_live_model import InProcessDaemon, _summary, settled

    log = tmp_path / "vllm.log"
    if case == "unknown-failures":  # launch 2 never came up: its ERROR lines are the cause
        log.write_bytes((SAMPLES / "unrecognised_frobnicate.log").read_bytes())
        launches, failed = 3, 2
    elif case == "error-lines-without-an-error-word":  # a launch before: the level says it
        log.write_text((VERSION_LINE + ERROR_RECORDS).replace("03-01 20:", "11-20 07:")
                       + (SAMPLES / "unrecognised_frobnicate.log").read_text())
        launches, failed = 4, 2
    else:  # the kill is demoted: the Marlin error explains the launch
        log.write_text((SAMPLES / "demo_marlin_and_mtp.log").read_text()
                       + "Zorblax helper 991 was killed\n")
        launches, failed = 2, 2
    recorder = ScanRecorder()
    report = scan_inputs(resolve_inputs([str(log)]), library, recorder=recorder,
                         snapshot_options=SnapshotOptions())
    with open_store(tmp_path / "scan.duckdb") as store:
        recorder.write(store, report)
    running = InProcessDaemon(tmp_path, log, library)
    try:
        settled(running, launches=launches, failed=failed)
    finally:
        running.stop()
    live, scan = _summary(tmp_path / "h.duckdb"), _summary(tmp_path / "scan.duckdb")
    assert live == scan
    generic = [row for row in scan["incidents"] if row[1].startswith("generic.")]
    # the exception is placed by its frames in the model's code (core.signatures.placed)
    if case == "unknown-failures":
        assert [row[3] for row in scan["launches"]] == [
            "model.unrecognised_error", "generic.error_line", "generic.process_died"]
    elif case == "error-lines-without-an-error-word":
        assert [row[3] for row in scan["launches"]] == [
            "generic.error_line", "model.unrecognised_error", "generic.error_line",
            "generic.process_died"]
        assert [row[3] for row in generic if row[0] == 1] == [3]  # the three records
    else:
        assert [(row[1], row[4], row[5]) for row in generic] == [
            ("generic.process_died", False, False)]
