"""The lines of one buffer the block scanner works on, decoded and parsed only when asked
for and kept across the windows that overlap; and where in a buffer a message would join a
same-header neighbour, searched for or indexed in one pass when many lines ask.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Protocol

from logwatch.core.lines.native import speedups
from logwatch.core.lines.records import ParsedLine
from logwatch.core.lines.vllm_format import parse_line, parse_sibling

MAX_SAME_HEADER_LINES = 64
JOINER_KEY = 40  # bytes before a joining message that index it: the header's tail
JOINER_INDEX_EVERY_LOG2 = 13  # build the index once a buffer asks once per 8 KiB
MAX_PARSED_LINE = 1 << 20  # a longer line is parsed cut, with a marker
LINE_CUT_MARKER = b" \xe2\x80\xa6[line cut by logwatch: over 1 MiB]"
# Messages that join a same-header neighbour into one record (see assemble._continues).
JOINING_STARTS = (b" ", b"\t", b"Traceback", b"The above exception", b"During handling", b"\r",
                   b"\n")
# Where a line with a logger header joins a neighbour: right after the header's `] `, one of
# JOINING_STARTS. Found in one pass over a buffer when many lines ask (see joiners_of).
JOINER = re.compile(rb"\] (?=" + b"|".join(re.escape(s) for s in JOINING_STARTS) + rb")")


# _speedups.joiner_near (core.signatures.prefilter): (buf, header, own, low, high, starts)
NativeJoiner = Callable[[bytes, bytes, int, int, int, tuple[bytes, ...]], bool]


class LineReader(Protocol):
    """What reads a buffer's lines (the block scanner): its source, the time that anchors
    years, the lines parsed so far (kept across buffers) and the decoding it counts."""

    source: str
    reference: datetime
    parsed_lines: dict[int, ParsedLine]

    def decode(self, data: bytes) -> str: ...


class BufferLines:
    """Lazily decoded and parsed lines of one buffer, cached across overlapping windows."""

    def __init__(self, reader: LineReader, buf: bytes, first: int, last: int,
                 final: bool, native_joiner: NativeJoiner | None = None) -> None:
        """`native_joiner`: joiner_near's question asked in C (_speedups.joiner_near)."""
        self.reader, self.buf, self.first, self.last = reader, buf, first, last
        self._native_joiner = native_joiner
        self.final = final  # nothing comes after this buffer
        self.cache = reader.parsed_lines  # complete lines only: the partial last never is
        self.parsed = 0
        self._starts: dict[int, int] = {}
        self._clean: dict[bytes, tuple[int, int]] = {}  # header -> stretch with no joiner
        self._searches = 0  # joiner_near calls: many per byte make an index worth building
        self._joiners: dict[bytes, list[int]] | None = None  # see joiners_of
        self._decoloured: _Decoloured | None = None  # see decoloured

    def joiner_near(self, header: bytes, own: int, low: int, high: int) -> bool:
        """Whether buf[low:high] repeats `header` (other than at offset `own`) followed by a
        message that would join a neighbour (indented, or a traceback): a record of several
        lines may hold the line at `own`."""
        if self._native_joiner is not None:  # every repeat looked at, as the index does
            return self._native_joiner(self.buf, header, own, low, high, JOINING_STARTS)
        self._searches += 1
        indexable = header.endswith(b"] ") and len(header) >= JOINER_KEY
        if (indexable and self._joiners is None
                and self._searches << JOINER_INDEX_EVERY_LOG2 >= len(self.buf)):
            self._joiners = joiners_of(self.buf)
        if indexable and self._joiners is not None:
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
            if found != own and buf.startswith(JOINING_STARTS, found + len(header)):
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
                    for joining in JOINING_STARTS):
                return False
        self._clean[header] = (min(low, known_low), max(high, known_high))
        return True

    def around(self, start: int, end: int, reach: int) -> tuple[int, int]:
        """The bytes within `reach` of buf[start:end] (a line), widened to whole lines: a
        reach is a gap between lines, so a long line beside it (or its own) does not push
        a neighbour's start out of it."""
        low = self.buf.rfind(b"\n", 0, max(start - reach, 0)) + 1
        high = self.buf.find(b"\n", min(end + reach, len(self.buf)))
        return low, len(self.buf) if high < 0 else high

    def line_end(self, start: int) -> int:
        """Where the line starting at `start` ends (its newline, or the buffer's end)."""
        end = self.buf.find(b"\n", start)
        return len(self.buf) if end < 0 else end

    def start_of(self, lineno: int) -> int | None:
        """Byte offset of a line already read through `get`."""
        return self._starts.get(lineno)

    def _offset(self, lineno: int, anchor: tuple[int, int]) -> int:
        start = self._starts.get(lineno)
        if start is None:
            before = self._starts.get(lineno - 1)  # a window is read in order: one step
            if before is not None and lineno - 1 >= self.first:
                end = self.buf.find(b"\n", before)
                start = len(self.buf) if end < 0 else end + 1
            else:
                start = walk(self.buf, anchor, lineno)
            self._starts[lineno] = start
        return start

    def _end(self, lineno: int, anchor: tuple[int, int]) -> int:
        """Offset of the newline ending a line (or the buffer's end)."""
        after = self._starts.get(lineno + 1)  # the next line's start, just past the newline
        if after is not None and 0 < after <= len(self.buf) and self.buf[after - 1] == 0x0A:
            return after - 1
        end = self.buf.find(b"\n", self._offset(lineno, anchor))
        end = len(self.buf) if end < 0 else end
        self._starts[lineno + 1] = end + 1
        return end

    def plain(self, low: int, high: int, anchor: tuple[int, int]) -> bool:
        """Lines low..high hold nothing that unwrapping rewrites (colour, markup, escapes,
        JSON): each line's writer is then named by bytes the line itself holds."""
        start, end = self._offset(low, anchor), self._end(high, anchor)
        return REWRITTEN.search(self.buf, start, end) is None

    def may_hold(self, lineno: int, anchor: tuple[int, int], tokens: tuple[bytes, ...]
                 ) -> bool:
        """Whether a line may be the writer's whose `tokens` these are: a `plain` line
        without them is not (unwrapping reads one line at a time, so a line's own bytes
        decide); a line parsed already is simply taken."""
        if lineno in self.cache:
            return True
        start, end = self._offset(lineno, anchor), self._end(lineno, anchor)
        return (all(self.buf.find(token, start, end) >= 0 for token in tokens)
                or not self.plain(lineno, lineno, anchor))

    def holding(self, low: int, high: int, anchor: tuple[int, int],
                tokens: tuple[bytes, ...]) -> list[int]:
        """The lines low..high that `may_hold` takes, in order, found by searching their
        bytes for the writer's longest token and for what unwrapping rewrites, instead of a
        look at each line (a window widened over other writers' lines): lines parsed
        already, lines with every token, lines that are not `plain`."""
        if low > high:
            return []
        buf, rewritten = self.buf, REWRITTEN
        start, end = self._offset(low, anchor), self._end(high, anchor)
        found = {n for n in self.cache if low <= n <= high}
        key = max(tokens, key=len)
        for line, line_start, line_end in _lines_where(
                buf, low, start, end, lambda at: buf.find(key, at, end)):
            if all(buf.find(token, line_start, line_end) >= 0 for token in tokens):
                found.add(line)
                self._starts[line] = line_start

        def rewrite_at(at: int) -> int:
            match = rewritten.search(buf, at, end)
            return -1 if match is None else match.start()

        for line, line_start, line_end in _lines_where(buf, low, start, end, rewrite_at):
            # a match found over several lines may reach past this one: the line decides
            if rewritten.search(buf, line_start, line_end) is not None:
                found.add(line)
                self._starts[line] = line_start
        return sorted(found)

    def decoloured(self, low: int, high: int) -> tuple[bytes, int, int] | None:
        """buf[low:high] without its ANSI colour codes (`ESC [ n;n m`), as every line under
        a coloured line's header holds that header there (`decoloured_header`), the way a
        line under a plain header holds it in its raw bytes (`header_bytes`): the buffer so
        read and where the range is in it. None where some colour is in another form (a
        code's remnant or caret form, one escaped in JSON: "[0;36m" without its escape)
        or another terminal sequence is in the range."""
        if self._decoloured is None:
            self._decoloured = _Decoloured(self.buf)
        return self._decoloured.span(low, high)

    def decoloured_joiner_near(self, header: bytes, line_start: int, low: int, high: int
                               ) -> bool | None:
        """`joiner_near` for a coloured line starting at `line_start` (its `decoloured_header`
        is `header`): whether buf[low:high], read without colour, holds another line under
        that header with a message that would join; None when that range holds colour in
        another form."""
        found = self.decoloured(low, high)
        if found is None:
            return None
        text, start, end = found
        assert self._decoloured is not None  # built by decoloured
        own_start = self._decoloured.at(line_start)
        own_end = text.find(b"\n", own_start, end)
        own_end = end if own_end < 0 else own_end
        for joining in JOINING_STARTS:
            at = text.find(header + joining, start, end)
            while at >= 0 and own_start <= at <= own_end:  # the line's own header
                at = text.find(header + joining, at + 1, end)
            if at >= 0:
                return True
        return False

    def may_be_unprefixed(self, lineno: int, anchor: tuple[int, int]) -> bool:
        """Whether a line may be the unprefixed writer's (stream ("raw",)): one that starts
        with a process prefix (`(Name pid=N) `) is not, unless a carriage return inside it
        may leave a terminal showing something else (normalize.terminal_text); nothing else
        unwrapping does touches a line that starts so. A line parsed already is taken."""
        if lineno in self.cache:
            return True
        start = self._offset(lineno, anchor)
        if PROCESS_PREFIX.match(self.buf, start) is None:
            return True
        return b"\r" in self.buf[start:self._end(lineno, anchor)].rstrip(b"\r")

    def sibling(self, lineno: int, start: int, template: ParsedLine, header: str
                ) -> ParsedLine | None:
        """Line `lineno`, starting at `start` with `template`'s plain header, read as
        parse_line would (vllm_format.parse_sibling); None for a line it cannot read so."""
        line = self.cache.get(lineno)
        if line is not None:
            return line
        end = self.buf.find(b"\n", start)
        end = len(self.buf) if end < 0 else end
        if end - start > MAX_PARSED_LINE:
            return None
        self._starts[lineno], self._starts[lineno + 1] = start, end + 1
        line = parse_sibling(template, header, lineno, self.reader.decode(self.buf[start:end]))
        if line is not None:
            self._parsed(lineno, end, line)
        return line

    def _parsed(self, lineno: int, end: int, line: ParsedLine) -> None:
        """Count a line parsed, and keep it if it is complete (the same in later buffers)."""
        self.parsed += 1
        if lineno <= self.last and (self.final or end < len(self.buf)):
            self.cache[lineno] = line

    def get(self, lineno: int, anchor: tuple[int, int]) -> ParsedLine:
        line = self.cache.get(lineno)
        if line is None:
            start = self._starts.get(lineno)
            if start is None:
                start = walk(self.buf, anchor, lineno)
                self._starts[lineno] = start
            end = self.buf.find(b"\n", start)
            end = len(self.buf) if end < 0 else end
            self._starts[lineno + 1] = end + 1
            reader = self.reader
            raw = self.buf[start:min(end, start + MAX_PARSED_LINE)]
            if end - start > MAX_PARSED_LINE:  # parse a cut copy; byte accounting is unchanged
                raw += LINE_CUT_MARKER
            line = parse_line(reader.source, lineno, reader.decode(raw), reader.reference)
            self._parsed(lineno, end, line)
        return line


# Where unwrapping (normalize.unwrap, vllm_format's JSON lines) may delete or decode text, so
# that a line's writer could be named by bytes the line does not hold as such: colour codes in
# every form, HTML tags and entities, escapes, JSON, carriage returns, markdown. A step that
# rewrites other text must add its trigger here (test_fast_path_equivalence checks samples).
# Written as one class of first bytes, then what must precede or follow each: `re` then skips
# ahead by the class (about 3x the speed of the plain alternation on header-heavy lines).
REWRITTEN = re.compile(
    rb"[\x1b\\\r{`^\[*&<](?:(?<=[\x1b\\\r{`])|(?<=\^)\[|(?<=\[)[0-9;]*m(?![\w\]])"
    rb"|(?<=\*)\*|(?<=&)(?:lt|gt|quot|#39|amp);|(?<=<)/?(?i:font|b|span|strong)[\s>])")


# An ANSI colour code (select graphic rendition); and, once those are removed, anything
# unwrapping would still rewrite in a way that could hide a header's bytes: an escape, the
# caret form, a code's remnant, a backslash escape (JSON's \u001b, \t), markdown, HTML tags
# and entities. A range holding none of those is each line's unwrapped text, less a prefix
# (a brace alone, JSON without escapes, keeps the header as it is; a carriage return can
# only make a header appear that is not one, which is the safe side).
SGR = re.compile(rb"\x1b\[[0-9;]*m")
SGR_TEXT = re.compile(r"\x1b\[[0-9;]*m")
_OTHER_COLOUR = (r"\x1b|\^\[|\\|`|\*\*|&(?:lt|gt|quot|#39|amp);|</?(?i:font|b|span|strong)[\s>]"
                 r"|\[[0-9;]+m|\[m(?![\w\]])")
OTHER_COLOUR = re.compile(_OTHER_COLOUR.encode())
OTHER_COLOUR_TEXT = re.compile(_OTHER_COLOUR)


# A line starting so is some process's (vllm_format's _PLAIN, _PROC_LEADING and _PROC all
# read the name from it, whatever follows, and unwrapping strips no wrapper from a line that
# starts with `(`): never the unprefixed writer's. ASCII names only, as long as those
# expressions take them; anything else may be unprefixed.
PROCESS_PREFIX = re.compile(rb"\([A-Za-z_][\w.-]{0,80} pid=\d+\) ")


def _lines_where(buf: bytes, first: int, start: int, end: int, next_at: Callable[[int], int]
                 ) -> Iterator[tuple[int, int, int]]:
    """(number, start, end) of each line of buf[start:end] (its first line numbered `first`)
    where `next_at(offset)` finds something at or after `offset`, once per line, in order."""
    line, counted = first, start  # the line that holds offset `counted`
    at = next_at(start)
    while at >= 0:
        line += buf.count(b"\n", counted, at)
        line_start = max(buf.rfind(b"\n", start, at) + 1, start)
        line_end = buf.find(b"\n", at, end)
        line_end = end if line_end < 0 else line_end
        yield line, line_start, line_end
        counted = at
        if line_end >= end:
            return
        at = next_at(line_end + 1)


class _Decoloured:
    """A buffer without its ANSI colour codes, and where colour in any other form is in it
    (BufferLines.decoloured): built once, asked about many ranges."""

    def __init__(self, buf: bytes) -> None:
        codes = [(m.start(), m.end()) for m in SGR.finditer(buf)]
        self.text = SGR.sub(b"", buf)
        self._starts = [start for start, _ in codes]
        self._ends = [end for _, end in codes]
        removed, self._removed = 0, []  # bytes removed up to each code's end
        for start, end in codes:
            removed += end - start
            self._removed.append(removed)
        # read in the text without codes: a remnant a removal made ("[" + code + "90m") too
        self._other = [m.start() for m in OTHER_COLOUR.finditer(self.text)]

    def at(self, offset: int) -> int:
        """Where a raw offset is in the text without codes (one inside a code: where the
        code was)."""
        index = bisect.bisect_right(self._starts, offset)  # codes that start at or before
        if index and offset < self._ends[index - 1]:
            index -= 1
            offset = self._starts[index]
        return offset - (self._removed[index - 1] if index else 0)

    def span(self, low: int, high: int) -> tuple[bytes, int, int] | None:
        """The text, and where buf[low:high] is in it; None if that holds colour otherwise
        (or a match of it begins a few bytes before)."""
        start, end = self.at(low), self.at(high)
        first = bisect.bisect_left(self._other, start - 8)
        if first < len(self._other) and self._other[first] < end:
            return None
        return self.text, start, end


def joiners_of(buf: bytes) -> dict[bytes, list[int]]:
    """Where each message that would join a same-header neighbour starts, in order, under
    the JOINER_KEY bytes before it: a line repeating a header of at least that length and
    ending in `] ` is found by its tail, without searching the buffer for the header."""
    index: dict[bytes, list[int]] = {}
    for match in JOINER.finditer(buf):
        start = match.end()
        index.setdefault(buf[start - JOINER_KEY:start], []).append(start)
    return index


def walk(buf: bytes, anchor: tuple[int, int], target: int) -> int:
    """Offset where line `target` starts, walking from an anchor (line number, its offset)."""
    lineno, offset = anchor
    if lineno > target and _lines_back is not None:  # in C: a scan keeps 200 lines of context
        offset, walked = _lines_back(buf, offset, lineno - target)
        lineno -= walked
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


# in C where built (core.lines.native)
_lines_back: Callable[[bytes, int, int], tuple[int, int]] | None = getattr(
    speedups, "lines_back", None)


def writer_tokens(line: ParsedLine) -> tuple[bytes, ...]:
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


def header_bytes(line: ParsedLine) -> tuple[bytes, int] | None:
    """A logger line's header as raw bytes (process prefix to `[file:line] `), and where it
    starts within the line; None for lines without one or with colour codes in it."""
    if "\x1b" in line.raw:
        return None
    return _header_in(line.raw, line)


def decoloured_header(line: ParsedLine) -> bytes | None:
    """A coloured logger line's header as its bytes read without their ANSI colour codes
    (vLLM's formatter colours the process prefix, the level, the time and the logger tag):
    what `BufferLines.decoloured` holds of every line under the same header. None for a
    line without colour, without a header, or with more than colour to unwrap."""
    if "\x1b" not in line.raw:
        return None
    raw = SGR_TEXT.sub("", line.raw)
    if "\r" in raw or OTHER_COLOUR_TEXT.search(raw):
        return None  # what a terminal shows of it, or colour in another form
    located = _header_in(raw, line)
    return None if located is None else located[0]


def _header_in(raw: str, line: ParsedLine) -> tuple[bytes, int] | None:
    message = line.message
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
