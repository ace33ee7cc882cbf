"""The TUI's pure parts: the live log's ring and filters, the dashboard's states, the plan
as a diff. Literals in, values out."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from logwatch.tui.board import sparkline, target_of, target_rows, timeline
from logwatch.tui.lines import (
    FilterError,
    Line,
    LineFilter,
    LineRing,
    Mark,
    level_of,
    process_of,
    split_lines,
)
from logwatch.tui.plan_text import plan_lines, snapshot_diff_lines
from logwatch.tui.queries import literal

NOW = datetime(2026, 12, 2, 12, 0, 0)
ERR = "(Worker_TP1 pid=40) ERROR 12-02 11:59:59 [gpu_model_runner.py:1] boom"
WARN = "(EngineCore_DP0 pid=12) WARNING 12-02 11:59:58 [config.py:9] careful"
INFO = "(APIServer pid=1) INFO 12-02 11:59:57 [api_server.py:3] fine"


def _lines(texts: list[str], source: str = "s", first: int = 1) -> list[Line]:
    return [Line(source, first + i, t) for i, t in enumerate(texts)]


def test_levels_and_processes_are_read_from_vllms_header() -> None:
    assert (level_of(ERR), level_of(WARN), level_of(INFO)) == ("error", "warning", "info")
    assert level_of("Traceback (most recent call last):") is None
    assert (process_of(ERR), process_of(WARN), process_of(INFO)) == (
        "Worker_TP1", "EngineCore_DP0", "APIServer")
    assert process_of("(VllmWorker TP3 pid=9) INFO 12-02 11:00:00 [x.py:1] a") == "TP3"


def test_a_lines_event_is_numbered_from_its_first_line() -> None:
    assert split_lines("s", 10, "a\nb\n") == [Line("s", 10, "a"), Line("s", 11, "b")]


def test_the_ring_keeps_the_newest_lines_and_counts_what_it_could_not_keep() -> None:
    ring = LineRing(capacity=8)
    ring.add(_lines([f"l{i}" for i in range(20)]))  # one batch bigger than the ring
    assert ring.dropped == 12 and [line.text for line in ring.lines] == [
        f"l{i}" for i in range(12, 20)]
    ring.add(_lines([f"m{i}" for i in range(4)], first=100))
    assert len(ring.lines) <= 8 + 8 // 8 + 4 and ring.row(len(ring) - 1).text == "m3"
    assert ring.dropped == 12  # trimming old lines is not dropping: they were shown


def test_filters_in_out_and_by_process_with_their_counts() -> None:
    ring = LineRing(capacity=100)
    ring.add(_lines([ERR, WARN, INFO, ERR.replace("TP1", "TP0")]))
    ring.set_filter(LineFilter(include="ERROR"))
    assert len(ring) == 2
    ring.set_filter(LineFilter(include="ERROR", process="Worker_TP0"))
    assert len(ring) == 1 and "TP0" in ring.row(0).text
    ring.set_filter(LineFilter(exclude="INFO"))
    assert len(ring) == 3
    ring.add(_lines([INFO, ERR], first=50))  # the view follows new lines
    assert len(ring) == 4
    with pytest.raises(FilterError):
        ring.set_filter(LineFilter(include="(unclosed"))
    assert ring.filter == LineFilter(exclude="INFO")  # the old filter stays
    assert ring.processes() == ["Worker_TP1", "EngineCore_DP0", "APIServer", "Worker_TP0"]


def test_jumps_find_errors_by_level_or_by_a_findings_severity() -> None:
    ring = LineRing(capacity=100)
    ring.add(_lines([INFO, WARN, INFO, "RuntimeError: CUDA error", ERR]))
    assert ring.find(-1, frozenset({"critical", "error"}), True) == 4
    ring.mark("s", 4, Mark("cuda.error", "critical", ("CUDA error",)))
    assert ring.find(-1, frozenset({"critical", "error"}), True) == 3
    assert ring.find(5, frozenset({"warning"}), False) == 1
    assert ring.find(1, frozenset({"warning"}), True) is None


def test_targets_take_their_state_from_the_launch_action_and_breaker() -> None:
    row = {"source": "run:vllm", "id": "L2", "number": 2, "outcome": "failed",
           "started": "2026-12-02T11:58:00", "root_signature": "marlin.tile_n",
           "snapshot_hash": "abcdef0123456789", "vllm_version": "0.11.2",
           "gpu_name": "NVIDIA H200", "gpu_capability": 90, "quant_scheme": "nvfp4a16",
           "uses_mtp": True, "mtp_covered": False, "marlin": "true", "mtp_modules": "3",
           "mtp_uncovered": 3}
    (failed,) = target_rows([row], None, {}, NOW)
    assert (failed.target, failed.state, failed.kernel, failed.mtp, failed.gpu) == (
        "vllm", "failed", "Marlin (weight-only)", "3 not covered", "NVIDIA H200 (sm 9.0)")
    status = {"launches": [], "relaunch": {"actions": [
        {"id": "a", "target": "vllm", "state": "awaiting_approval", "reason": ""}],
        "breakers": {"vllm": False}}}
    assert target_rows([row], status, {}, NOW)[0].state == "awaiting approval"
    status["relaunch"]["breakers"] = {"vllm": True}
    assert target_rows([row], status, {}, NOW)[0].state == "breaker open"
    serving = {**row, "outcome": "serving", "marlin": "false", "quant_scheme": "nvfp4-w4a4"}
    healthy = target_rows([serving], None, {"vllm": "succeeded"}, NOW)[0]
    assert (healthy.state, healthy.uptime, healthy.kernel) == (
        "healthy", "2m00s", "W4A4 (CUTLASS/FlashInfer)")
    assert target_rows([row], None, {"vllm": "escalated"}, NOW)[0].state == "rolled back"


def test_target_names() -> None:
    assert target_of("run:vllm") == "vllm"
    assert target_of("qwen:journal:-u vllm.service") == "qwen"
    assert target_of("/var/log/vllm/vllm.log") == "vllm.log"


def test_sparkline_and_timeline() -> None:
    assert sparkline([0, 1, 8]) == " ▁█"
    rows = [{"signature": "a", "hour": datetime(2026, 12, 2, 10), "incidents": 2},
            {"signature": "a", "hour": datetime(2026, 12, 2, 11), "incidents": 4},
            {"signature": "b", "hour": datetime(2026, 12, 1, 11), "incidents": 1}]
    lines = timeline(rows, hours=4)
    assert lines[0][0] == "a" and lines[0][2] == 6 and lines[0][1].endswith("▄█")
    assert [sig for sig, _, _ in lines] == ["a"]  # b is older than the 4 hours shown


def test_a_plan_reads_as_a_diff_with_its_checks() -> None:
    plan = {"id": "p1", "causes": ["mtp.draft_garbage"], "startable": True,
            "changes": [{"kind": "model", "name": "", "value": None, "reason": "merge"},
                        {"kind": "flag", "name": "--quantization", "value": "modelopt_fp4",
                         "reason": "W4A4"}],
            "overlay": {"file": "config.json", "key": "ignore", "entries": ["mtp.fc"]},
            "checks": [{"name": "gpu", "holds": True, "why": "sm 10.0"}], "refused": []}
    lines = plan_lines(plan, "/models/a16")
    assert ("remove", "- serve /models/a16") in lines
    assert ("add", "+ --quantization modelopt_fp4") in lines
    assert ("add", "+ config.json ignore += mtp.fc") in lines
    assert lines[-1] == ("ok", "startable")
    refused = plan_lines({**plan, "startable": False, "refused": ["no FP4 on sm 9.0"]})
    assert ("bad", "REFUSED: no FP4 on sm 9.0") in refused and refused[-1][0] == "bad"


def test_a_snapshot_diff_names_the_fields_that_changed() -> None:
    lines = snapshot_diff_lines({"vllm_version": "0.11.0", "env": {"A": "1"}},
                                {"vllm_version": "0.11.2", "env": {"A": "1"}})
    assert lines == [("remove", "- vllm_version: 0.11.0"), ("add", "+ vllm_version: 0.11.2")]


def test_any_id_becomes_an_sql_expression_of_itself_with_no_control_character() -> None:
    """A target or file name with a control character still opens its incident: DuckDB
    reads the expression back as the value, and the SQL text holds only printable ASCII."""
    import duckdb

    assert literal("it's") == "'it''s'"
    con = duckdb.connect()
    for value in ("it's", "x\x1b[2J\x1b]52;c;aGk=\x07y", "a\nb", "qwen-é€", "", "'; DROP"):
        sql = literal(value)
        assert all(" " <= ch <= "~" for ch in sql), sql
        assert con.execute(f"SELECT {sql}").fetchone() == (value,)
    with pytest.raises(ValueError):
        literal("x" * 1001)


def test_a_progress_bar_line_is_drawn_as_the_terminal_left_it() -> None:
    from logwatch.tui.lines import as_drawn

    bar = "shards:   0% | 0/5\rshards:  20% | 1/5\rshards: 100% | 5/5\r"
    assert as_drawn(bar) == "shards: 100% | 5/5"
    assert as_drawn("plain line") == "plain line"
    assert as_drawn("\r\r") == ""


def test_a_filter_that_backtracks_for_ever_is_refused_or_taken_off_not_a_frozen_screen(
) -> None:
    """`(a|aa)+$` on 35 a's and a b takes the `re` module minutes: typed as a filter it is
    refused (the filter before it stays); on a line that arrives later, it is taken off and
    the reason kept for the status row."""
    import time

    hostile = "INFO " + "a" * 35 + "b"
    ring = LineRing(100)
    ring.add(_lines(["calm line", hostile]))
    began = time.monotonic()
    with pytest.raises(FilterError, match="ms on line 2"):
        ring.set_filter(LineFilter(include="(a|aa)+$"))
    assert not ring.filter.active and len(ring) == 2
    ring = LineRing(100)
    ring.add(_lines(["calm line"]))
    ring.set_filter(LineFilter(include="(a|aa)+$"))
    assert len(ring) == 0
    ring.add(_lines([hostile], first=2))
    assert time.monotonic() - began < 5  # two searches cut at 50 ms, not minutes
    assert "taken off" in ring.dropped_filter and not ring.filter.active
    assert len(ring) == 2  # every line shown again


def test_marks_stay_bounded_when_their_lines_never_come() -> None:
    ring = LineRing(100)
    for n in range(10_000):
        ring.mark("s", n, Mark("x", "error", ()))
    assert len(ring.marks) <= 200 and ("s", 9_999) in ring.marks


def test_a_result_exported_to_csv_holds_no_formula_and_never_overwrites(
        tmp_path: Path) -> None:
    import csv

    from logwatch.tui.export import write_csv

    rows = [["=HYPERLINK(\"http://x\")", -2, ["a", 1], b"\x00\xff", "@SUM(A1)", "plain"]]
    first = write_csv(tmp_path, ["c1", "n", "list", "blob", "at", "ok"], rows, NOW)
    second = write_csv(tmp_path, ["c1"], [["again"]], NOW)  # the same second: a new name
    assert first != second and first.exists() and second.exists()
    text = first.read_text()
    assert "\r" not in text
    header, row = list(csv.reader(text.splitlines()))
    assert header == ["c1", "n", "list", "blob", "at", "ok"]
    assert row == ["'=HYPERLINK(\"http://x\")", "-2", '["a", 1]', "00ff", "'@SUM(A1)", "plain"]


def test_the_timeline_ranks_root_causes_then_severity_then_counts() -> None:
    hour = datetime(2026, 12, 2, 10)

    def row(signature: str, count: int, severity: int, root: bool) -> dict[str, object]:
        return {"signature": signature, "hour": hour, "incidents": count,
                "severity_rank": severity, "root_cause": root}

    rows = [row("lifecycle.version", 9, 3, False), row("engine.worker_failed", 5, 1, False),
            row("weights.tensor_size_mismatch", 1, 0, True), row("nvfp4.fallback", 2, 2, False),
            row("env.unknown_var", 7, 2, False)]
    assert [sig for sig, _, _ in timeline(rows)] == [
        "weights.tensor_size_mismatch", "engine.worker_failed", "env.unknown_var",
        "nvfp4.fallback", "lifecycle.version"]
