"""Strip colour and the outer wrappers (docker, journald, CI, Ray, torch, kubectl, markdown).

The result keeps what the wrappers told us: an outer timestamp, a torch rank, Ray's repeat
count. Nothing here decides what the line means; `vllm_format` parses what is left.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from logwatch.core.lines.year_inference import closest_datetime
from logwatch.core.numbers import bounded_number

# Raw ANSI CSI sequences, caret notation left by copy-paste, and remnants whose ESC was
# stripped somewhere along the way ("[36m", "[0;0m").
_ANSI = re.compile(
    r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\^\[\[[0-9;]*m"
    r"|(?<![\w\]\[])\[(?:[0-9]{1,3}(?:;[0-9]{1,3})*)?m(?![\w\]])"
)
# vLLM's own colour formatter (level, grey time and logger tag from 0.12; cyan process prefix
# from 0.31; vllm/logging_utils/formatter.py), its ESC lost: these sit against words and
# brackets ("[31mERROR[0m [90m[core.py:1][0m"), where the general remnant rule holds back.
_VLLM_REMNANT_HINTS = ("[0;36m(", "[90m")
_VLLM_REMNANT = re.compile(r"\[(?:0;36|0;0|0|3[1-7]|90)m")
_HTML_TAG = re.compile(r"</?(?:font|b|span|strong)(?:\s[^<>]{0,200})?>", re.IGNORECASE)
_HTML_ENTITIES = {"&lt;": "<", "&gt;": ">", "&quot;": '"', "&#39;": "'", "&amp;": "&"}

_DOCKER_COMPOSE = re.compile(r"[A-Za-z0-9][\w.-]*[-_]\d+\s+\| ?")
_RFC3339 = re.compile(
    r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?) "
)
_CI_GUTTER = re.compile(
    r"\s*\|? ?\[(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)\] "
)
_JOURNAL_SHORT = re.compile(
    r"(?P<mon>[^\W\d_]{3,5}\.?) {1,2}(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d) "
    r"(?P<host>[\w.-]+) (?P<ident>[^\s\[\]:]{1,64})(?:\[(?P<pid>\d+)\])?: "
)
# journalctl -o short-iso: a numeric zone ("Z" is docker's or CI's, before any message)
_JOURNAL_ISO = re.compile(
    r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?[+-]\d\d:?\d\d) "
    r"(?P<host>[\w.-]+) (?P<ident>[^\s\[\]:]{1,64})(?:\[(?P<pid>\d+)\])?: "
)
_TORCH_RANK = re.compile(r"\[rank(?P<rank>\d+)\]: ?")
_KUBECTL_BOX = re.compile(r"[│┃|] (?P<body>.*?)\s*[│┃|]")
_KUBECTL_PREFIX = re.compile(r"\[pod/[\w.-]{1,253}/[\w.-]{1,63}\] ")  # kubectl logs --prefix
# containerd/CRI-O after the timestamp: the stream and whether the line is Full or Partial
_CRI_STREAM = re.compile(r"(?:stdout|stderr) [FP] ")
_CI_COMMAND = re.compile(r"##\[(?:error|warning|notice|debug|group|endgroup|command|section)\]")
# A bug report pasted as markdown: quoted ("> ", nested) or bulleted ("- ", "* ", "+ ") lines.
_MARKDOWN_LEAD = re.compile(r"(?:>(?!>) ?)+|[-*+] (?=\S| {2})")
_RAY_REPEATED = re.compile(r"\s*\[repeated (?P<n>\d+)x across cluster\]\s*$")

# Month names journald may print, by locale (English, German, French, Spanish, Russian, ...).
_MONTHS: dict[str, int] = {}
for _number, _names in enumerate(
    [
        "jan janv ene янв",
        "feb févr fév febr фев",
        "mar mär mrz mars мар",
        "apr avr abr апр",
        "may mai mayo май мая",
        "jun juin июн",
        "jul juil июл",
        "aug août ago авг",
        "sep sept set сен",
        "oct okt окт",
        "nov ноя",
        "dec dez déc dic дек",
    ],
    start=1,
):
    for _name in _names.split():
        _MONTHS[_name] = _number


@dataclass(frozen=True, slots=True)
class Unwrapped:
    """A line with colour and outer wrappers removed, plus what the wrappers said."""

    text: str
    outer_time: datetime | None = None
    rank: str | None = None
    repeated: int = 1
    wrappers: tuple[str, ...] = ()


_COLOUR_HINT = re.compile(r"\x1b|\^\[|\[[0-9;]*m(?![\w\]])")


def looks_coloured(text: str) -> bool:
    """Whether the text holds colour codes in any form (raw, caret, stripped remnants)."""
    return _COLOUR_HINT.search(text) is not None


def strip_colour(text: str) -> str:
    """Remove ANSI escapes (raw, caret and stripped forms) and HTML colour tags."""
    if _COLOUR_HINT.search(text):
        text = _ANSI.sub("", text)
        if any(hint in text for hint in _VLLM_REMNANT_HINTS):
            text = _VLLM_REMNANT.sub("", text)
    if "<" in text and _HTML_TAG.search(text):
        text = _HTML_TAG.sub("", text)
        for entity, char in _HTML_ENTITIES.items():
            text = text.replace(entity, char)
    return text


def terminal_text(raw: str) -> str:
    """What a terminal would show: drop the line terminator and anything a `\\r` overwrote."""
    text = raw.rstrip("\r\n")
    if "\r" in text:
        parts = [p for p in text.split("\r") if p.strip()]
        text = parts[-1] if parts else ""
    return text


def _parse_iso(ts: str) -> datetime | None:
    ts = ts.replace(",", ".")
    if "." in ts:  # Python takes at most microseconds
        head, _, rest = ts.partition(".")
        digits = re.match(r"\d+", rest)
        if digits:
            frac = digits.group(0)
            ts = f"{head}.{frac[:6].ljust(6, '0')}{rest[len(frac):]}"
    ts = ts.replace("Z", "+00:00")
    if re.search(r"[+-]\d{4}$", ts):
        ts = ts[:-2] + ":" + ts[-2:]
    try:
        parsed = datetime.fromisoformat(ts)
    except ValueError:
        return None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def _journal_time(mon: str, day: str, hms: str, reference: datetime) -> datetime | None:
    month = _MONTHS.get(mon.lower().rstrip("."))
    if month is None:
        return None
    hour, minute, second = (int(x) for x in hms.split(":"))
    return closest_datetime(month, int(day), hour, minute, second, reference)


_MARKDOWN_FIRST = frozenset(">-*+")


def _docker_json(text: str) -> tuple[str, str | None] | None:
    """docker's json-file line: (the logged line, its time), or None for other JSON."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("log"), str):
        return None
    time = data.get("time")
    return terminal_text(strip_colour(data["log"])), time if isinstance(time, str) else None


def unwrap(raw: str, reference: datetime) -> Unwrapped:
    """Peel colour and outer wrappers off one physical line, outermost first."""
    text = terminal_text(raw)
    outer: datetime | None = None
    rank: str | None = None
    repeated = 1
    wrappers: list[str] = []
    # docker's json-file holds the line JSON-escaped: decode it before looking for colour
    if text[:7] == '{"log":' and (docker := _docker_json(text)) is not None:
        text, time = docker
        outer = _parse_iso(time) if time else None
        wrappers.append("docker-json")
    else:
        text = strip_colour(text)
    if "repeated" in text:
        m = _RAY_REPEATED.search(text)
        if m:
            repeated = bounded_number(m.group("n")) or 1  # a count no cluster has: once
            text = text[: m.start()]
            wrappers.append("ray-repeated")
    for _ in range(8):  # wrappers nest (CI gutter around docker around journald); bounded
        if text[:1] == "(":  # a process prefix: no outer wrapper starts like that
            break
        m = _KUBECTL_BOX.fullmatch(text)
        if m:
            text, kind = m.group("body"), "kubectl"
        elif m := _KUBECTL_PREFIX.match(text):
            text, kind = text[m.end():], "kubectl"
        elif m := _CRI_STREAM.match(text):
            text, kind = text[m.end():], "cri"
        elif m := _CI_COMMAND.match(text):
            text, kind = text[m.end():], "ci-command"
        elif text[:1] in _MARKDOWN_FIRST and (m := _MARKDOWN_LEAD.match(text)):
            text, kind = text[m.end():], "markdown"
        elif (m := _CI_GUTTER.match(text)) and (text.lstrip().startswith(("|", "["))):
            outer = outer or _parse_iso(m.group("ts"))
            text, kind = text[m.end():], "ci-gutter"
        elif m := _JOURNAL_ISO.match(text):
            outer = outer or _parse_iso(m.group("ts"))
            text, kind = text[m.end():], "journald"
        elif m := _RFC3339.match(text):
            outer = outer or _parse_iso(m.group("ts"))
            text, kind = text[m.end():], "timestamp"
        elif m := _DOCKER_COMPOSE.match(text):
            text, kind = text[m.end():], "docker-compose"
        elif (m := _JOURNAL_SHORT.match(text)) and m.group("mon").lower().rstrip(".") in _MONTHS:
            outer = outer or _journal_time(m.group("mon"), m.group("day"), m.group("hms"),
                                           reference)
            text, kind = text[m.end():], "journald"
        elif m := _TORCH_RANK.match(text):
            rank = rank or m.group("rank")
            text, kind = text[m.end():], "torch-rank"
        else:
            break
        wrappers.append(kind)
    return Unwrapped(text, outer, rank, repeated, tuple(wrappers))
