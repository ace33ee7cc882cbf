"""Parse what is left of a line after unwrapping: vLLM headers of every era, uvicorn, glog.

A line that fits no grammar is kept as a raw line with its text as the message; nothing is
ever dropped here.
"""

from __future__ import annotations

import json
import re
from datetime import datetime

from logwatch.core.normalize import unwrap
from logwatch.core.records import ParsedLine
from logwatch.core.year_inference import closest_datetime, parse_vllm_time

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


def _last_process(text: str) -> tuple[str | None, int | None, str | None]:
    """The innermost (last) `(Name pid=N)` prefix in a header's lead-in."""
    name: str | None = None
    pid: int | None = None
    rank: str | None = None
    for m in _PROC.finditer(text):
        name = m.group("name")
        pid = int(m.group("pid")) if m.group("pid") else None
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


def parse_line(source: str, lineno: int, raw: str, reference: datetime) -> ParsedLine:
    """Unwrap and parse one physical line. `reference` anchors year inference."""
    unwrapped = unwrap(raw, reference)
    text = unwrapped.text
    anchor = unwrapped.outer_time or reference
    common = {
        "source": source,
        "lineno": lineno,
        "raw": raw.rstrip("\r\n"),
        "outer_time": unwrapped.outer_time,
        "repeated": unwrapped.repeated,
    }

    m = _LEVEL_TIME.search(text, 0, 300)
    if m:
        lead = text[: m.start()]
        name, pid, rank = _last_process(lead)
        rest = text[m.end():]
        tag = _FILE_TAG.match(rest)
        if tag:
            file = tag.group("file") or tag.group("vfile")
            fileline = int(tag.group("lineno") or tag.group("vlineno"))
            message = rest[tag.end():]
        else:
            file, fileline, message = None, None, rest
        if message.startswith(" "):
            message = message[1:]
        vllm_time = m.group("ts")
        level = m.group("level")
        return ParsedLine(
            message=message, kind="vllm", process=name, pid=pid,
            rank=rank_of(name, rank or unwrapped.rank), level="WARNING" if level == "WARN"
            else level, vllm_time=vllm_time, logger_file=file, logger_line=fileline,
            time=unwrapped.outer_time or parse_vllm_time(vllm_time, anchor), **common,
        )

    name = pid_ = rank_ = None
    lead_match = _PROC_LEADING.match(text)
    if lead_match:
        name, pid_, rank_ = _last_process(lead_match.group(0))
        text = text[lead_match.end():]
    rank = rank_of(name, rank_ or unwrapped.rank)
    proc = {"process": name, "pid": pid_, "rank": rank}

    if m := _UVICORN.match(text):
        return ParsedLine(message=m.group("msg"), kind="uvicorn", level=m.group("level"),
                          time=unwrapped.outer_time, **proc, **common)
    if (m := _GLOG.match(text)) or (m := _TORCH_C10.match(text)):
        groups = m.groupdict()
        time = unwrapped.outer_time
        if time is None and groups.get("month"):
            h, mi, s = (int(x) for x in groups["hms"].split(":"))
            time = closest_datetime(int(groups["month"]), int(groups["day"]), h, mi, s, anchor)
        return ParsedLine(message=m.group("msg"), kind="glog",
                          level=_GLOG_LEVELS[m.group("level")], logger_file=m.group("file"),
                          logger_line=int(m.group("lineno")), time=time, **proc, **common)
    if text.startswith("{") and text.endswith("}") and (data := _parse_json_line(text)):
        level = str(data.get("levelname") or "") or None
        pid_value = data.get("process")
        return ParsedLine(
            message=str(data["message"]), kind="json", level=level,
            process=str(data.get("processName") or "") or name,
            pid=pid_value if isinstance(pid_value, int) else pid_, rank=rank,
            time=unwrapped.outer_time, **common,
        )
    return ParsedLine(message=text, kind="prefix" if lead_match else "raw",
                      time=unwrapped.outer_time, **proc, **common)
