"""Scan newline-aligned byte blocks: prefilter literals, run the full pipeline near hits only.

Lines far from any signature literal are counted, never decoded. For each hit, the record
holding the hit line is assembled from a small window of lines that widens only while the
record might reach beyond it (its first line does not open a record cleanly, or its writer
has not yet printed a line that closes it), so findings equal what the full per-line pipeline
gives. `full=True` runs the per-line pipeline everywhere (hard-wrapped logs, cross-checks).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from logwatch.core.lines.assemble import (
    CHAIN_MARKERS,
    QUIET_WRITER_LINES,
    TRAILERS,
    Assembler,
    starts_traceback,
)
from logwatch.core.lines.buffer_lines import (
    LINE_CUT_MARKER,
    MAX_PARSED_LINE,
    BufferLines,
    decoloured_header,
    header_bytes,
    walk,
    writer_tokens,
)
from logwatch.core.lines.header_runs import RunMemo, run_key
from logwatch.core.lines.records import ParsedLine, Record
from logwatch.core.lines.vllm_format import parse_line, plain_header
from logwatch.core.signatures.fallback import NEEDS_WHOLE_RECORD
from logwatch.core.signatures.findings import Finding
from logwatch.core.signatures.matcher import Matcher
from logwatch.core.signatures.repeats import Runs

CONTEXT_BEFORE = 200  # lines: interleaved tracebacks of 8 ranks, or one plus its raw copy
CONTEXT_AFTER = 200
INITIAL_CONTEXT = 4  # most hits are one-line records; widen only when the record may go on
HEADER_SEARCH_BYTES = 16 << 10  # where a logger record's other lines would repeat its header
MAX_RUN_LINES = CONTEXT_BEFORE + CONTEXT_AFTER  # same-header lines of one record, at most
MAX_CARRY_BYTES = 32 << 20

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
    benign_hits: int = 0  # hits on request-lifecycle lines, passed over (core.lines.benign)
    lines_parsed: int = 0
    records: int = 0
    findings: int = 0
    matched_lines: int = 0  # distinct lines where some signature matched
    replaced_chars: int = 0  # invalid UTF-8 replaced with U+FFFD
    repeated_lines: int = 0  # a status line's run after its first (core.signatures.repeats)


class BlockScanner:
    """Feed blocks in order; collect findings. One instance per source."""

    def __init__(self, matcher: Matcher, source: str, reference: datetime,
                 full: bool = False, wrap_width: int | None = None,
                 start_line: int = 1, soft_wrap: bool = False,
                 whole_input: bool = False) -> None:
        """`start_line`: the number of the first line fed (resuming from a checkpoint).
        `whole_input`: the input is read whole, from its start to its end (a scan; not a live
        source, which may go on or have begun before what is read): only then are the
        findings made that need a whole record (fallback.NEEDS_WHOLE_RECORD)."""
        self.matcher = matcher
        self.source = source
        self.reference = reference
        self.full = full
        self.stats = ScanStats()
        self._assembler = Assembler(wrap_width, soft_wrap=soft_wrap)  # the full pipeline's
        self._next_lineno = start_line
        # a record that starts at a resume point may have begun before it
        self._head_floor = start_line if start_line > 1 else 0
        self._whole_input = whole_input
        self._flushing = False  # in a flush, no record is known whole
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
        self.parsed_lines: dict[int, ParsedLine] = {}
        self._runs = RunMemo()  # header runs seen before (core.lines.header_runs)
        # (hit line, lines after it needed before trying again): a record that may go on
        # is retried when the data after it has doubled, not on every small block
        self._recheck: tuple[int, int] | None = None
        self._holding: Holding | None = None
        self._settled = (0, start_line)  # (bytes, line) of the last flush
        # runs of a repeating status line, reported on their first (core.signatures.repeats)
        self._repeats = Runs(matcher, start_line)
        # (line, error) of hits whose record the pipeline failed on: a fault of logwatch's,
        # whatever the line; that record is passed over, the rest of the block is scanned.
        # The caller takes and tells them (`take_faults`).
        self.faults: list[tuple[int, str]] = []

    def take_faults(self) -> list[tuple[int, str]]:
        faults, self.faults = self.faults, []
        return faults

    def feed(self, block: bytes) -> list[Finding]:
        self.stats.bytes += len(block)
        self._fed_bytes += len(block)
        return self._process_full(block) if self.full else self._process(block, final=False)

    def finish(self) -> list[Finding]:
        return self._process_full(b"", final=True) if self.full else self._process(b"", True)

    def flush(self) -> list[Finding]:
        """Settle everything fed so far (a quiet live source) and keep going afterwards."""
        if self.full:
            return self._count(self._match(self._repeats.unpassed(self._assembler.flush()),
                                           head_floor=self._head_floor))
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

    def settled_point(self) -> tuple[int, int]:
        """(bytes, line) before which every line is processed and its findings returned."""
        if self.full:
            return self._fed_bytes, self._next_lineno
        return max((self._fed_bytes - len(self._carry), self._carry_lineno), self._settled)

    def safe_point(self) -> tuple[int, int]:
        """(bytes, line) to resume from, reading again: a checkpoint here loses nothing, and
        resuming from it repeats nothing unseen. It is the settled point, or the first line
        of the run of a repeating status line going on there (reported again, the same
        finding), as the lines after it are passed over only after that first one."""
        point = self.settled_point()
        return point if self.full else self._repeats.resume_point(point)

    # -- the full per-line pipeline -------------------------------------------------------
    def _process_full(self, block: bytes, final: bool = False) -> list[Finding]:
        records: list[Record] = []
        if block:
            if self._repeats.active:
                self.stats.repeated_lines += self._repeats.judge_block(
                    block, self._next_lineno, self.matcher.scanner)
            raws = self.decode(block).split("\n")
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
        return self._count(self._match(self._repeats.unpassed(records),
                                       head_floor=self._head_floor))

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
        # hits on request-lifecycle lines (core.lines.benign) are passed over in the
        # literal pass itself, before a line is even numbered
        found, passed = self.matcher.scanner.hits_outside_requests(
            block, at_line_start=not block_start or buf[block_start - 1] == 0x0A) \
            if block else ([], 0)
        self.stats.hits += len(found) + passed
        self.stats.benign_hits += passed
        newlines_in = self.matcher.scanner.newlines
        for off, literal_id in found:
            off += block_start
            lineno += newlines_in(buf, pos, off)
            pos = off
            if not hits or hits[-1][0] != lineno:
                hits.append((lineno, buf.rfind(b"\n", 0, off) + 1))
                literals[lineno] = {literal_id}
            else:
                literals[lineno].add(literal_id)
        newlines = lineno - base + newlines_in(buf, pos, len(buf))  # one pass per block
        partial = bool(buf) and not buf.endswith(b"\n")
        if self._repeats.active and hits:
            hits, passed = self._repeats.pass_over(buf, hits, literals, final,
                                                   self._fed_bytes - len(buf))
            self.stats.repeated_lines += passed
        last_line = base + newlines - 1 + (1 if final and partial else 0)
        end_anchor = (base + newlines, buf.rfind(b"\n") + 1 if partial else len(buf))
        self.stats.lines = max(self.stats.lines, last_line)

        lines = BufferLines(self, buf, base, last_line, final,
                            self.matcher.scanner.native_joiner)
        # a flush settles what is at hand, though a record may go on after it (or its last
        # line be half written)
        self._flushing = final and keep_context
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
            try:
                waits = self._settle_hit(lines, hit, forced, literals)
            except Exception as exc:  # a fault of ours: this record only is passed over
                self._covered.add(hit[0])
                self.faults.append((hit[0], f"{type(exc).__name__}: {str(exc)[:300]}"))
                continue
            if waits is not None:
                pending, holding = index, waits
                if waits == "record":
                    self._recheck = (hit[0], max(2 * (last_line - hit[0]), INITIAL_CONTEXT))
                break
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
            self._carry_literals, self.parsed_lines = {}, {}
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
        self._carry_newlines = newlines_in(self._carry, 0, len(self._carry))
        self._repeats.forget_before(first)
        if self.parsed_lines:
            self.parsed_lines = {n: ln for n, ln in self.parsed_lines.items() if n >= first}
        return findings

    def prime_repeats(self, before: bytes) -> bool:
        """Take the run state (core.signatures.repeats) from the lines before the first one
        fed: False when `before` holds no hit line (see Runs.prime)."""
        return self._repeats.prime(before, self.matcher.scanner)

    def _settle_hit(self, lines: BufferLines, hit: tuple[int, int], forced: bool,
                    literals: dict[int, set[int]]) -> Holding | None:
        """Match the record around one hit, its findings held in line order; or what it
        waits for ("line", "record") when the data after it may still change it."""
        single = self._single_line_record(lines, hit, forced)
        if single == _LATER:
            return "line"
        if isinstance(single, Record):  # proven alone: no other record overlaps it
            self._held.extend(self._count(self._match([single], literals.get(hit[0]),
                                                      head_floor=self._head_floor)))
            return None
        floor = self._head_floor  # a header run's first line is where its header begins
        record = self._header_run(lines, hit, forced)
        if record is None:
            record, cut = self._record_around(lines, hit, forced)
            if record is not None and cut:
                floor = record.last_lineno  # the window may have cut it: not whole
        if record is None:
            return "record"
        self._covered.update(line.lineno for line in record.lines)
        fresh = []
        for finding in self._match([record], head_floor=floor):
            key = (finding.signature.id, finding.lineno)
            if key not in self._emitted:
                self._emitted.add(key)
                fresh.append(finding)
        self._held.extend(self._count(fresh))
        return None

    def _record_around(self, lines: BufferLines, hit: tuple[int, int],
                       final: bool) -> tuple[Record | None, bool]:
        """The record holding the hit line, from the smallest window that settles it (None
        when it may go on past what has been read so far), and whether the window may have
        cut it: its first line is the window's first (not the input's) and does not open
        cleanly, or it may go on after the window."""
        before = after = INITIAL_CONTEXT
        own = lines.get(hit[0], hit)
        tokens = writer_tokens(own)
        # Only the hit line's writer's lines can join its record: those told from others' by
        # their bytes (BufferLines.holding, may_be_unprefixed) are left out
        def chosen(first: int, last: int) -> list[int]:
            if tokens:
                return lines.holding(first, last, hit, tokens)
            if own.stream_key == ("raw",):
                return [n for n in range(first, last + 1) if lines.may_be_unprefixed(n, hit)]
            return list(range(first, last + 1))

        # The lines chosen are kept as the window widens; widened after only, the assembler
        # goes on from what it was fed (the same lines in the same order leave it as one fed
        # them all at once); widened before, it is fed them all again.
        assembler = Assembler(ordered=False)
        window: list[ParsedLine] = []
        done: list[Record] = []  # records closed so far
        fed = (hit[0], hit[0] - 1)  # (low, high) of the lines chosen
        while True:
            low = max(lines.first, hit[0] - before)
            high = min(hit[0] + after, lines.last)
            head = [lines.get(n, hit) for n in chosen(low, fed[0] - 1)]
            later = chosen(fed[1] + 1, high)
            if fed[1] < hit[0] and hit[0] not in later:  # the hit line, whatever its bytes
                later = sorted([*later, hit[0]])
            tail = [lines.get(n, hit) for n in later]
            fed = (low, high)
            if head:
                window = head + window + tail
                assembler, done, added = Assembler(ordered=False), [], window
            else:
                window += tail
                added = tail
            done.extend(r for ln in added for r in assembler.feed(ln))
            records = done + assembler.open_records()
            record = next(r for r in records if any(ln.lineno == hit[0] for ln in r.lines))
            closed = _closed_in(record, window, lines) or not assembler.may_go_on(record)
            if high == lines.last and not final and not closed:
                return None, False  # it may go on in data not read yet
            widen_before = (low > lines.first and before < CONTEXT_BEFORE
                            and not _opens_cleanly(record, window, lines))
            widen_after = high < lines.last and after < CONTEXT_AFTER and not closed
            if not widen_before and not widen_after:
                cut = ((low > 1 and record.first.lineno <= low
                        and not _opens_cleanly(record, window, lines))
                       or (high < lines.last and not closed))
                return record, cut
            if widen_before:
                before = min(before * 4, CONTEXT_BEFORE)
            if widen_after:
                after = min(after * 4, CONTEXT_AFTER)

    def _header_run(self, lines: BufferLines, hit: tuple[int, int], final: bool) -> Record | None:
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
            return None  # ... or what header_bytes does not read as a header
        header_raw = header.encode()
        buf, width = lines.buf, len(header_raw)
        starts = [hit[1]]
        while len(starts) <= MAX_RUN_LINES:  # earlier lines, each within reach of the next
            if starts[-1] - HEADER_SEARCH_BYTES < 0 and lines.first > 1:
                return None
            floor = lines.around(starts[-1], starts[-1], HEADER_SEARCH_BYTES)[0]
            found = buf.rfind(header_raw, floor, starts[-1])
            if found < 0:
                break
            starts.append(found)
        starts.reverse()
        while len(starts) <= MAX_RUN_LINES:  # later lines, likewise
            end = lines.line_end(starts[-1])
            if end + HEADER_SEARCH_BYTES > len(buf) and not lines.final:
                return None
            ceiling = lines.around(starts[-1], end, HEADER_SEARCH_BYTES)[1]
            found = buf.find(header_raw, starts[-1] + width + 1, ceiling)
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
            key = run_key(buf, line, header_raw, starts)
            if key is not None and key in self._runs:
                record, made = self._runs.record(key, line, header, numbers, index, lines.cache)
                lines.parsed += made
                return record
        run: list[ParsedLine] = []
        for i, (number, start) in enumerate(zip(numbers, starts, strict=True)):
            if start > 0 and buf[start - 1] != 0x0A:
                return None  # the header inside another line, or after a prefix
            if i and number - numbers[i - 1] > 1:  # other lines between: none of this writer
                tokens = writer_tokens(line)
                gap_start = buf.find(b"\n", starts[i - 1]) + 1
                if number - numbers[i - 1] > QUIET_WRITER_LINES or not tokens or all(
                        buf.find(token, gap_start, start) >= 0 for token in tokens):
                    return None
            sibling = line if number == hit[0] else lines.sibling(number, start, line, header)
            if sibling is None:
                if key is not None:
                    self._runs.forget(key)  # the same lines are never read so
                return None
            run.append(sibling)
        assembler = Assembler(ordered=False)
        records = [r for ln in run for r in assembler.feed(ln)] + assembler.flush()
        if key is not None:
            self._runs.remember(key, run, records, header)
        return next(r for r in records if any(ln.lineno == hit[0] for ln in r.lines))

    def _single_line_record(self, lines: BufferLines, hit: tuple[int, int],
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
        located = header_bytes(line)
        coloured = decoloured_header(line) if located is None else None
        if located is None and coloured is None:
            return None
        buf, end = lines.buf, lines.line_end(hit[1])
        if hit[1] - HEADER_SEARCH_BYTES < 0 and lines.first > 1:
            return None  # the neighbourhood before reaches into a block not at hand
        later = end + HEADER_SEARCH_BYTES > len(buf) and not final  # ... or one not read yet
        low, high = lines.around(hit[1], end, HEADER_SEARCH_BYTES)
        alone = Record([line]) if not later else _LATER
        if located is not None:
            header, skip = located
            return alone if not lines.joiner_near(header, hit[1] + skip, low, high) else None
        assert coloured is not None
        # coloured: the neighbourhood read without its colour codes, where that is all
        return alone if lines.decoloured_joiner_near(coloured, hit[1], low, high) is False \
            else None

    def decode(self, data: bytes) -> str:
        text = data.decode("utf-8", errors="replace")
        if "\ufffd" in text:
            self.stats.replaced_chars += text.count("\ufffd")
        return text.replace("\x00", "\ufffd") if "\x00" in text else text

    def _match(self, records: list[Record], literal_ids: set[int] | None = None,
               head_floor: int = 0) -> list[Finding]:
        """The records' findings; those whose rule needs the whole record
        (fallback.NEEDS_WHOLE_RECORD) not where the record starts at or before `head_floor`
        (a resume point, or a window that may have cut the record, lies there), nor in a
        flush (a live source gone quiet: what is at hand may go on), nor unless the input is
        read whole."""
        self.stats.records += len(records)
        if literal_ids is not None:
            findings = self.matcher.match_record(records[0], literal_ids)
        else:
            findings = self.matcher.match_records(records)
        if (head_floor or self._flushing or not self._whole_input) and findings:
            findings = [f for f in findings if f.signature.id not in NEEDS_WHOLE_RECORD
                        or (head_floor < f.record_lineno and not self._flushing
                            and self._whole_input)]
        if len(findings) > 1:
            findings.sort(key=_line_order)
        return findings

    def _count(self, findings: list[Finding]) -> list[Finding]:
        """Findings reported (each once), counted in the stats."""
        if len(findings) > 1:
            self.stats.matched_lines += len({f.lineno for f in findings})
        else:
            self.stats.matched_lines += len(findings)
        self.stats.findings += len(findings)
        return findings


def _line_order(finding: Finding) -> tuple[int, int]:
    return finding.lineno, finding.record_lineno


def _header_absent(lines: BufferLines, line: ParsedLine, before: bool) -> bool:
    """No other line with this logger line's exact header within reach on one side, so no
    record can join it from there: looked for in the raw bytes, or, for a coloured line, in
    the bytes read without colour codes (BufferLines.decoloured). False when unsure (no
    header, the reach not at hand, colour in another form there)."""
    located = header_bytes(line)
    header = located[0] if located is not None else decoloured_header(line)
    start = lines.start_of(line.lineno)
    if header is None or start is None:
        return False
    buf, end = lines.buf, lines.line_end(start)
    if (start - HEADER_SEARCH_BYTES < 0 and lines.first > 1 if before
            else end + HEADER_SEARCH_BYTES > len(buf) and not lines.final):
        return False  # the reach on that side is not at hand
    low, high = lines.around(start, end, HEADER_SEARCH_BYTES)
    if before:
        high = start
    else:  # past its own header (a coloured line's: past the line)
        low = start + located[1] + 1 if located is not None else end + 1
    if located is not None:
        return buf.find(header, low, high) < 0
    found = lines.decoloured(low, high)
    return found is not None and found[0].find(header, found[1], found[2]) < 0


def _opens_cleanly(record: Record, window: list[ParsedLine], lines: BufferLines) -> bool:
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
            or message.startswith(CHAIN_MARKERS) or message.startswith(TRAILERS)):
        return False
    if starts_traceback(message):
        # a traceback's head joins the record before it only after a line of the same
        # logger call, "Process X:", a chain marker (and blank lines after it) or a line
        # ending in ":" (assemble._continues): after any other line, whatever came before
        # that line, it opens a record
        before = previous.message.strip()
        return previous.kind == "vllm" or (bool(before) and not before.endswith(":")
                                           and not before.startswith(CHAIN_MARKERS))
    # without a header, a line after an indented frame may be that traceback's last line
    return bool(previous.message.strip()) and previous.message[:1] not in (" ", "\t")


def _closed_in(record: Record, window: list[ParsedLine], lines: BufferLines) -> bool:
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
        start = walk(buf, (first, start), target)
        first = target
    return first, start
