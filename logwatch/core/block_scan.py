"""Scan newline-aligned byte blocks: prefilter literals, run the full pipeline near hits only.

Lines far from any signature literal are counted, never decoded. Around each hit, a window
of lines (enough to hold a traceback) is decoded, parsed, assembled and matched, so the
findings equal what the full per-line pipeline would give on any realistic log. `full=True`
runs the per-line pipeline everywhere (hard-wrapped logs, cross-checks in tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from logwatch.core.assemble import Assembler
from logwatch.core.findings import Finding
from logwatch.core.matcher import Matcher
from logwatch.core.records import Record
from logwatch.core.vllm_format import parse_line

CONTEXT_BEFORE = 160  # lines: a logged traceback plus its raw multiprocessing copy
CONTEXT_AFTER = 40
MAX_CARRY_BYTES = 32 << 20


@dataclass(slots=True)
class ScanStats:
    lines: int = 0
    bytes: int = 0
    hits: int = 0
    lines_parsed: int = 0
    records: int = 0
    findings: int = 0
    replaced_chars: int = 0  # invalid UTF-8 replaced with U+FFFD


class BlockScanner:
    """Feed blocks in order; collect findings. One instance per source."""

    def __init__(self, matcher: Matcher, source: str, reference: datetime,
                 full: bool = False, wrap_width: int | None = None) -> None:
        self.matcher = matcher
        self.wrap_width = wrap_width
        self.source = source
        self.reference = reference
        self.full = full
        self.stats = ScanStats()
        self._carry = b""  # unprocessed bytes at the end of the previous block
        self._carry_lineno = 1  # line number of the first line in _carry
        self._carry_hits: list[tuple[int, int]] = []  # (line number, offset) of hits in _carry
        self._carry_newlines = 0
        self._done_until = 0  # last line number already processed
        self._next_lineno = 1

    def feed(self, block: bytes) -> list[Finding]:
        self.stats.bytes += len(block)
        if self.full:
            return self._process_full(block)
        return self._process(block, final=False)

    def finish(self) -> list[Finding]:
        if self.full:
            return self._process_full(b"", final=True)
        return self._process(b"", final=True)

    # -- the full per-line pipeline -------------------------------------------------------
    _assembler: Assembler | None = None

    def _process_full(self, block: bytes, final: bool = False) -> list[Finding]:
        if self._assembler is None:
            self._assembler = Assembler(self.wrap_width)
        records: list[Record] = []
        if block:
            text = self._decode(block)
            for raw in text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"):
                line = parse_line(self.source, self._next_lineno, raw, self.reference)
                self._next_lineno += 1
                records.extend(self._assembler.feed(line))
            self.stats.lines = self._next_lineno - 1
            self.stats.lines_parsed = self.stats.lines
        if final:
            records.extend(self._assembler.flush())
        return self._match(records)

    # -- the prefiltered pipeline ---------------------------------------------------------
    def _process(self, block: bytes, final: bool) -> list[Finding]:
        base = self._carry_lineno
        buf = self._carry + block if self._carry else block
        block_start = len(self._carry)
        hits = list(self._carry_hits)  # (line number, offset of the line's start in buf)
        lineno, pos = base + self._carry_newlines, block_start
        for off in self.matcher.scanner.hit_offsets(block) if block else ():
            self.stats.hits += 1
            off += block_start
            lineno += buf.count(b"\n", pos, off)
            pos = off
            if not hits or hits[-1][0] != lineno:
                hits.append((lineno, buf.rfind(b"\n", 0, off) + 1))
        newlines = self._carry_newlines + block.count(b"\n")
        partial = bool(buf) and not buf.endswith(b"\n")
        last_line = base + newlines - 1 + (1 if final and partial else 0)
        end_anchor = (base + newlines, buf.rfind(b"\n") + 1 if partial else len(buf))
        self.stats.lines = max(self.stats.lines, last_line)

        findings: list[Finding] = []
        carry: tuple[int, int] | None = None  # (line number, offset) to keep for next block
        for first_hit, last_hit, start, stop in _regions(hits, self._done_until, base):
            if stop > last_line:
                if not final and len(buf) < MAX_CARRY_BYTES:
                    carry = (start, _walk(buf, first_hit, start))
                    break
                stop = last_line
            begin = _walk(buf, first_hit, start)
            end = _walk(buf, last_hit, stop + 1)
            findings.extend(self._match(self._region_records(buf[begin:end], start)))
            self._done_until = stop
        if final:
            self._carry, self._carry_hits, self._carry_newlines = b"", [], 0
            return findings
        if carry is None:  # keep the last lines as context for hits early in the next block
            line = max(base, end_anchor[0] - CONTEXT_BEFORE, self._done_until + 1)
            carry = (line, _walk(buf, end_anchor, line))
        line, offset = carry
        self._carry = buf[offset:]
        self._carry_lineno = line
        self._carry_hits = [(h, o - offset) for h, o in hits if h >= line]
        self._carry_newlines = self._carry.count(b"\n")
        return findings

    def _region_records(self, data: bytes, start: int) -> list[Record]:
        text = self._decode(data)
        raws = text.split("\n")
        if raws and raws[-1] == "":
            raws.pop()
        assembler = Assembler()
        records: list[Record] = []
        for i, raw in enumerate(raws):
            records.extend(assembler.feed(parse_line(self.source, start + i, raw,
                                                     self.reference)))
        records.extend(assembler.flush())
        self.stats.lines_parsed += len(raws)
        return records

    def _decode(self, data: bytes) -> str:
        text = data.decode("utf-8", errors="replace")
        if "\ufffd" in text:
            self.stats.replaced_chars += text.count("\ufffd")
        return text.replace("\x00", "\ufffd") if "\x00" in text else text

    def _match(self, records: list[Record]) -> list[Finding]:
        self.stats.records += len(records)
        records.sort(key=lambda r: r.lineno)
        findings = self.matcher.match_records(records)
        findings.sort(key=lambda f: (f.lineno, f.record_lineno))
        self.stats.findings += len(findings)
        return findings


def _regions(hits: list[tuple[int, int]], done_until: int,
             first: int) -> list[tuple[tuple[int, int], tuple[int, int], int, int]]:
    """Merged line windows around hits: (first hit, last hit, start line, stop line)."""
    regions: list[tuple[tuple[int, int], tuple[int, int], int, int]] = []
    for hit in hits:
        if hit[0] <= done_until:
            continue
        start = max(hit[0] - CONTEXT_BEFORE, done_until + 1, first)
        stop = hit[0] + CONTEXT_AFTER
        if regions and start <= regions[-1][3] + 1:
            f, _, s, e = regions[-1]
            regions[-1] = (f, hit, s, max(e, stop))
        else:
            regions.append((hit, hit, start, stop))
    return regions


def _walk(buf: bytes, anchor: tuple[int, int], target: int) -> int:
    """Offset where line `target` starts, walking from an anchor (line number, its offset)."""
    lineno, offset = anchor
    while lineno > target and offset > 0:
        offset = buf.rfind(b"\n", 0, offset - 1) + 1
        lineno -= 1
    while lineno < target:
        nl = buf.find(b"\n", offset)
        if nl < 0:
            return len(buf)
        offset = nl + 1
        lineno += 1
    return offset
