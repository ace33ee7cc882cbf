"""What header runs gave, remembered: the same traceback logged again (every rank, every
restart) makes only its record's lines, without decoding, parsing or assembling them.

A run is the consecutive lines of one logger header (block_scan's `_header_run`). It is
remembered by the header without its time and each line's bytes after it; what is kept is
each line's text after the header, its message, the record it went to and that record's
message. Assembly of same-header lines reads only their messages, so the same bytes under
the same header always group the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from logwatch.core.lines.records import ParsedLine, Record
from logwatch.core.lines.vllm_format import sibling_line

RUN_MEMO_ENTRIES = 256
RUN_MEMO_MAX_BYTES = 8 << 10

RunKey = tuple[bytes, tuple[bytes, ...]]


@dataclass(frozen=True, slots=True)
class Run:
    suffixes: tuple[str, ...]  # each line's text after the header
    messages: tuple[str, ...]
    groups: tuple[tuple[int, int], ...]  # each line's record: its first and last line
    texts: tuple[str, ...]  # each line's record's message


def run_key(buf: bytes, line: ParsedLine, header: bytes, starts: list[int]) -> RunKey | None:
    """What a run of consecutive lines starting with `header` (at `starts`) is remembered
    by; None for a run too long to keep, or whose lines do not each start with the header."""
    end = buf.find(b"\n", starts[-1])
    end = len(buf) if end < 0 else end
    if end - starts[0] > RUN_MEMO_MAX_BYTES or line.vllm_time is None:
        return None
    if starts[0] and buf[starts[0] - 1] != 0x0A:
        return None  # a header inside a line, or after a prefix
    width = len(header)
    bodies = tuple(buf[starts[0] + width:end].split(b"\n" + header))
    if len(bodies) != len(starts):
        return None  # ... the same for a later line: a newline is not right before it
    return header.replace(line.vllm_time.encode(), b"", 1), bodies


class RunMemo:
    """Runs by key, at most RUN_MEMO_ENTRIES (cleared when full). A run whose lines could not
    be read as siblings is remembered as None: the same bytes never are."""

    def __init__(self) -> None:
        self._runs: dict[RunKey, Run | None] = {}

    def __contains__(self, key: RunKey) -> bool:
        return key in self._runs

    def remember(self, key: RunKey, run: list[ParsedLine], records: list[Record],
                 header: str) -> None:
        """Keep what a run gave: `run` its lines, `records` what assembling them made."""
        suffixes = tuple(ln.raw[len(header):] for ln in run)
        if any("\ufffd" in suffix for suffix in suffixes):
            return  # invalid UTF-8 is counted as it is decoded: read it afresh each time
        position = {ln.lineno: i for i, ln in enumerate(run)}
        groups = [(0, 0)] * len(run)
        for record in records:
            group = (position[record.lineno], position[record.last_lineno])
            for i in range(group[0], group[1] + 1):
                groups[i] = group
        messages = tuple(ln.message for ln in run)
        texts = {group: "\n".join(messages[group[0]:group[1] + 1]) for group in set(groups)}
        self._keep(key, Run(suffixes, messages, tuple(groups),
                            tuple(texts[group] for group in groups)))

    def forget(self, key: RunKey) -> None:
        """These bytes are not read as a run: remember that."""
        self._keep(key, None)

    def _keep(self, key: RunKey, run: Run | None) -> None:
        if len(self._runs) >= RUN_MEMO_ENTRIES:
            self._runs.clear()
        self._runs[key] = run

    def record(self, key: RunKey, line: ParsedLine, header: str, numbers: list[int],
               index: int, cache: dict[int, ParsedLine]) -> tuple[Record | None, int]:
        """The record holding the hit line (`index` in the run, `line`), from the run
        remembered under `key`, and how many lines were made for it; lines already parsed
        (`cache`) are taken as they are."""
        known = self._runs[key]
        if known is None:
            return None, 0
        first, last = known.groups[index]
        made, count = [], 0
        for i in range(first, last + 1):
            if i == index:
                made.append(line)
                continue
            number = numbers[i]
            sibling = cache.get(number)
            if sibling is None:
                sibling = sibling_line(line, number, header + known.suffixes[i],
                                       known.messages[i])
                count += 1
            made.append(sibling)
        return Record(made, known.texts[index]), count
