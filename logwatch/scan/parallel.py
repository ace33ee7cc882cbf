"""Scan one large file with two processes when two cores are idle: the same findings, in order.

This process scans a first part of the file alone, and from the findings in it cuts the
file at a newline between 10% and 50% of it (first_share): it takes in every finding, the
child's too (as the child writes them, once its own are in), so its own half is the shorter
on a log dense with findings. It scans the
first half and reads on past the cut as far as a record or a hit's neighbourhood can reach;
a forked child scans the second half after a lead-in just as long, counting the lines before
it for their numbers. Each side keeps only the findings on its own lines, so every record is
assembled from the lines one process would have had at hand, and each finding is reported
once.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import operator
import os
import pickle
import struct
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields
from datetime import datetime
from typing import IO, Any, BinaryIO

from logwatch.core.lines.records import ParsedLine, Record
from logwatch.core.signatures.block_scan import (
    CONTEXT_AFTER,
    CONTEXT_BEFORE,
    HEADER_SEARCH_BYTES,
    BlockScanner,
    ScanStats,
)
from logwatch.core.signatures.findings import Finding
from logwatch.core.signatures.matcher import Matcher
from logwatch.core.signatures.placed import WithDerived
from logwatch.core.signatures.signature import Signature
from logwatch.scan.blocks import read_blocks

SPLIT_MIN_BYTES = 64 << 20  # below this a second process costs more than it saves
# How far either side reads beyond the cut: a hit's window reaches CONTEXT lines and its
# header search HEADER_SEARCH_BYTES; a record found from a hit before the cut spans at most
# one window more. Both bounds are doubled again for margin; reading them costs little.
REACH_LINES = 4 * (CONTEXT_BEFORE + CONTEXT_AFTER)
REACH_BYTES = 8 * HEADER_SEARCH_BYTES
# The first 1/PROBE_PARTS of the file is scanned before the cut is chosen from its findings
# (first_share); the cut falls no earlier than MIN_FIRST_SHARE of the file. Recording the
# findings of a MB costs as much as scanning it at FINDINGS_PER_MB_AT_PAR findings a MB
# (measured on the crash-loop backlog of `make bench`, 157 findings a MB: taking in the
# child's findings only after it ended, two processes were fastest with the cut at 42%, as
# s / (2s + r) says; taking them in as they come, at 30-31%, as (s - r) / 2s says: 5.06-5.09 s
# against 5.49-5.64 at 42% and 5.35 at 25%).
PROBE_PARTS = 32
MIN_FIRST_SHARE = 0.1
FINDINGS_PER_MB_AT_PAR = 413


def two_cores_idle(size: int) -> bool:
    """Worth splitting: a large file, and a second core nobody else is using."""
    cpus = os.cpu_count() or 1
    return size >= SPLIT_MIN_BYTES and cpus >= 2 and os.getloadavg()[0] <= cpus - 1.5


def _find_cut(stream: BinaryIO, size: int, share: float = 0.5) -> int:
    """Offset just after a newline near `share` of the file (0: none within 1 MiB after)."""
    target = int(size * share)
    stream.seek(target)
    newline = stream.read(1 << 20).find(b"\n")
    cut = 0 if newline < 0 else target + newline + 1
    return cut if cut < size else 0


def first_share(findings: int, scanned: int) -> float:
    """The share of the file this process scans itself, from the findings in a first part
    of `scanned` bytes. This process also takes in every finding: its own as it scans them,
    then the child's as the child writes them. With taking in costing r per s of scanning
    (r / s grows with the findings a MB: FINDINGS_PER_MB_AT_PAR), it is done with its own
    share p after p (s + r), and with the child's, which it keeps pace with, when the child
    is done, after (1 - p) s: both end together at p = (s - r) / 2s. From counts, not
    timings: the same file is always cut at the same line, so its work counters are the
    same each time."""
    if scanned <= 0:
        return 0.5
    share = (1 - findings / (scanned / 1e6) / FINDINGS_PER_MB_AT_PAR) / 2
    return min(0.5, max(MIN_FIRST_SHARE, share))


def _reach(stream: BinaryIO, cut: int, forward: bool, size: int) -> int:
    """A newline-aligned offset REACH_LINES lines and REACH_BYTES bytes from the cut."""
    span = max(REACH_BYTES, 1 << 20)
    while True:
        start = cut if forward else max(cut - span, 0)
        stream.seek(start)
        data = stream.read(min(span, size - start) if forward else cut - start)
        if forward:
            pos = REACH_BYTES
            for _ in range(REACH_LINES):
                pos = data.find(b"\n", pos) + 1
                if pos == 0:
                    break
            if pos or start + len(data) >= size:
                return size if pos == 0 else start + pos
        else:
            pos = len(data) - REACH_BYTES
            for _ in range(REACH_LINES + 1):
                pos = data.rfind(b"\n", 0, max(pos, 0))
                if pos < 0:
                    break
            if pos >= 0 or start == 0:
                return 0 if pos < 0 else start + pos + 1
        span *= 4


class _Window:
    """A byte range of a file as a stream."""

    def __init__(self, stream: BinaryIO, start: int, end: int) -> None:
        stream.seek(start)
        self._stream, self._left = stream, end - start

    def read(self, n: int = -1) -> bytes:
        n = self._left if n < 0 else min(n, self._left)
        data = self._stream.read(n)
        self._left -= len(data)
        return data


def _blocks(stream: BinaryIO, start: int, end: int) -> Iterator[bytes]:
    return read_blocks(_Window(stream, start, end))  # type: ignore[arg-type]


def _prime_runs(stream: BinaryIO, scanner: BlockScanner, end: int) -> None:
    """Give the scanner the run state the scan of the whole file has at `end`
    (core.signatures.repeats): the key of the last hit line before it, read back a MiB at a
    time until one is found (or the file's start)."""
    span = 1 << 20
    while end > 0:
        start = max(end - span, 0)
        stream.seek(start)
        data = stream.read(end - start)
        skip = data.find(b"\n") + 1 if start else 0  # from the first line start on
        if start and not 0 < skip < len(data):  # inside one line longer than the span
            span *= 4
            continue
        if scanner.prime_repeats(data[skip:]):
            return
        end = start + skip


# The child numbers its lines from here, not from the file's start (the parent learns how
# many lines come before the cut from its own half, and shifts the child's numbers by that):
# counting the first half's lines again would cost the child a read of half the file. Not 1:
# the lead-in's first line may continue a record begun before it, as after a resume.
CHILD_FIRST_LINE = 2


def _second_half(path: str, matcher: Matcher, label: str, reference: datetime,
                 lead: int, cut: int, size: int, spool: IO[bytes]) -> None:
    """The child: scan from the lead-in on, spool findings after the cut, its lines numbered
    from CHILD_FIRST_LINE at the lead-in (the cut's line number is spooled first)."""
    # the parent's counts from its first part came along in the fork: it adds ours to them
    matcher.timeouts.clear()
    matcher.pattern_timeouts.clear()
    with open(path, "rb") as stream:
        scanner = BlockScanner(matcher, label, reference, start_line=CHILD_FIRST_LINE,
                               whole_input=True)
        _prime_runs(stream, scanner, lead)
        for block in _blocks(stream, lead, cut):  # the lead-in: context, not its findings
            scanner.feed(block)
        cut_line = scanner.stats.lines + 1
        _frame(spool, ("cut", cut_line))
        scanner.stats.repeated_lines = 0  # counted from the cut on, as findings are
        for block in _blocks(stream, cut, size):
            _spool(spool, [f for f in scanner.feed(block) if f.lineno >= cut_line])
        _spool(spool, [f for f in scanner.finish() if f.lineno >= cut_line])
        _frame(spool, ("stats", scanner.stats, dict(matcher.timeouts), dict(matcher.disabled)))


# Findings cross from the child as tuples of plain values (pickle writes and reads those in
# C), not as objects: the parent takes in the second half's findings one by one after its
# own half, and on a log dense with findings that was a third of its time.
_LINE_FIELDS = operator.attrgetter(*(f.name for f in fields(ParsedLine)))
_FINDING_FIELDS = operator.attrgetter(*(f.name for f in fields(Finding)
                                        if f.name not in ("signature", "record", "matched")))


def _flat(finding: Finding) -> tuple[Any, ...]:
    record = finding.record
    return (finding.signature.id, _FINDING_FIELDS(finding), record.index_of(finding.matched),
            tuple(_LINE_FIELDS(line) for line in record.lines))


_LINE_NUMBER = [f.name for f in fields(ParsedLine)].index("lineno")
_FINDING_NUMBERS = tuple(i for i, name in enumerate(
    f.name for f in fields(Finding) if f.name not in ("signature", "record", "matched"))
    if name in ("lineno", "record_lineno", "record_last_lineno"))


def _unflat(flat: tuple[Any, ...], signatures: Mapping[str, Signature], shift: int
            ) -> Finding:
    """The finding, its line numbers (the child's) moved on by `shift`."""
    signature_id, values, index, lines = flat
    parsed = [ParsedLine(*_shifted(line, (_LINE_NUMBER,), shift)) for line in lines]
    values = _shifted(values, _FINDING_NUMBERS, shift)
    # the fields in order: signature, those _FINDING_FIELDS read, record, matched
    return Finding(signatures[signature_id], *values, Record(parsed),  # type: ignore[call-arg]
                   parsed[index])


def _shifted(values: tuple[Any, ...], at: tuple[int, ...], shift: int) -> tuple[Any, ...]:
    moved = list(values)
    for i in at:
        moved[i] += shift
    return tuple(moved)


def _spool(spool: IO[bytes], findings: list[Finding]) -> None:
    if findings:
        _frame(spool, ("findings", [_flat(f) for f in findings]))


# The spool is read while the child still writes it: each item is a frame (its length, then
# its pickle) written whole and flushed, so the reader takes only frames written to the end.
_LENGTH = struct.Struct("<Q")
FOLLOW_WAIT_SECONDS = 0.005  # at the spool's end, the child still scanning: looked again


def _frame(spool: IO[bytes], item: tuple[Any, ...]) -> None:
    payload = pickle.dumps(item, pickle.HIGHEST_PROTOCOL)
    spool.write(_LENGTH.pack(len(payload)) + payload)
    spool.flush()


def _frames(spool: IO[bytes], child: Any) -> Iterator[tuple[Any, ...]]:
    """The child's frames in order, as they are written; ends at its last one ("stats").
    Read with pread, which leaves alone the file offset the child writes at (the two share
    it). OSError when the child ends without its last frame (it failed)."""
    fd, at, ended = spool.fileno(), 0, False
    while True:
        head = os.pread(fd, _LENGTH.size, at)
        length = _LENGTH.unpack(head)[0] if len(head) == _LENGTH.size else -1
        payload = os.pread(fd, length, at + _LENGTH.size) if length >= 0 else b""
        if len(payload) == length:
            at += _LENGTH.size + length
            item = pickle.loads(payload)
            yield item
            if item[0] == "stats":
                return
            continue
        if ended:  # read after it ended, and still without its last frame
            raise OSError(f"the process scanning the second half failed ({child.exitcode})")
        if child.exitcode is not None:  # what it wrote before it ended is read once more
            ended = True
            continue
        multiprocessing.connection.wait([child.sentinel], FOLLOW_WAIT_SECONDS)


def scan_split(path: str, matcher: Matcher, label: str, reference: datetime, size: int,
               record: Callable[[list[Finding]], None]) -> ScanStats | None:
    """Scan with two processes, passing findings to `record` in line order; None when the
    file has no cut to make (no newline near its middle)."""
    kept: list[int] = [0, 0, 0]  # findings, distinct lines among them, the last line

    def count_and_record(findings: list[Finding]) -> None:
        for finding in findings:  # in line order: a new line is one not seen last
            kept[0] += 1
            if finding.lineno != kept[2]:
                kept[1], kept[2] = kept[1] + 1, finding.lineno
        record(findings)

    stats = _scan_halves(path, matcher, label, reference, size, count_and_record)
    if stats is not None:
        stats.findings, stats.matched_lines = kept[:2]
    return stats


def _scan_halves(path: str, matcher: Matcher, label: str, reference: datetime, size: int,
                 record: Callable[[list[Finding]], None]) -> ScanStats | None:
    with open(path, "rb") as stream:
        middle = _find_cut(stream, size)
        if not middle:
            return None  # nothing scanned: the caller scans the file alone
        first = BlockScanner(matcher, label, reference, whole_input=True)
        # a first part scanned alone (it ends at or before the middle): where to cut
        probed = _find_cut(stream, size, 1 / PROBE_PARTS)
        for block in _blocks(stream, 0, probed):
            record(first.feed(block))
        cut = _find_cut(stream, size, first_share(first.stats.findings, probed)) if probed else 0
        if cut < probed or not cut:
            cut = middle
        lead, tail = _reach(stream, cut, False, size), _reach(stream, cut, True, size)
        with tempfile.TemporaryFile(prefix="logwatch-split-") as spool:
            child = multiprocessing.get_context("fork").Process(
                target=_second_half,
                args=(path, matcher, label, reference, lead, cut, size, spool))
            child.start()
            try:
                for block in _blocks(stream, probed, cut):
                    record(first.feed(block))  # all on lines before the cut
                cut_line = first.stats.lines + 1
                repeated = first.stats.repeated_lines  # those before the cut
                for block in _blocks(stream, cut, tail):  # the lead-out: context only
                    record([f for f in first.feed(block) if f.lineno < cut_line])
                record([f for f in first.finish() if f.lineno < cut_line])
                first.stats.repeated_lines = repeated
                # the second half's findings, taken in while the child still scans
                stats = _merge_second(_frames(spool, child), matcher, record, first.stats,
                                      size, cut_line)
            finally:
                child.join()
            if child.exitcode != 0:
                raise OSError(f"the process scanning the second half failed ({child.exitcode})")
            return stats


def _merge_second(frames: Iterator[tuple[Any, ...]], matcher: Matcher,
                  record: Callable[[list[Finding]], None], first: ScanStats, size: int,
                  cut_line: int) -> ScanStats:
    signatures = WithDerived({s.id: s for s in matcher.signatures})
    shift = 0  # from the child's line numbers to the file's
    for kind, *rest in frames:
        if kind == "cut":
            shift = cut_line - rest[0]
            continue
        if kind == "findings":
            record([_unflat(flat, signatures, shift) for flat in rest[0]])
            continue
        second, timeouts, disabled = rest
        matcher.timeouts.update(timeouts)
        for signature_id, why in disabled.items():
            matcher.disabled.setdefault(signature_id, why)
        stats = ScanStats(lines=second.lines + shift, bytes=size,
                          repeated_lines=first.repeated_lines + second.repeated_lines)
        for name in ("hits", "benign_hits", "lines_parsed", "records",
                     "replaced_chars"):  # work done, the overlap's included
            setattr(stats, name, getattr(first, name) + getattr(second, name))
        return stats
    raise OSError("the process scanning the second half ended without its counts")
