"""Scan newline-aligned byte blocks: prefilter literals, run the full pipeline near hits only.

Lines far from any signature literal are counted, never decoded. For each hit, the record
holding the hit line is assembled from a small window of lines that widens only while the
record might reach beyond it (its first line does not open a record cleanly, or its writer
has not yet printed a line that closes it), so findings equal what the full per-line pipeline
gives. `full=True` runs the per-line pipeline everywhere (hard-wrapped logs, cross-checks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from logwatch.core.assemble import (
    CHAIN_MARKERS,
    QUIET_WRITER_LINES,
    TRAILERS,
    Assembler,
    starts_traceback,
)
from logwatch.core.findings import Finding
from logwatch.core.matcher import Matcher
from logwatch.core.records import ParsedLine, Record
from logwatch.core.vllm_format import parse_line, parse_sibling, plain_header, sibling_line

CONTEXT_BEFORE = 200  # lines: interleaved tracebacks of 8 ranks, or one plus its raw copy
CONTEXT_AFTER = 200
INITIAL_CONTEXT = 4  # most hits are one-line records; widen only when the record may go on
HEADER_SEARCH_BYTES = 16 << 10  # where a logger record's other lines would repeat its header
MAX_SAME_HEADER_LINES = 64
MAX_RUN_LINES = CONTEXT_BEFORE + CONTEXT_AFTER  # same-header lines of one record, at most
RUN_MEMO_ENTRIES = 256  # header runs remembered by their messages (see _run_from_memo)
RUN_MEMO_MAX_BYTES = 8 << 10
# Messages that join a same-header neighbour into one record (see assemble._continues).
_JOINING_STARTS = (b" ", b"\t", b"Traceback", b"The above exception", b"During handling", b"\r",
                   b"\n")
# Where a line with a logger header joins a neighbour: right after the header's `] `, one of
# _JOINING_STARTS. Found in one pass over a buffer when many lines ask (see _joiners_of).
_JOINER = re.compile(rb"\] (?=" + b"|".join(re.escape(s) for s in _JOINING_STARTS) + rb")")
JOINER_KEY = 40  # bytes before a joining message that index it: the header's tail
JOINER_INDEX_EVERY_LOG2 = 13  # build the index once a buffer asks once per 8 KiB
MAX_CARRY_BYTES = 32 << 20
MAX_PARSED_LINE = 1 << 20  # a longer line is parsed cut, with a marker
LINE_CUT_MARKER = b" \xe2\x80\xa6[line cut by logwatch: over 1 MiB]"

# What a scanner waits for when it holds a hit back (see BlockScanner.holding):
# "line": a logger line that no line at hand joins; only the bytes after it are missing to
# prove it alone. A logger writes a record whole, so a live reader can settle it at once.
# "record": a record that may go on (a traceback printed line by line, a raw block).
Holding = Literal["line", "record"]
_LATER: Final = "later"  # _single_line_record: nothing joins so far; more bytes would prove it


@dataclass(slots=True)
class ScanStats:
    lines: int = 0
    bytes: int = 0
    hits: int = 0
    lines_parsed: int = 0
    records: int = 0
    findings: int = 0
    matched_lines: int = 0  # distinct lines where some signature matched
    replaced_chars: int = 0  # invalid UTF-8 replaced with U+FFFD


class BlockScanner:
    """Feed blocks in order; collect findings. One instance per source."""

    def __init__(self, matcher: Matcher, source: str, reference: datetime,
                 full: bool = False, wrap_width: int | None = None,
                 start_line: int = 1) -> None:
        """`start_line`: the number of the first line fed (resuming from a checkpoint)."""
        self.matcher = matcher
        self.source = source
        self.reference = reference
        self.full = full
        self.stats = ScanStats()
        self._assembler = Assembler(wrap_width)  # the full pipeline's
        self._next_lineno = start_line
        self._fed_bytes = 0
        self._carry = b""  # bytes kept from the previous block (context or a waiting hit)
        self._carry_lineno = start_line  # line number of the first line in _carry
        self._carry_newlines = 0
        self._carry_hits: list[tuple[int, int]] = []  # (line number, offset) of hits in _carry
        self._carry_literals: dict[int, set[int]] = {}
        self._covered: set[int] = set()  # lines of records already matched
        self._emitted: set[tuple[str, int]] = set()  # (signature, line) already reported
        self._held: list[Finding] = []  # found, waiting for earlier records still open
        # Parsed lines of the carry, kept across blocks: a line's number names the same
        # complete line in every later buffer (live sources feed a few lines at a time).
        self._parsed: dict[int, ParsedLine] = {}
        self._runs: dict[tuple[bytes, tuple[bytes, ...]], _Run | None] = {}  # _run_from_memo
        # (hit line, lines after it needed before trying again): a record that may go on
        # is retried when the data after it has doubled, not on every small block
        self._recheck: tuple[int, int] | None = None
        self._holding: Holding | None = None
        self._settled = (0, start_line)  # (bytes, line) of the last flush

    def feed(self, block: bytes) -> list[Finding]:
        self.stats.bytes += len(block)
        self._fed_bytes += len(block)
        return self._process_full(block) if self.full else self._process(block, final=False)

    def finish(self) -> list[Finding]:
        return self._process_full(b"", final=True) if self.full else self._process(b"", True)

    def flush(self) -> list[Finding]:
        """Settle everything fed so far (a quiet live source) and keep going afterwards."""
        if self.full:
            return self._match(self._assembler.flush())
        findings = self._process(b"", final=True, keep_context=True)
        # nothing after this point joins a record before it: a resume may start here,
        # though the lines before it stay at hand as context for the next block
        self._settled = (self._fed_bytes, self.stats.lines + 1)
        return findings

    @property
    def holding(self) -> Holding | None:
        """Whether hits read are not reported yet (records that may go on, or findings
        waiting for an earlier one), and what the first of them waits for."""
        return self._holding

    def safe_point(self) -> tuple[int, int]:
        """(bytes, line) before which every line is processed and its findings returned: a
        checkpoint here loses nothing, and resuming from it repeats nothing unseen."""
        if self.full:
            return self._fed_bytes, self._next_lineno
        return max((self._fed_bytes - len(self._carry), self._carry_lineno), self._settled)

    # -- the full per-line pipeline -------------------------------------------------------
    def _process_full(self, block: bytes, final: bool = False) -> list[Finding]:
        records: list[Record] = []
        if block:
            raws = self._decode(block).split("\n")
            if raws[-1] == "":
                raws.pop()
            raws = [r if len(r) <= MAX_PARSED_LINE else
                    r[:MAX_PARSED_LINE] + LINE_CUT_MARKER.decode() for r in raws]
            for raw in raws:
                line = parse_line(self.source, self._next_lineno, raw, self.reference)
                self._next_lineno += 1
                records.extend(self._assembler.feed(line))
            self.stats.lines = self.stats.lines_parsed = self._next_lineno - 1
        if final:
            records.extend(self._assembler.flush())
        return self._match(records)

    # -- the prefiltered pipeline ---------------------------------------------------------
    def _process(self, block: bytes, final: bool, keep_context: bool = False
                 ) -> list[Finding]:
        """`final`: settle every hit with what is at hand. `keep_context`: more may follow
        (a flush), so keep the last lines as context for the next block's hits."""
        base = self._carry_lineno
        buf = self._carry + block if self._carry else block
        block_start = len(self._carry)
        hits = list(self._carry_hits)
        lineno, pos = base + self._carry_newlines, block_start
        literals = self._carry_literals  # line number -> literal ids found on it
        for off, literal_id in self.matcher.scanner.hits(block) if block else ():
            self.stats.hits += 1
            off += block_start
            lineno += buf.count(b"\n", pos, off)
            pos = off
            if not hits or hits[-1][0] != lineno:
                hits.append((lineno, buf.rfind(b"\n", 0, off) + 1))
                literals[lineno] = {literal_id}
            else:
                literals[lineno].add(literal_id)
        newlines = lineno - base + buf.count(b"\n", pos)  # one counting pass per block
        partial = bool(buf) and not buf.endswith(b"\n")
        last_line = base + newlines - 1 + (1 if final and partial else 0)
        end_anchor = (base + newlines, buf.rfind(b"\n") + 1 if partial else len(buf))
        self.stats.lines = max(self.stats.lines, last_line)

        lines = _Lines(self, buf, base, last_line, final)
        pending: int | None = None  # the first hit whose record may go on in the next block
        holding: Holding | None = None  # what it waits for
        forced = final or len(buf) >= MAX_CARRY_BYTES
        for index, hit in enumerate(hits):
            if hit[0] in self._covered:
                continue
            if (not forced and self._recheck is not None and self._recheck[0] == hit[0]
                    and last_line - hit[0] < self._recheck[1]):
                pending, holding = index, "record"  # too little new data to settle it yet
                break
            single = self._single_line_record(lines, hit, forced)
            if single == _LATER:
                pending, holding = index, "line"
                break
            if isinstance(single, Record):  # proven alone: no other record overlaps it
                self._held.extend(self._match([single], literals.get(hit[0])))
                continue
            record = self._header_run(lines, hit, forced)
            if record is None:
                record = self._record_around(lines, hit, forced)
            if record is None:
                pending, holding = index, "record"
                self._recheck = (hit[0], max(2 * (last_line - hit[0]), INITIAL_CONTEXT))
                break
            self._covered.update(line.lineno for line in record.lines)
            for finding in self._match([record]):
                key = (finding.signature.id, finding.lineno)
                if key not in self._emitted:
                    self._emitted.add(key)
                    self._held.append(finding)
        self.stats.lines_parsed += lines.parsed
        if pending is None:
            self._recheck = None
        if len(self._covered) + len(self._emitted) > 8192:
            floor = (hits[pending][0] if pending is not None else last_line) - CONTEXT_BEFORE
            self._covered = {n for n in self._covered if n >= floor}
            self._emitted = {e for e in self._emitted if e[1] >= floor}

        # release findings in line order: a waiting record may still yield earlier lines
        self._held.sort(key=_line_order)
        due = len(self._held)
        if pending is not None and not final:
            earliest = hits[pending][0] - CONTEXT_BEFORE
            due = next((i for i, f in enumerate(self._held) if f.lineno >= earliest), due)
        findings, self._held = self._held[:due], self._held[due:]
        self._holding = holding if not final else None

        if final and (not keep_context or partial):  # a cut last line was read as a line
            self._carry, self._carry_hits, self._carry_newlines = b"", [], 0
            self._carry_literals, self._parsed = {}, {}
            self._carry_lineno = last_line + 1
            return findings
        # keep everything the waiting hit may need, or else the last lines as context for
        # hits early in the next block
        first, offset = _context_start(buf, hits[pending] if pending is not None
                                       else end_anchor, base)
        self._carry = buf[offset:]
        self._carry_lineno = first
        waiting = hits[pending:] if pending is not None else []
        self._carry_hits = [(h, o - offset) for h, o in waiting]
        self._carry_literals = {h: literals[h] for h, _ in waiting if h in literals}
        self._carry_newlines = self._carry.count(b"\n")
        if self._parsed:
            self._parsed = {n: ln for n, ln in self._parsed.items() if n >= first}
        return findings

    def _record_around(self, lines: _Lines, hit: tuple[int, int],
                       final: bool) -> Record | None:
        """The record holding the hit line, from the smallest window that settles it; None
        when it may go on past what has been read so far."""
        before = after = INITIAL_CONTEXT
        tokens = _writer_tokens(lines.get(hit[0], hit))
        while True:
            low = max(lines.first, hit[0] - before)
            high = min(hit[0] + after, lines.last)
            if tokens and lines.plain(low, high, hit):  # only its writer's lines matter
                window = [lines.get(n, hit) for n in range(low, high + 1)
                          if n == hit[0] or lines.may_hold(n, hit, tokens)]
            else:
                window = [lines.get(n, hit) for n in range(low, high + 1)]
            assembler = Assembler(ordered=False)
            records = [r for ln in window for r in assembler.feed(ln)] + assembler.flush()
            record = next(r for r in records if any(ln.lineno == hit[0] for ln in r.lines))
            closed = _closed_in(record, window, lines)
            if high == lines.last and not final and not closed:
                return None  # it may go on in data not read yet
            widen_before = (low > lines.first and before < CONTEXT_BEFORE
                            and not _opens_cleanly(record, window, lines))
            widen_after = high < lines.last and after < CONTEXT_AFTER and not closed
            if not widen_before and not widen_after:
                return record
            if widen_before:
                before = min(before * 4, CONTEXT_BEFORE)
            if widen_after:
                after = min(after * 4, CONTEXT_AFTER)

    def _header_run(self, lines: _Lines, hit: tuple[int, int], final: bool) -> Record | None:
        """Fast path for a logger record of several lines (a traceback logged line by line):
        only lines with the hit line's exact header can join it, so the record is assembled
        from those alone, each read from its message without the header regex. None when
        unsure, and _record_around decides: a header not at a line start, a same-header line
        within reach beyond what is at hand or beyond the context, or a line of the same
        writer between them (it could split the record)."""
        line = lines.get(hit[0], hit)
        header = plain_header(line)
        raw = line.raw
        if (header is None or len(header) != len(raw) - len(line.message)
                or not raw.endswith(line.message) or "<" in header or "\x1b" in raw
                or "[0m" in raw):
            return None  # ... or what _header_bytes does not read as a header
        header_bytes = header.encode()
        buf, width = lines.buf, len(header_bytes)
        starts = [hit[1]]
        while len(starts) <= MAX_RUN_LINES:  # earlier lines, each within reach of the next
            floor = starts[-1] - HEADER_SEARCH_BYTES
            if floor < 0 and lines.first > 1:
                return None
            found = buf.rfind(header_bytes, max(floor, 0), starts[-1])
            if found < 0:
                break
            starts.append(found)
        starts.reverse()
        while len(starts) <= MAX_RUN_LINES:  # later lines, likewise
            after = starts[-1] + width + 1
            ceiling = after + HEADER_SEARCH_BYTES
            if ceiling > len(buf) and not lines.final:
                return None
            found = buf.find(header_bytes, after, min(ceiling, len(buf)))
            if found < 0:
                break
            starts.append(found)
        if len(starts) > MAX_RUN_LINES or len(starts) == 1:
            return None  # alone: _single_line_record said something may join after all
        numbers = [0] * len(starts)
        index = starts.index(hit[1])
        numbers[index] = hit[0]
        for i in range(index + 1, len(starts)):
            numbers[i] = numbers[i - 1] + buf.count(b"\n", starts[i - 1], starts[i])
        for i in range(index - 1, -1, -1):
            numbers[i] = numbers[i + 1] - buf.count(b"\n", starts[i], starts[i + 1])
        if (numbers[0] < max(lines.first, hit[0] - CONTEXT_BEFORE)
                or numbers[-1] > min(lines.last, hit[0] + CONTEXT_AFTER)):
            return None
        key = None
        if numbers[-1] - numbers[0] == len(starts) - 1:  # one line after another
            key = _run_key(buf, line, header_bytes, starts)
            if key is not None and key in self._runs:
                return self._run_from_memo(lines, line, header, numbers, index, self._runs[key])
        run: list[ParsedLine] = []
        for i, (number, start) in enumerate(zip(numbers, starts, strict=True)):
            if start > 0 and buf[start - 1] != 0x0A:
                return None  # the header inside another line, or after a prefix
            if i and number - numbers[i - 1] > 1:  # other lines between: none of this writer
                tokens = _writer_tokens(line)
                gap_start = buf.find(b"\n", starts[i - 1]) + 1
                if number - numbers[i - 1] > QUIET_WRITER_LINES or not tokens or all(
                        buf.find(token, gap_start, start) >= 0 for token in tokens):
                    return None
            sibling = line if number == hit[0] else lines.sibling(number, start, line, header)
            if sibling is None:
                if key is not None:
                    self._keep_run(key, None)  # the same lines are never read so
                return None
            run.append(sibling)
        assembler = Assembler(ordered=False)
        records = [r for ln in run for r in assembler.feed(ln)] + assembler.flush()
        if key is not None:
            self._remember_run(key, run, records, header)
        return next(r for r in records if any(ln.lineno == hit[0] for ln in r.lines))

    def _remember_run(self, key: tuple[bytes, tuple[bytes, ...]], run: list[ParsedLine],
                      records: list[Record], header: str) -> None:
        """Keep what a header run of consecutive lines gave: each line's text after the
        header, its message, and the record it went to (see _run_from_memo)."""
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
        self._keep_run(key, _Run(suffixes, messages, tuple(groups),
                                 tuple(texts[group] for group in groups)))

    def _keep_run(self, key: tuple[bytes, tuple[bytes, ...]], run: _Run | None) -> None:
        if len(self._runs) >= RUN_MEMO_ENTRIES:
            self._runs.clear()
        self._runs[key] = run

    def _run_from_memo(self, lines: _Lines, line: ParsedLine, header: str, numbers: list[int],
                       index: int, known: _Run | None) -> Record | None:
        """The record holding the hit line (`index` in the run), from a run of the same
        messages seen before under this header: each line's text, message and record are as
        then (assembly reads only the messages of lines that share a header), so only the
        lines of the hit's record are made, and none is decoded, parsed or assembled."""
        if known is None:
            return None
        first, last = known.groups[index]
        cache, made = lines._cache, []
        for i in range(first, last + 1):
            if i == index:
                made.append(line)
                continue
            number = numbers[i]
            sibling = cache.get(number)
            if sibling is None:
                sibling = sibling_line(line, number, header + known.suffixes[i],
                                       known.messages[i])
                lines.parsed += 1
            made.append(sibling)
        return Record(made, known.texts[index])

    def _single_line_record(self, lines: _Lines, hit: tuple[int, int],
                            final: bool) -> Record | str | None:
        """Fast path: a logger line is a record of its own when no nearby line with its exact
        header could join it. Every line of a multi-line logger record repeats the header,
        and a same-header line joins only as an indented line or as part of a traceback.
        _LATER when nothing at hand joins it but the bytes after it are not all read yet."""
        line = lines.get(hit[0], hit)
        message = line.message
        if (not message or message[:1] in (" ", "\t") or starts_traceback(message)
                or message.startswith(CHAIN_MARKERS)):
            return None
        located = _header_bytes(line)
        if located is None:
            return None
        header, skip = located
        buf = lines.buf
        low, high = hit[1] - HEADER_SEARCH_BYTES, hit[1] + HEADER_SEARCH_BYTES
        if low < 0 and lines.first > 1:
            return None  # the neighbourhood before reaches into a block not at hand
        later = high > len(buf) and not final  # ... or after it, into one not read yet
        low, high = max(low, 0), min(high, len(buf))
        alone = Record([line]) if not later else _LATER
        return alone if not lines.joiner_near(header, hit[1] + skip, low, high) else None

    def _decode(self, data: bytes) -> str:
        text = data.decode("utf-8", errors="replace")
        if "\ufffd" in text:
            self.stats.replaced_chars += text.count("\ufffd")
        return text.replace("\x00", "\ufffd") if "\x00" in text else text

    def _match(self, records: list[Record], literal_ids: set[int] | None = None
               ) -> list[Finding]:
        self.stats.records += len(records)
        if literal_ids is not None:
            findings = self.matcher.match_record(records[0], literal_ids)
        else:
            findings = self.matcher.match_records(records)
        if len(findings) > 1:
            findings.sort(key=_line_order)
            self.stats.matched_lines += len({f.lineno for f in findings})
        else:
            self.stats.matched_lines += len(findings)
        self.stats.findings += len(findings)
        return findings


class _Lines:
    """Lazily decoded and parsed lines of one buffer, cached across overlapping windows."""

    def __init__(self, scanner: BlockScanner, buf: bytes, first: int, last: int,
                 final: bool) -> None:
        self.scanner, self.buf, self.first, self.last = scanner, buf, first, last
        self.final = final  # nothing comes after this buffer
        self._cache = scanner._parsed  # complete lines only: the partial last is never read
        self.parsed = 0
        self._starts: dict[int, int] = {}
        self._clean: dict[bytes, tuple[int, int]] = {}  # header -> stretch with no joiner
        self._searches = 0  # joiner_near calls: many per byte make an index worth building
        self._joiners: dict[bytes, list[int]] | None = None  # see _joiners_of

    def joiner_near(self, header: bytes, own: int, low: int, high: int) -> bool:
        """Whether buf[low:high] repeats `header` (other than at offset `own`) followed by a
        message that would join a neighbour (indented, or a traceback): a record of several
        lines may hold the line at `own`."""
        self._searches += 1
        if (self._joiners is None and header.endswith(b"] ") and len(header) >= JOINER_KEY
                and self._searches << JOINER_INDEX_EVERY_LOG2 >= len(self.buf)):
            self._joiners = _joiners_of(self.buf)
        if self._joiners is not None and header.endswith(b"] ") and len(header) >= JOINER_KEY:
            # the header then ends every line it may join, right before the message
            width, buf = len(header), self.buf
            for start in self._joiners.get(header[-JOINER_KEY:], ()):
                if (low <= start - width and start <= high and start - width != own
                        and buf.startswith(header, start - width)):
                    return True
            return False
        if header in self._clean:  # a burst already seen (see below)
            return not self._no_joining_line(header, low, high)
        buf = self.buf
        found = buf.find(header, low, high)
        for _ in range(MAX_SAME_HEADER_LINES):
            if found < 0:
                return False
            if found != own and buf.startswith(_JOINING_STARTS, found + len(header)):
                return True
            found = buf.find(header, found + 1, high)
        # A burst of lines with one header (one call site, one second): ask directly whether
        # any of them could join, remembering the stretch already known to hold none.
        return not self._no_joining_line(header, low, high)

    def _no_joining_line(self, header: bytes, low: int, high: int) -> bool:
        """No line in buf[low:high] repeats `header` followed by a message that would join
        a neighbour (indented, or a traceback). Linear over a burst of same-header lines:
        each stretch of the buffer is searched once per header."""
        known_low, known_high = self._clean.get(header, (high, high))
        if known_high < low or known_low > high:  # no overlap: start afresh
            known_low, known_high = high, high
        for start, end in ((low, known_low), (known_high, high)):
            if start < end and any(
                    self.buf.find(header + joining, start, end + len(header) + len(joining)) >= 0
                    for joining in _JOINING_STARTS):
                return False
        self._clean[header] = (min(low, known_low), max(high, known_high))
        return True

    def start_of(self, lineno: int) -> int | None:
        """Byte offset of a line already read through `get`."""
        return self._starts.get(lineno)

    def _offset(self, lineno: int, anchor: tuple[int, int]) -> int:
        start = self._starts.get(lineno)
        if start is None:
            start = self._starts[lineno] = _walk(self.buf, anchor, lineno)
        return start

    def _end(self, lineno: int, anchor: tuple[int, int]) -> int:
        """Offset of the newline ending a line (or the buffer's end)."""
        end = self.buf.find(b"\n", self._offset(lineno, anchor))
        end = len(self.buf) if end < 0 else end
        self._starts[lineno + 1] = end + 1
        return end

    def plain(self, low: int, high: int, anchor: tuple[int, int]) -> bool:
        """Lines low..high hold nothing that unwrapping rewrites (colour, markup, escapes,
        JSON): a line's writer is then named by bytes the line itself holds."""
        start, end = self._offset(low, anchor), self._end(high, anchor)
        return _REWRITTEN.search(self.buf, start, end) is None

    def may_hold(self, lineno: int, anchor: tuple[int, int], tokens: tuple[bytes, ...]
                 ) -> bool:
        """Whether a line may be the writer's whose `tokens` these are (in `plain` lines, a
        line without them is not); a line parsed already is simply taken."""
        if lineno in self._cache:
            return True
        start, end = self._offset(lineno, anchor), self._end(lineno, anchor)
        return all(self.buf.find(token, start, end) >= 0 for token in tokens)

    def sibling(self, lineno: int, start: int, template: ParsedLine, header: str
                ) -> ParsedLine | None:
        """Line `lineno`, starting at `start` with `template`'s plain header, read as
        parse_line would (vllm_format.parse_sibling); None for a line it cannot read so."""
        line = self._cache.get(lineno)
        if line is not None:
            return line
        end = self.buf.find(b"\n", start)
        end = len(self.buf) if end < 0 else end
        if end - start > MAX_PARSED_LINE:
            return None
        self._starts[lineno], self._starts[lineno + 1] = start, end + 1
        line = parse_sibling(template, header, lineno, self.scanner._decode(self.buf[start:end]))
        if line is not None:
            self._parsed(lineno, end, line)
        return line

    def _parsed(self, lineno: int, end: int, line: ParsedLine) -> None:
        """Count a line parsed, and keep it if it is complete (the same in later buffers)."""
        self.parsed += 1
        if lineno <= self.last and (self.final or end < len(self.buf)):
            self._cache[lineno] = line

    def get(self, lineno: int, anchor: tuple[int, int]) -> ParsedLine:
        line = self._cache.get(lineno)
        if line is None:
            start = self._starts.get(lineno)
            if start is None:
                start = _walk(self.buf, anchor, lineno)
                self._starts[lineno] = start
            end = self.buf.find(b"\n", start)
            end = len(self.buf) if end < 0 else end
            self._starts[lineno + 1] = end + 1
            scanner = self.scanner
            raw = self.buf[start:min(end, start + MAX_PARSED_LINE)]
            if end - start > MAX_PARSED_LINE:  # parse a cut copy; byte accounting is unchanged
                raw += LINE_CUT_MARKER
            line = parse_line(scanner.source, lineno, scanner._decode(raw), scanner.reference)
            self._parsed(lineno, end, line)
        return line


# Where unwrapping (normalize.unwrap, vllm_format's JSON lines) may delete or decode text, so
# that a line's writer could be named by bytes the line does not hold as such: colour codes in
# every form, HTML tags and entities, escapes, JSON, carriage returns, markdown. A step that
# rewrites other text must add its trigger here (test_fast_path_equivalence checks samples).
# Written as one class of first bytes, then what must precede or follow each: `re` then skips
# ahead by the class (about 3x the speed of the plain alternation on header-heavy lines).
_REWRITTEN = re.compile(
    rb"[\x1b\\\r{`^\[*&<](?:(?<=[\x1b\\\r{`])|(?<=\^)\[|(?<=\[)[0-9;]*m(?![\w\]])"
    rb"|(?<=\*)\*|(?<=&)(?:lt|gt|quot|#39|amp);|(?<=<)/?(?i:font|b|span|strong)[\s>])")


@dataclass(frozen=True, slots=True)
class _Run:
    """What a header run of consecutive lines gave (BlockScanner._remember_run)."""

    suffixes: tuple[str, ...]  # each line's text after the header
    messages: tuple[str, ...]
    groups: tuple[tuple[int, int], ...]  # each line's record: its first and last line
    texts: tuple[str, ...]  # each line's record's message


def _run_key(buf: bytes, line: ParsedLine, header: bytes, starts: list[int]
             ) -> tuple[bytes, tuple[bytes, ...]] | None:
    """What a run of consecutive lines starting with `header` is remembered by: the header
    without its time, and each line's bytes after it. None for a run too long to keep, or
    whose lines do not each start with the header."""
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


def _joiners_of(buf: bytes) -> dict[bytes, list[int]]:
    """Where each message that would join a same-header neighbour starts, in order, under
    the JOINER_KEY bytes before it: a line repeating a header of at least that length and
    ending in `] ` is found by its tail, without searching the buffer for the header."""
    index: dict[bytes, list[int]] = {}
    for match in _JOINER.finditer(buf):
        start = match.end()
        index.setdefault(buf[start - JOINER_KEY:start], []).append(start)
    return index


def _line_order(finding: Finding) -> tuple[int, int]:
    return finding.lineno, finding.record_lineno


def _writer_tokens(line: ParsedLine) -> tuple[bytes, ...]:
    """Bytes every line of this line's writer holds (its process name, `pid=N`); empty when
    the writer is not named by a process prefix (a rank, the unprefixed stream)."""
    kind, *names = line.stream_key
    if kind != "proc":
        return ()
    process, pid = names
    # the digits apart from "pid=": "pid=007" names pid 7
    tokens: tuple[bytes, ...] = (b"pid=", b"%d" % pid) if isinstance(pid, int) else ()
    if isinstance(process, str):
        if not process.isascii():
            return ()
        tokens += (process.encode(),)
    return tokens


def _header_bytes(line: ParsedLine) -> tuple[bytes, int] | None:
    """A logger line's header as raw bytes (process prefix to `[file:line] `), and where it
    starts within the line; None for lines without one or with colour codes in it."""
    message, raw = line.message, line.raw
    if (line.kind != "vllm" or len(raw) <= len(message) or not raw.endswith(message)
            or "\x1b" in raw or "[0m" in raw or "<" in raw[: len(raw) - len(message)]):
        return None
    head = raw[: len(raw) - len(message)]
    start = head.find(f"({line.process}") if line.process else -1
    if start < 0 and line.level and line.vllm_time:
        start = head.find(f"{line.level} {line.vllm_time}")
    if start < 0:
        return None
    return head[start:].encode(), len(head[:start].encode())


def _header_absent(lines: _Lines, line: ParsedLine, before: bool) -> bool:
    """No other line with this logger line's exact header within reach on one side, so no
    record can join it from there. False when unsure (no header, or reach not at hand)."""
    located = _header_bytes(line)
    if located is None:
        return False
    header, skip = located
    start = lines.start_of(line.lineno)
    if start is None:
        return False
    if before:
        low = start - HEADER_SEARCH_BYTES
        if low < 0 and lines.first > 1:
            return False
        return lines.buf.find(header, max(low, 0), start) < 0
    high = start + skip + len(header) + 1 + HEADER_SEARCH_BYTES
    if high > len(lines.buf) and not lines.final:
        return False
    return lines.buf.find(header, start + skip + 1, min(high, len(lines.buf))) < 0


def _opens_cleanly(record: Record, window: list[ParsedLine], lines: _Lines) -> bool:
    """Whether the record's first line starts a record whatever came before the window."""
    first = record.first
    previous = next((ln for ln in reversed(window)
                     if ln.lineno < first.lineno and ln.stream_key == first.stream_key), None)
    if first.kind == "vllm":  # a logger record continues only under the very same header
        if previous is not None:
            return previous.kind != "vllm" or previous.header_key != first.header_key
        return _header_absent(lines, first, before=True)
    message = first.message
    if (previous is None or not message.strip() or message[:1] in (" ", "\t")
            or starts_traceback(message) or message.startswith(CHAIN_MARKERS)
            or message.startswith(TRAILERS)):
        return False
    # without a header, a line after an indented frame may be that traceback's last line
    return bool(previous.message.strip()) and previous.message[:1] not in (" ", "\t")


def _closed_in(record: Record, window: list[ParsedLine], lines: _Lines) -> bool:
    """Whether nothing after the window can join the record: its writer printed another line
    that did not continue it, or (for a logger record) its header does not come again."""
    key, last = record.first.stream_key, record.last_lineno
    if any(ln.lineno > last and ln.stream_key == key for ln in window):
        return True
    return record.lines[-1].kind == "vllm" and _header_absent(lines, record.lines[-1],
                                                               before=False)


def _context_start(buf: bytes, anchor: tuple[int, int], floor: int) -> tuple[int, int]:
    """(line, offset) where the context kept before `anchor` (line number, its offset)
    starts: CONTEXT_BEFORE lines and HEADER_SEARCH_BYTES bytes back, whichever reaches
    further, and not before line `floor` (the first in buf)."""
    line, offset = anchor
    start = buf.rfind(b"\n", 0, max(offset - HEADER_SEARCH_BYTES, 0)) + 1
    first = line - buf.count(b"\n", start, offset)
    if first > line - CONTEXT_BEFORE and start > 0:  # long lines: walk on to the line count
        target = max(floor, line - CONTEXT_BEFORE)
        start = _walk(buf, (first, start), target)
        first = target
    return first, start


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
