"""Parse what is left of a line after unwrapping: vLLM headers of every era, uvicorn, glog.

A line that fits no grammar is kept as a raw line with its text as the message; nothing is
ever dropped here.
"""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime

from logwatch.core.lines.normalize import looks_coloured as _looks_coloured
from logwatch.core.lines.normalize import unwrap
from logwatch.core.lines.pasted import split_embedded
from logwatch.core.lines.records import ParsedLine
from logwatch.core.lines.year_inference import closest_datetime, parse_vllm_time
from logwatch.core.numbers import bounded_number

_LEVELS = "DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL"
# LEVEL MM-DD HH:MM:SS, the fixed heart of every vLLM header since 2023.
_LEVEL_TIME = re.compile(
    rf"(?<![\w-])(?P<level>{_LEVELS}) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d{{1,6}})?(?= |$)"
)
# After the time: "[file:line]" (0.4+), "[file:line[]" (damaged), "file:line]" (V0), or none.
_FILE_TAG = re.compile(
    r" (?:\[(?P<file>[^\]\s]{1,200}?):(?P<lineno>\d+)\[?\]|(?P<vfile>[^\]\s:]{1,200}):"
    r"(?P<vlineno>\d+)\])"
)
_PROC = re.compile(
    r"\((?P<name>[A-Za-z_][\w.-]{0,80}?)(?: rank=(?P<rank>\d+))?(?: pid=(?P<pid>\d+))?"
    r"(?:, ip=[\w.:]+)?\)"
)
_PROC_LEADING = re.compile(
    r"(?:\([A-Za-z_][\w.-]{0,80}?(?: rank=\d+)? pid=\d+(?:, ip=[\w.:]+)?\) ?)+"
)
# The common modern line, parsed in one step: `(Name pid=N) LEVEL MM-DD HH:MM:SS [file:line] msg`
_PLAIN = re.compile(
    rf"\((?P<name>[A-Za-z_][\w.-]{{0,80}}) pid=(?P<pid>\d+)\) (?P<level>{_LEVELS}) "
    r"(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d) \[(?P<file>[^\]\s\[]{1,200}):(?P<lineno>\d+)\] "
    r"(?P<msg>[^\r\x1b]*)"
)
_UVICORN = re.compile(rf"(?P<level>{_LEVELS}):\s+(?P<msg>.*)", re.DOTALL)
_GLOG = re.compile(
    r"\[?(?P<level>[IWEF])(?P<month>\d\d)(?P<day>\d\d) (?P<hms>\d\d:\d\d:\d\d)\.\d+\s+\d+ "
    r"(?P<file>[^\s:\]]+):(?P<lineno>\d+)\]\s?(?P<msg>.*)",
    re.DOTALL,
)
_TORCH_C10 = re.compile(r"\[(?P<level>[IWEF]) (?P<file>[^\s:\]]+):(?P<lineno>\d+)\] ?(?P<msg>.*)",
                        re.DOTALL)
_RANK_SUFFIX = re.compile(r"_((?:(?:DP|PP|PCP|TP|DCP|EP)\d+_?)+)$")
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
# Numbers in a header are digits of any length (`pid=9999...`), and are kept only where
# they can mean what they say: a pid up to Linux's PID_MAX_LIMIT (2**22), a source line
# number up to a billion. Beyond that the field is None and the number stays where it was
# written, in the line's text (a finding's evidence): an operator filtering the history by
# pid (`WHERE pid = 2450`) wants an integer column, and no process has a larger pid. The
# digits are never all converted either (see core/numbers).
PID_MAX = 1 << 22
LINE_NUMBER_MAX = 10**9


def _pid(digits: str | None) -> int | None:
    return bounded_number(digits, PID_MAX)


def _line_number(digits: str | None) -> int | None:
    return bounded_number(digits, LINE_NUMBER_MAX)


def process_role(name: str | None) -> str | None:
    """The role a process name stands for: api_server, engine_core, worker or main."""
    if not name:
        return None
    lowered = name.lower()
    if lowered.startswith(("apiserver", "api_server", "dpsupervisor")):
        return "api_server"
    if "enginecore" in lowered:
        return "engine_core"
    if "worker" in lowered:
        return "worker"
    if lowered == "mainprocess":
        return "main"
    return None


def rank_of(name: str | None, explicit: str | None) -> str | None:
    """A rank label: `rank=N`, or the parallel-group suffix of `Worker_PP1_TP3`."""
    if explicit is not None:
        return explicit
    if not name:
        return None
    m = _RANK_SUFFIX.search(name)
    if m:
        return m.group(1).rstrip("_")
    if name.startswith("VllmWorker-") and name[11:].isdigit():
        return name[11:]
    return None


@functools.lru_cache(maxsize=256)
def _rank_of_name(name: str) -> str | None:
    """rank_of for a process name alone: the same few names head every line."""
    return rank_of(name, None)


def _last_process(text: str) -> tuple[str | None, int | None, str | None]:
    """The innermost (last) `(Name pid=N)` prefix in a header's lead-in."""
    name: str | None = None
    pid: int | None = None
    rank: str | None = None
    for m in _PROC.finditer(text):
        name = m.group("name")
        pid = _pid(m.group("pid"))
        rank = m.group("rank")
    return name, pid, rank


def _parse_json_line(text: str) -> dict[str, object] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return data
    return None


def _plain_message(message: str, raw: str) -> bool:
    """Whether the message of a line in the common modern form is read as it stands: not
    Ray's `[repeated Nx across cluster]`, and no colour codes for unwrapping to strip."""
    return not message.endswith("across cluster]") and (
        "[" not in message or not _looks_coloured(raw))


def plain_header(line: ParsedLine) -> str | None:
    """The header of a line in the common modern form that `parse_line` reads in one step
    (`(Name pid=N) LEVEL MM-DD HH:MM:SS [file:line] `), up to its message; else None."""
    plain = _PLAIN.fullmatch(line.raw) if line.raw[:1] == "(" else None
    if plain is None or not _plain_message(plain.group("msg"), line.raw):
        return None
    return line.raw[:plain.start("msg")]


def parse_sibling(template: ParsedLine, header: str, lineno: int, raw: str) -> ParsedLine | None:
    """What `parse_line` gives for `raw`, a line that starts with `header`, the plain header
    of `template` (see plain_header): the same fields but the message, found without a
    regex. None when the rest is not read by that form (a carriage return, colour)."""
    message = raw[len(header):]
    if "\r" in message or "\x1b" in message or not _plain_message(message, raw):
        return None  # what _PLAIN's message part, [^\r\x1b]*, does not read
    return sibling_line(template, lineno, raw, split_embedded(message))


def sibling_line(template: ParsedLine, lineno: int, raw: str, message: str) -> ParsedLine:
    """A line under `template`'s header: its fields but the number, text and message."""
    t = template
    return ParsedLine(source=t.source, lineno=lineno, raw=raw, message=message, kind="vllm",
                      process=t.process, pid=t.pid, rank=t.rank, level=t.level,
                      vllm_time=t.vllm_time, logger_file=t.logger_file,
                      logger_line=t.logger_line, time=t.time)


def parse_line(source: str, lineno: int, raw: str, reference: datetime) -> ParsedLine:
    """Unwrap and parse one physical line. `reference` anchors year inference."""
    plain = _PLAIN.fullmatch(raw) if raw[:1] == "(" else None
    if plain is not None and _plain_message(plain.group("msg"), raw):
        name, pid, level, ts, tag_file, tag_line, msg = plain.groups()
        return ParsedLine(source, lineno, raw, split_embedded(msg), "vllm", name, _pid(pid),
                          _rank_of_name(name), "WARNING" if level == "WARN" else level, ts,
                          tag_file, _line_number(tag_line), parse_vllm_time(ts, reference))
    unwrapped = unwrap(raw, reference)
    text = unwrapped.text
    anchor = unwrapped.outer_time or reference

    def make(message: str, kind: str, process: str | None = None, pid: int | None = None,
             rank: str | None = None, level: str | None = None, vllm_time: str | None = None,
             logger_file: str | None = None, logger_line: int | None = None,
             time: datetime | None = None) -> ParsedLine:
        return ParsedLine(
            source=source, lineno=lineno, raw=raw.rstrip("\r\n"), message=split_embedded(message),
            kind=kind,
            process=process, pid=pid, rank=rank, level=level, vllm_time=vllm_time,
            logger_file=logger_file, logger_line=logger_line,
            time=unwrapped.outer_time or time, outer_time=unwrapped.outer_time,
            repeated=unwrapped.repeated,
        )

    m = _LEVEL_TIME.search(text, 0, 300)
    if m:
        name, pid, rank = _last_process(text[: m.start()])
        rest = text[m.end():]
        tag = _FILE_TAG.match(rest)
        file: str | None = None
        fileline: int | None = None
        message = rest
        if tag:
            file = tag.group("file") or tag.group("vfile")
            fileline = _line_number(tag.group("lineno") or tag.group("vlineno"))
            message = rest[tag.end():]
        if message.startswith(" "):
            message = message[1:]
        level = m.group("level")
        return make(message, "vllm", name, pid, rank_of(name, rank or unwrapped.rank),
                    "WARNING" if level == "WARN" else level, m.group("ts"), file, fileline,
                    parse_vllm_time(m.group("ts"), anchor))

    name = None
    pid = None
    explicit_rank = None
    lead_match = _PROC_LEADING.match(text)
    if lead_match:
        name, pid, explicit_rank = _last_process(lead_match.group(0))
        text = text[lead_match.end():]
    rank = rank_of(name, explicit_rank or unwrapped.rank)

    if m := _UVICORN.match(text):
        return make(m.group("msg"), "uvicorn", name, pid, rank, m.group("level"))
    if (m := _GLOG.match(text)) or (m := _TORCH_C10.match(text)):
        time = None
        if m.groupdict().get("month"):
            hour, minute, second = (int(x) for x in m.group("hms").split(":"))
            time = closest_datetime(int(m.group("month")), int(m.group("day")), hour, minute,
                                    second, anchor)
        return make(m.group("msg"), "glog", name, pid, rank, _GLOG_LEVELS[m.group("level")],
                    None, m.group("file"), _line_number(m.group("lineno")), time)
    if text.startswith("{") and text.endswith("}") and (data := _parse_json_line(text)):
        json_pid = data.get("process")
        return make(str(data["message"]), "json", str(data.get("processName") or "") or name,
                    json_pid if isinstance(json_pid, int) and 0 <= json_pid <= PID_MAX else pid,
                    rank,
                    str(data.get("levelname") or "") or None)
    return make(text, "prefix" if lead_match else "raw", name, pid, rank)
