"""V0's worker error embedded in its own line comes apart, so the carried message stands alone."""

from __future__ import annotations

from datetime import datetime

from logwatch.core.lines.assemble import assemble, starts_traceback
from logwatch.core.lines.pasted import split_embedded, wrap_width
from logwatch.core.lines.vllm_format import parse_line

V0 = "(VllmWorkerProcess pid=235) ERROR 08-05 23:29:38 multiproc_worker_utils.py:226] "
REF = datetime(2026, 8, 6)


def test_the_embedding_splits_into_wrapper_message_and_traceback() -> None:
    message = ("Exception in worker VllmWorkerProcess while processing method load_model: "
               "CUDA error: out of memory, Traceback (most recent call last):")
    assert split_embedded(message).splitlines() == [
        "Exception in worker VllmWorkerProcess while processing method load_model:",
        "CUDA error: out of memory",
        "Traceback (most recent call last):",
    ]
    assert starts_traceback(split_embedded(message))


def test_without_a_traceback_the_message_is_the_rest() -> None:
    message = "Exception in worker W while processing method init_device: bad, worse"
    assert split_embedded(message).splitlines()[1] == "bad, worse"


def test_splitting_twice_or_after_a_rejoin_gives_the_same_lines() -> None:
    whole = ("Exception in worker W while processing method load_model: size_k = 40 is not "
             "divisible by tile_k_size = 16, Traceback (most recent call last):")
    once = split_embedded(whole)
    assert split_embedded(once) == once
    # a terminal cut the row after "is not div": the head was split alone, then rejoined
    cut = whole.index("div") + 3
    assert split_embedded(split_embedded(whole[:cut]) + whole[cut:]) == once


def test_other_messages_are_left_alone() -> None:
    for message in ("while processing method x", "RuntimeError: CUDA error: x", ""):
        assert split_embedded(message) == message


def test_the_carried_message_starts_a_line_of_the_record() -> None:
    lines = [V0 + "Exception in worker VllmWorkerProcess while processing method load_model: "
             "RuntimeError: size_k = 3584 is not divisible by tile_k_size = 16, Traceback "
             "(most recent call last):",
             V0 + '  File "/vllm/executor/multiproc_worker_utils.py", line 223, in run',
             V0 + "    output = executor(*args, **kwargs)"]
    parsed = [parse_line("t", i + 1, ln, REF) for i, ln in enumerate(lines)]
    (record,) = list(assemble(parsed))
    assert "\nRuntimeError: size_k = 3584 is not divisible by tile_k_size = 16\n" in \
        record.message
    assert record.is_traceback


def _raw(row: str) -> bool:
    return not row.startswith("(")


def test_a_long_wrapped_log_shows_its_width() -> None:
    rows = ["x" * 119] * 5 + ["short"] * 5
    assert wrap_width(rows, _raw) == 119


def test_a_short_excerpt_wrapped_at_a_common_width() -> None:
    line = ("(EngineCore pid=5) ERROR 11-29 22:38:00 [core.py:1021] RuntimeError: size_k = "
            "3584 is not divisible by tile_k_size = 16")
    head = line[:80]
    rows = [head, line[80:]]
    assert wrap_width(rows, _raw) == 80
    # the row after it has a header of its own: a line that merely happens to be 80 long
    assert wrap_width([head, head[:60]], _raw) is None
    # an uncommon width needs the many-rows evidence
    assert wrap_width([line[:81], line[81:]], _raw) is None


def test_a_longer_line_means_no_wrap() -> None:
    rows = ["x" * 80] * 5 + ["y" * 200]
    assert wrap_width(rows, _raw) is None
    assert wrap_width(["short", "lines"], _raw) is None
