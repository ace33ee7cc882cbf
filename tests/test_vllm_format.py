"""The line grammar: wrappers, colour, vLLM headers of every era, and year inference."""

from __future__ import annotations

from datetime import datetime

import pytest

from logwatch.core.lines.normalize import strip_colour, terminal_text, unwrap
from logwatch.core.lines.vllm_format import (
    parse_line,
    parse_sibling,
    plain_header,
    process_role,
    rank_of,
)
from logwatch.core.lines.year_inference import closest_datetime

REF = datetime(2026, 11, 29, 23, 0, 0)


def parse(text: str, reference: datetime = REF):  # type: ignore[no-untyped-def]
    return parse_line("t", 1, text, reference)


@pytest.mark.parametrize(
    ("line", "process", "pid", "rank"),
    [
        ("(APIServer pid=12345) INFO 11-29 22:38:00 [launcher.py:188] x", "APIServer", 12345, None),
        ("(EngineCore pid=7) INFO 11-29 22:38:00 [core.py:1] x", "EngineCore", 7, None),
        ("(EngineCore_DP0 pid=7) INFO 11-29 22:38:00 [core.py:1] x", "EngineCore_DP0", 7, "DP0"),
        ("(EngineCore_0 pid=7) INFO 11-29 22:38:00 [core.py:1] x", "EngineCore_0", 7, None),
        ("(Worker pid=8) INFO 11-29 22:38:00 [w.py:1] x", "Worker", 8, None),
        ("(Worker_TP0 pid=8) INFO 11-29 22:38:00 [w.py:1] x", "Worker_TP0", 8, "TP0"),
        ("(Worker_PP1_TP3 pid=8) INFO 11-29 22:38:00 [w.py:1] x", "Worker_PP1_TP3", 8, "PP1_TP3"),
        ("(VllmWorker rank=2 pid=9) INFO 11-29 22:38:00 [w.py:1] x", "VllmWorker", 9, "2"),
        ("(VllmWorkerProcess pid=235) ERROR 08-05 23:29:38 multiproc_worker_utils.py:226] x",
         "VllmWorkerProcess", 235, None),
        ("(MainProcess pid=1) INFO 11-29 22:38:00 [__init__.py:216] x", "MainProcess", 1, None),
        ("(Worker pid=194) (Worker_TP1 pid=194) INFO 11-29 22:38:00 [w.py:1] x", "Worker_TP1",
         194, "TP1"),
        ("(EngineCore_DP0) ERROR 11-29 22:38:00 [core.py:1] x", "EngineCore_DP0", None, "DP0"),
        ("(StageEngineCoreProc_stage0_replica0 pid=3) INFO 11-29 22:38:00 [c.py:1] x",
         "StageEngineCoreProc_stage0_replica0", 3, None),
    ],
)
def test_process_prefixes(line: str, process: str, pid: int | None, rank: str | None) -> None:
    parsed = parse(line)
    assert (parsed.kind, parsed.process, parsed.pid, parsed.rank, parsed.message) == (
        "vllm", process, pid, rank, "x")


@pytest.mark.parametrize(
    ("line", "file", "lineno"),
    [
        ("INFO 11-29 22:38:00 [core.py:936] m", "core.py", 936),
        ("INFO 11-29 22:38:00 engine.py:366] m", "engine.py", 366),
        ("DEBUG 11-29 22:38:00 [v1/executor/multiproc_executor.py:857] m",
         "v1/executor/multiproc_executor.py", 857),
        ("ERROR 11-29 22:38:00 [core.py:825[] m", "core.py", 825),
        ("INFO 11-29 22:38:00 [model_executor/.../quantization/utils/fp8_utils.py:12] m",
         "model_executor/.../quantization/utils/fp8_utils.py", 12),
    ],
)
def test_logger_tags(line: str, file: str, lineno: int) -> None:
    parsed = parse(line)
    assert (parsed.logger_file, parsed.logger_line, parsed.message) == (file, lineno, "m")


@pytest.mark.parametrize(
    ("line", "wrapper"),
    [
        ("vllm1-1  | (APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m", "docker-compose"),
        ("2026-05-12T08:01:39.331095044Z (APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m",
         "timestamp"),
        ("Aug 18 14:15:04 host python3[28059]: (APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m",
         "journald"),
        ("Okt 18 14:15:04 host vllm[1]: (APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m",
         "journald"),
        ("  | [2025-03-10T15:07:20Z] (APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m",
         "ci-gutter"),
        ("[rank0]: (APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m", "torch-rank"),
        ("│ (APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m            │", "kubectl"),
        ("[pod/vllm-7f9c6d5b8-x2x4k/vllm] (APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m",
         "kubectl"),
        ("2026-05-12T08:01:39.331095044Z stderr F (APIServer pid=1) INFO 11-29 22:38:00 "
         "[a.py:1] m", "cri"),
        ('{"log":"(APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m\\n","stream":"stderr",'
         '"time":"2026-05-12T08:01:39.331095044Z"}', "docker-json"),
        ("2026-05-12T08:01:39.3310950Z ##[error](APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m",
         "ci-command"),
        ("> (APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m", "markdown"),
        ("> > (APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m", "markdown"),
        ("- (APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m", "markdown"),
        ("* (APIServer pid=1) INFO 11-29 22:38:00 [a.py:1] m", "markdown"),
    ],
)
def test_outer_wrappers(line: str, wrapper: str) -> None:
    assert wrapper in unwrap(line, REF).wrappers
    parsed = parse(line)
    assert (parsed.process, parsed.message) == ("APIServer", "m")


def test_docker_json_time_is_the_outer_time() -> None:
    parsed = parse('{"log":"RuntimeError: x\\n","stream":"stderr",'
                   '"time":"2026-05-12T08:01:39.331095044Z"}')
    assert (parsed.message, parsed.outer_time) == ("RuntimeError: x",
                                                    datetime(2026, 5, 12, 8, 1, 39, 331095))
    # colour inside the JSON-escaped line
    coloured = parse('{"log":"\\u001b[0;36m(APIServer pid=1)\\u001b[0;0m \\u001b[32mINFO'
                     '\\u001b[0m 11-29 22:38:00 [a.py:1] m\\n","stream":"stdout","time":"x"}')
    assert (coloured.process, coloured.level, coloured.message) == ("APIServer", "INFO", "m")
    # JSON that is not docker's stays as it is
    assert parse('{"log": 3}').message == '{"log": 3}'


def test_a_ci_stamp_before_a_bare_message_is_not_journald() -> None:
    parsed = parse("2026-05-12T08:01:03.3310950Z CUDA error: device-side assert triggered")
    assert parsed.message == "CUDA error: device-side assert triggered"
    journal = parse("2026-05-12T08:01:03+0000 gpu-3 vllm[12]: CUDA error: x")
    assert journal.message == "CUDA error: x"


def test_markdown_leads_keep_what_follows() -> None:
    assert parse('-   File "a.py", line 1, in f').message == '  File "a.py", line 1, in f'
    assert parse(">").message == ""
    # a Python prompt, an option list, a separator: not markdown
    assert parse(">>> import vllm").message == ">>> import vllm"
    assert parse("--max-model-len 4096").message == "--max-model-len 4096"
    assert parse("-").message == "-"


def test_outer_timestamp_wins_over_vllm_time() -> None:
    parsed = parse("  | [2025-03-10T15:07:20Z] INFO 03-10 08:07:20 [a.py:1] m")
    assert parsed.time == datetime(2025, 3, 10, 15, 7, 20)
    assert parsed.vllm_time == "03-10 08:07:20"


def test_journald_short_year_follows_reference() -> None:
    parsed = parse("Dec 31 23:59:59 h vllm[1]: m", reference=datetime(2027, 1, 1, 0, 1))
    assert parsed.outer_time == datetime(2026, 12, 31, 23, 59, 59)


@pytest.mark.parametrize(
    "line",
    [
        "\x1b[1;36m(APIServer pid=31)\x1b[0;0m INFO 11-29 22:38:00 [a.py:1] m",
        "^[[0;36m(APIServer pid=31)^[[0;0m INFO 11-29 22:38:00 [a.py:1] m",
        "[36m(APIServer pid=31) [0m INFO 11-29 22:38:00 [a.py:1] m",
        '<font color="#2AA1B3"><b>(APIServer pid=31)</b></font> INFO 11-29 22:38:00 [a.py:1] m',
        "(APIServer pid=31) \x1b[32mINFO\x1b[0m \x1b[90m11-29 22:38:00\x1b[0m "
        "\x1b[90m[a.py:1]\x1b[0m m",
        # vLLM's formatter with ESC lost in a copy: remnants against words and brackets
        "[0;36m(APIServer pid=31)[0;0m [32mINFO[0m [90m11-29 22:38:00[0m [90m[a.py:1][0m m",
    ],
)
def test_colour_in_every_form(line: str) -> None:
    parsed = parse(line)
    assert (parsed.process, parsed.level, parsed.message) == ("APIServer", "INFO", "m")


def test_colour_stripping_keeps_ordinary_brackets() -> None:
    assert strip_colour("cache [core.py:1] size [5m] left") == "cache [core.py:1] size [5m] left"


def test_carriage_returns_keep_what_a_terminal_shows() -> None:
    assert terminal_text("line\r\n") == "line"
    assert terminal_text("50%\r100%") == "100%"


def test_uvicorn_glog_torch_and_json_lines() -> None:
    assert parse("INFO:     Application startup complete.").kind == "uvicorn"
    old = parse("(APIServer pid=5) INFO:     Application startup complete.")
    assert (old.kind, old.process, old.message) == ("uvicorn", "APIServer",
                                                    "Application startup complete.")
    glog = parse("W1223 23:34:22.775000 1116 torch/api.py:900] Sending SIGTERM")
    assert (glog.kind, glog.level, glog.logger_file) == ("glog", "WARNING", "torch/api.py")
    c10 = parse("[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught")
    assert (c10.rank, c10.level, c10.message) == ("1", "ERROR", "[Rank 1] Watchdog caught")
    js = parse('{"levelname": "ERROR", "processName": "EngineCore", "process": 7, '
               '"message": "EngineCore failed to start."}')
    assert (js.kind, js.process, js.pid, js.level) == ("json", "EngineCore", 7, "ERROR")


def test_unparseable_lines_are_kept_raw() -> None:
    for text in ["", "garbage \x00\x01 bytes", "(most recent call last)", "-- separator --"]:
        parsed = parse(text)
        assert parsed.kind == "raw"
        assert parsed.message == terminal_text(text)


def test_ray_repeat_count() -> None:
    parsed = parse("(RayWorkerWrapper pid=5) INFO 06-20 10:00:20 [c.py:1] m "
                   "[repeated 6x across cluster]")
    assert (parsed.repeated, parsed.message) == (6, "m")


def test_process_roles_and_ranks() -> None:
    assert process_role("ApiServer_1") == "api_server"
    assert process_role("EngineCore_DP3") == "engine_core"
    assert process_role("VllmWorkerProcess") == "worker"
    assert process_role("MainProcess") == "main"
    assert rank_of("VllmWorker-3", None) == "3"
    assert rank_of("Worker_TP1_EP1", None) == "TP1_EP1"


@pytest.mark.parametrize(
    ("fields", "reference", "expected"),
    [
        ((12, 31, 23, 59, 59), datetime(2027, 1, 1, 0, 1), datetime(2026, 12, 31, 23, 59, 59)),
        ((1, 1, 0, 0, 1), datetime(2027, 1, 1, 0, 5), datetime(2027, 1, 1, 0, 0, 1)),
        ((3, 1, 20, 10, 41), datetime(2026, 11, 29), datetime(2026, 3, 1, 20, 10, 41)),
        ((2, 29, 12, 0, 0), datetime(2026, 6, 1), datetime(2024, 2, 29, 12, 0, 0)),
        ((11, 30, 1, 0, 0), datetime(2026, 11, 29, 23, 0), datetime(2026, 11, 30, 1, 0, 0)),
    ],
)
def test_year_inference(fields: tuple[int, int, int, int, int], reference: datetime,
                        expected: datetime) -> None:
    assert closest_datetime(*fields, reference) == expected


def test_the_one_step_path_agrees_with_the_general_grammar(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """The fast regex for plain modern lines must parse every sample line exactly as the
    general wrapper-and-header grammar does."""
    import re

    from logwatch.core.lines import vllm_format
    from tests.conftest import SAMPLES

    lines = [raw for log in sorted(SAMPLES.glob("*.log"))
             for raw in log.read_text(encoding="utf-8", errors="replace").splitlines()]
    fast = [parse(raw) for raw in lines]
    monkeypatch.setattr(vllm_format, "_PLAIN", re.compile(r"(?!)"))
    assert [parse(raw) for raw in lines] == fast
    assert sum(1 for line in fast if line.kind == "vllm") > 300


_SIBLING_MESSAGES = [
    "Traceback (most recent call last):", '  File "/x/vllm/a.py", line 3, in f', "",
    "RuntimeError: boom [rank0]", "colour \x1b[31mred\x1b[0m", "stripped remnant [31mred[0m",
    "carriage\rreturn", "Exception in worker VllmWorkerProcess while processing method "
    "load_model: boom, Traceback (most recent call last):", "x [repeated 3x across cluster]",
    "unicode é ✓", "  indented [1, 2]",
]


@pytest.mark.parametrize("message", _SIBLING_MESSAGES)
def test_a_sibling_line_reads_as_parse_line_reads_it(message: str) -> None:
    """The block scanner reads the other lines of a logger record from their message once
    it knows their header; that must be what parsing them whole gives, or nothing."""
    ref = datetime(2026, 11, 29)
    template = parse_line("t", 1, "(Worker_TP3 pid=9103) ERROR 11-29 03:40:45 "
                          "[multiproc_executor.py:631] Traceback (most recent call last):", ref)
    header = plain_header(template)
    assert header == "(Worker_TP3 pid=9103) ERROR 11-29 03:40:45 [multiproc_executor.py:631] "
    raw = header + message
    sibling = parse_sibling(template, header, 7, raw)
    whole = parse_line("t", 7, raw, ref)
    if sibling is None:  # what it leaves to parse_line is what parse_line reads otherwise
        assert whole.kind != "vllm" or whole.repeated != 1 or "\r" in message \
            or "\x1b" in message or "[31m" in message
    else:
        assert sibling == whole


def test_only_the_plain_header_form_has_siblings() -> None:
    ref = datetime(2026, 11, 29)
    for raw in ("INFO 11-29 03:40:45 [a.py:1] no process prefix",
                "2026-11-29T10:00:00Z stdout F (X pid=1) INFO 11-29 03:40:45 [a.py:1] docker",
                "(X pid=1) INFO 11-29 03:40:45 [a.py:1] \x1b[31mcolour\x1b[0m"):
        assert plain_header(parse_line("t", 1, raw, ref)) is None
