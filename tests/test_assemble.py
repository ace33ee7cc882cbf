"""Multi-line assembly: logger tracebacks, raw copies, interleaved ranks, chains, hard wraps."""

from __future__ import annotations

from datetime import datetime

from logwatch.core.lines.assemble import Assembler, assemble
from logwatch.core.lines.records import Record
from logwatch.core.lines.vllm_format import parse_line

REF = datetime(2026, 11, 29, 23, 0, 0)


def records(text: str, wrap_width: int | None = None) -> list[Record]:
    lines = [parse_line("t", i + 1, ln, REF) for i, ln in enumerate(text.splitlines())]
    if wrap_width is None:
        return list(assemble(lines))
    assembler = Assembler(wrap_width)
    out = [r for ln in lines for r in assembler.feed(ln)]
    return out + assembler.flush()


def spans(recs: list[Record]) -> list[tuple[int, int]]:
    return [(r.lineno, r.last_lineno) for r in recs]


H = "(EngineCore pid=5) ERROR 11-29 22:38:00 [core.py:1021] "


def test_logger_traceback_is_one_record_ending_in_the_exception() -> None:
    text = "\n".join([
        H + "EngineCore failed to start.",
        H + "Traceback (most recent call last):",
        H + '  File "/x.py", line 1, in f',
        H + "    g()",
        H + "ValueError: boom",
        "(EngineCore pid=5) INFO 11-29 22:38:01 [core.py:50] next record",
    ])
    recs = records(text)
    assert spans(recs) == [(1, 5), (6, 6)]
    assert recs[0].message.endswith("ValueError: boom")
    assert recs[0].is_traceback


def test_same_header_lines_without_traceback_stay_separate() -> None:
    text = "\n".join("(APIServer pid=1) INFO 11-29 22:38:00 [launcher.py:196] Route: /" + str(i)
                     for i in range(3))
    assert spans(records(text)) == [(1, 1), (2, 2), (3, 3)]


def test_raw_multiprocessing_copy_is_its_own_record() -> None:
    text = "\n".join([
        "Process EngineCore_DP0:",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
        "    self.run()",
        "RuntimeError: size_n = 40 is not divisible by tile_n_size = 64",
        "unrelated raw output",
    ])
    assert spans(records(text)) == [(1, 5), (6, 6)]


def test_interleaved_workers_are_untangled() -> None:
    tb = ["Traceback (most recent call last):", '  File "a.py", line 1, in f', "    f()",
          "RuntimeError: x"]
    lines = []
    for t in tb:
        for rank in (1, 0):
            lines.append(f"(Worker_TP{rank} pid={10 + rank}) ERROR 11-29 22:38:00 [m.py:1] {t}")
    recs = records("\n".join(lines))
    assert len(recs) == 2
    assert {r.rank for r in recs} == {"TP0", "TP1"}
    assert all(len(r.lines) == 4 for r in recs)


def test_torch_rank_copies_group_by_rank() -> None:
    text = "\n".join([
        "[rank0]: Traceback (most recent call last):",
        "[rank1]: Traceback (most recent call last):",
        '[rank0]:   File "a.py", line 1, in f',
        '[rank1]:   File "a.py", line 1, in f',
        "[rank0]: RuntimeError: NCCL error: unhandled system error",
        "[rank1]: RuntimeError: NCCL error: unhandled system error",
    ])
    recs = records(text)
    assert [(r.rank, len(r.lines)) for r in recs] == [("0", 3), ("1", 3)]


def test_chained_exceptions_stay_together() -> None:
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in f',
        "KeyError: 'x'",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "b.py", line 2, in g',
        "RuntimeError: wrapped",
    ])
    assert spans(records(text)) == [(1, 9)]


def test_python_313_markers_and_elisions_continue_the_traceback() -> None:
    text = "\n".join([
        H + "Traceback (most recent call last):",
        H + '  File "a.py", line 1, in f',
        H + "    x = g(a,",
        H + "        ~~~~^^^",
        H + "    ...<3 lines>...",
        H + "ValueError: bad",
    ])
    assert spans(records(text)) == [(1, 6)]


def test_pydantic_errors_after_the_exception_line_stay_in_the_record() -> None:
    p = "(APIServer pid=1) "
    text = "\n".join([
        p + "Traceback (most recent call last):",
        p + '  File "a.py", line 1, in f',
        p + "pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig",
        p + "  Value error, World size (8) is larger than the number of available GPUs (4) in "
            "this node. If this is intentional and you are using:",
        p + "- ray, set '--distributed-executor-backend ray'.",
        p + "- multiprocessing, set '--nnodes' appropriately. [type=value_error, "
            "input_value=ArgsKwargs(()), input_type=ArgsKwargs]",
        p + "    For further information visit https://errors.pydantic.dev/2.12/v/value_error",
        p + "something else printed later",
        "(APIServer pid=1) INFO 11-29 22:38:00 [api_server.py:1] next start",
    ])
    recs = records(text)
    assert spans(recs) == [(1, 7), (8, 8), (9, 9)]
    assert recs[0].message.splitlines()[3].startswith("  Value error, World size (8)")


def test_an_exception_line_that_is_not_pydantic_ends_the_raw_record() -> None:
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in f',
        "ValueError: bad",
        "  indented output of something else",
    ])
    assert spans(records(text)) == [(1, 3), (4, 4)]


def test_one_line_worker_exception_header_starts_a_traceback() -> None:
    h = "(VllmWorkerProcess pid=235) ERROR 08-05 23:29:38 multiproc_worker_utils.py:226] "
    text = "\n".join([
        h + "Exception in worker VllmWorkerProcess while processing method load_model: x, "
            "Traceback (most recent call last):",
        h + '  File "a.py", line 1, in f',
        h + "RuntimeError: x",
    ])
    assert spans(records(text)) == [(1, 3)]


def test_torch_trailers_after_the_exception_line() -> None:
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in f',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "Exception raised from c10_cuda_check_implementation at /pytorch/c10/CUDAException.cpp:43",
        "frame #0: c10::Error::Error() + 0x96 (0x7f in libc10.so)",
    ])
    assert spans(records(text)) == [(1, 5)]


def test_hard_wrapped_lines_rejoin_when_the_width_is_known() -> None:
    long = H + "RuntimeError: size_k = 3584 is not divisible by tile_k_size = 16"
    width = 80
    pieces = [long[i:i + width] for i in range(0, len(long), width)]
    recs = records("\n".join(pieces), wrap_width=width)
    assert len(recs) == 1
    assert recs[0].message == "RuntimeError: size_k = 3584 is not divisible by tile_k_size = 16"
    # without the width, the pieces stay apart
    assert len(records("\n".join(pieces))) == len(pieces)


def test_a_wrapped_line_is_judged_whole_once_rejoined() -> None:
    # the terminal cut "Traceback (most re|cent call last):" and, later, a chain marker: each
    # head alone opens nothing, the whole line opens a traceback (or continues the chain)
    width = len(H) + len("Traceback (most re")
    lines = [
        H + "Traceback (most recent call last):",
        H + '  File "/usr/lib/python3.12/site-packages/vllm/model_executor/parameter.py", '
            "line 130, in load",
        H + "AssertionError",
        H + "",
        H + "The above exception was the direct cause of the following exception:",
        H + "",
        H + "Traceback (most recent call last):",
        H + "RuntimeError: loading failed",
    ]
    wrapped = [ln[i:i + width] for ln in lines for i in range(0, max(len(ln), 1), width)]
    assert wrapped[0].endswith("Traceback (most re")
    recs = records("\n".join(wrapped), wrap_width=width)
    assert len(recs) == 1
    assert recs[0].message.splitlines()[0] == "Traceback (most recent call last):"
    assert recs[0].message.splitlines()[-1] == "RuntimeError: loading failed"


def test_records_come_out_in_log_order_even_when_they_close_late() -> None:
    assembler = Assembler()
    lines = [
        H + "Traceback (most recent call last):",  # stays open: its writer goes quiet
        "raw line one",
        "raw line two",
    ]
    out: list[Record] = []
    for i, text in enumerate(lines):
        out += assembler.feed(parse_line("t", i + 1, text, REF))
    assert out == []  # the raw records wait for the earlier open traceback
    out += assembler.flush()
    assert [r.lineno for r in out] == [1, 2, 3]
