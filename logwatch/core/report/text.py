"""The triage report as text for a terminal: the headline, launches, the root cause and its
diagnosis, latent problems, other problems and unrecognised errors."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from logwatch.core.diagnosis.kernel_path import ObservedKernel
from logwatch.core.report.triage import PROSE_FIELDS, problem_of
from logwatch.core.report.verdict import verdict_of
from logwatch.core.safe_text.visible import visible_data

SEVERITY_COLOURS = {"critical": "1;35", "error": "1;31", "warning": "33", "info": "2"}
# Report fields that are prose the renderer wraps into lines itself: their newlines stay.
MAX_GROUPS_SHOWN = 10  # unrecognised templates in the text report; --json has them all
PROSE_WIDTH = 100  # prose stays this narrow on a wide terminal; quoted log lines use it all
EXCERPT_ROWS = 6  # a quoted log line (400 characters at most) wraps onto 6 rows, then is cut
VALUE_ROWS = 3  # the same for captured values and context lines


def _headline(report: Mapping[str, Any], fatal: int) -> str:
    """The report's first judgement, one line: never "healthy" for a failure or for input
    that holds no vLLM output."""
    incidents, root = report["incidents"], report["root_cause"]
    state, reason = report.get("verdict"), report.get("verdict_reason")
    if not (state and reason):  # a report written before it said why
        judged = verdict_of(report)
        state, reason = judged.name, judged.reason
    if reason == "cause_not_in_excerpt":
        captures = incidents[root]["captures"]
        where = captures.get("frame")
        area = captures.get("area_title")
        return (f"{fatal} fatal incident(s); root cause not in this excerpt: a vLLM "
                "traceback without its final exception"
                + (f", raised in {area}" if area else "")
                + (f" (deepest vLLM frame {_clip(where, 120)})" if where else "")
                + "; read the full log from there on")
    if reason == "known_vllm_error":
        captures = incidents[root]["captures"]
        what = captures.get("exc_type", "")
        if captures.get("message"):
            what = f"{what}: {captures['message']}" if what else captures["message"]
        return (f"{fatal} fatal incident(s); root cause: a check of vLLM failed in "
                f"{captures.get('area_title', 'vLLM')} ({_clip(what, 160)}), raised by "
                f"{_clip(captures.get('check', '?'), 120)} (releases "
                f"{captures.get('releases', '?')}) — no signature diagnoses it")
    if state == "unrecognised":
        captures = incidents[root]["captures"]
        what = captures.get("exc_type") or captures.get("what") or ""
        if captures.get("message"):
            what = f"{what}: {captures['message']}" if what else captures["message"]
        if captures.get("exit_code"):
            what = f"exit status {captures['exit_code']}"
        area = captures.get("area_title")
        return (f"{fatal} fatal incident(s); root cause: unrecognised fatal error"
                + (f" in {area}" if area else "")
                + (f" ({_clip(what, 160)})" if what else "")
                + " — no signature knows it"
                + ("; see UNRECOGNISED ERRORS" if report.get("unrecognised") else ""))
    if state == "failed":
        return f"{fatal} fatal incident(s); root cause: {incidents[root]['title']}"
    if state == "errors":
        return "No fatal incident, but errors below need attention."
    if state == "no_vllm_output":
        return ("No vLLM output recognised: no line of this input was written by vLLM, so it "
                "says nothing about vLLM's health (is it the right file or unit?).")
    if reason == "stopped_before_serving":
        return ("Incomplete: no fatal incident and no error, but vLLM was stopped before it "
                "came up, so this log does not show a healthy server.")
    if state == "incomplete":
        return ("Incomplete: no fatal incident and no error so far, but no evidence that vLLM "
                "came up (no `Application startup complete`, no throughput stats): the log "
                "stops in its start-up.")
    warnings = sum(1 for i in incidents if i["severity"] == "warning")
    return ("No fatal incident and no error, and vLLM came up: it looks healthy in this log"
            + (f" ({warnings} warning(s) below)." if warnings else "."))


def incomplete_warning(gap: Mapping[str, Any]) -> str:
    """One input that ended before the size it had when the scan started."""
    return (f"{gap['source']}: the file shrank while it was scanned (expected "
            f"{gap['expected_bytes']:,} bytes, read {gap['read_bytes']:,}); the report covers "
            "only what was read")


def _paint(text: str, code: str, colour: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if colour else text


def _when(seen: Mapping[str, Any]) -> str:
    time = f"{seen['time']} " if seen.get("time") else ""
    return f"{time}({seen['source']}:{seen['line']})"


def render_text(report: Mapping[str, Any], colour: bool = False, width: int = 80,
                title: str = "logwatch scan") -> str:
    """A report an operator reads top to bottom: the launches newest first, the newest
    failure's root cause and diagnoses, earlier failures in a line each, other problems,
    then the context (versions, backends, lifecycle) one line each. Every string from the
    report (log text, captures, file names) is rendered visibly: the terminal shows control
    characters, and obeys only the colours added here.

    No line is wider than `width` columns (the terminal's; 80 for a pipe): prose wraps at
    word boundaries (at most PROSE_WIDTH), a quoted log line wraps under its line number and,
    past EXCERPT_ROWS rows, ends with a marker that says how much was cut (--json has it
    whole)."""
    report = visible_data(report, PROSE_FIELDS)
    full, width = width, min(width, PROSE_WIDTH)
    stats = report["stats"]
    incidents = report["incidents"]
    launches = report.get("launches") or []
    root = report["root_cause"]
    focus = incidents[root].get("launch") if root is not None else None
    fatal = sum(1 for i in incidents if i["fatal"] and i.get("launch", focus) == focus)
    out = [_paint(row, "1", colour) for row in _fill(
        f"{title}: {stats.get('lines', 0):,} lines in {stats.get('files', 0)} input(s), "
        f"signature library {report['library_version']}", width, "", "  ")]
    out += _fill(_headline(report, fatal), width, "", "  ")
    for head in _latent_headline(report, focus):
        out += _fill(head, width, "", "  ")
    shown = launches[focus if focus is not None else 0] if launches else {}
    if shown.get("kernels"):  # what its start-up said runs the quantized layers
        out += _fill("kernel path: " + "; ".join(ObservedKernel(**k).text()
                                                 for k in shown["kernels"]), width, "", "  ")
    for gap in report.get("incomplete") or []:
        out += [_paint(row, "1;33", colour) for row in _fill(
            f"warning: {incomplete_warning(gap)}", width, "", "  ")]
    if len(launches) > 1:
        out += ["", _paint(f"LAUNCHES ({len(launches)}, newest first)", "1;4", colour)]
        for entry in launches:
            out += _fill(_launch_line(entry, incidents), width, "  ", "      ")

    if root is not None:
        where = _launch_where(launches[focus]) if len(launches) > 1 and focus is not None else ""
        out += ["", *_heading("ROOT CAUSE", where, colour, width)]
        out += _incident_block(incidents[root], colour, width, full, max_evidence=8)
    diagnoses = report.get("diagnoses") or []
    current = [d for d in diagnoses if not d.get("latent") and (
        d.get("launch", focus) in (focus, None) or focus is None)]
    if current:
        out += ["", _paint("DIAGNOSIS", "1;4", colour)]
        for diag in current:
            out += _diagnosis_block(diag, colour, width)
            out.append("")
        out.pop()
    out += _latent_section(report, focus, colour, width)
    earlier = _unique([d for d in diagnoses if d not in current and not d.get("latent")],
                      lambda d: (d["cause"], d["title"]))
    if earlier:
        out += ["", _paint("EARLIER LAUNCHES WERE DIAGNOSED", "1;4", colour)]
        for diag in earlier:
            out += _earlier_lines(diag, launches, width)
    merged = _merged(incidents, skip=root)
    problems = [i for i in merged if i["severity"] != "info"]
    context = [i for i in merged if i["severity"] == "info"]
    if problems:
        out += ["", _paint("OTHER PROBLEMS" if root is not None else "PROBLEMS", "1;4", colour)]
        for inc in problems:
            out += _incident_block(inc, colour, width, full, max_evidence=3)
            out.append("")
        out.pop()
    out += _unrecognised_lines(report, colour, width, full)
    snapshots = report.get("snapshots") or {}
    if snapshots and (diagnoses or root is not None):
        out += ["", _paint("CONFIGURATION", "1;4", colour)]
        for digest, snap in snapshots.items():
            out.extend(_snapshot_lines(digest, snap, width, full))
    if context:
        out += ["", _paint("CONTEXT", "1;4", colour)]
        for inc in context:
            captures = " ".join(f"{k}={v}" for k, v in inc["captures"].items())
            seen = f"{inc['count']}x" if inc["count"] > 1 else f"line {inc['first_seen']['line']}"
            out += _value_rows(f"{inc['title']}: ", f"{captures or '-'} ({seen})", full,
                               "  ", "    ")
    timeouts = stats.get("match_timeouts") or {}
    if timeouts:
        out += ["", *_fill("warning: the pattern time bound was hit (signature: count): "
                           + ", ".join(f"{k}: {v}" for k, v in timeouts.items()), width, "",
                           "  ")]
    for signature_id, why in (stats.get("disabled_signatures") or {}).items():
        out += _fill(f"warning: signature {signature_id} was disabled: {why}", width, "", "  ")
    return "\n".join(out) + "\n"


def _earlier_lines(diag: Mapping[str, Any], launches: Sequence[Mapping[str, Any]],
                   width: int) -> list[str]:
    """An earlier launch's diagnosis: its title and whole summary (which names the failures
    that were still ahead of it), wrapped."""
    text = f"{diag['title']} (launch {_number(launches, diag)}): {diag['summary']}"
    lines = _wrap(text.replace("\n", " "), width - 4)
    return ["  " + lines[0]] + ["    " + line for line in lines[1:]]


def _latent_of(report: Mapping[str, Any], focus: int | None) -> list[Mapping[str, Any]]:
    """The latent problems of the launch the report is about (the newest, without a root
    cause)."""
    launch = focus if focus is not None else 0
    return [d for d in report.get("diagnoses") or []
            if d.get("latent") and d.get("launch", launch) == launch]


def _latent_headline(report: Mapping[str, Any], focus: int | None) -> list[str]:
    latent = _latent_of(report, focus)
    if not latent:
        return []
    if report["root_cause"] is not None:
        head = f"{len(latent)} latent problem(s) in the configuration, after this failure is fixed"
    else:  # no failure yet is not an all-clear
        head = (f"Not an all-clear: {len(latent)} latent problem(s), which have not failed "
                "in this log yet")
    titles = list(dict.fromkeys(d["title"] for d in latent))  # one each, in order
    return [head + ": " + "; ".join(titles) + " (see LATENT PROBLEMS)."]


def _latent_section(report: Mapping[str, Any], focus: int | None, colour: bool,
                    width: int) -> list[str]:
    latent = _latent_of(report, focus)
    if not latent:
        return []
    out = ["", *_heading("LATENT PROBLEMS", " (not failures yet: what the configuration, or the "
                                            "kernels vLLM chose, lead to)", colour, width)]
    for diag in latent:
        out += _diagnosis_block(diag, colour, width)
        out.append("")
    out.pop()
    return out


def _unrecognised_lines(report: Mapping[str, Any], colour: bool, width: int,
                        full: int) -> list[str]:
    """Unrecognised lines grouped by template, most frequent first, each with the command
    that drafts a signature from it."""
    groups = report.get("unrecognised") or []
    if not groups:
        return []
    out = ["", *_heading(f"UNRECOGNISED ERRORS ({len(groups)} template(s);",
                         " no signature knows them)", colour, width)]
    for number, group in enumerate(groups[:MAX_GROUPS_SHOWN], 1):
        head = f"  {number}. {group['count']}x  "
        out += _value_rows("", group["template"], full, head, " " * len(head),
                           rows=EXCERPT_ROWS)
        rows = _fill(f"first {group['source']}:{group['line']} ({group['signature']})",
                     width, "       ", "         ")
        command = ["logwatch", "signatures", "draft", shlex.quote(str(group["source"])),
                   "--group", str(number)]
        if len("       draft a signature: " + " ".join(command)) <= full:
            rows.append("       draft a signature: " + " ".join(command))
        else:  # the command on rows of its own, continued as a shell reads it
            rows += ["       draft a signature:",
                     *_command_rows(command, full, "         ", "           ")]
        out += [_paint(row, "2", colour) for row in rows]
    hidden = len(groups) - MAX_GROUPS_SHOWN + (1 if report.get("unrecognised_others") else 0)
    if hidden > 0:
        out.append(f"  ... and more (--json lists {len(groups)})")
    return out


def _launch_where(entry: Mapping[str, Any]) -> str:
    when = f", {entry['started']}" if entry.get("started") else ""
    return f" (launch {entry['number']}, from line {entry['start_line']}{when})"


def _launch_line(entry: Mapping[str, Any], incidents: Sequence[Mapping[str, Any]]) -> str:
    when = f" {entry['started']}" if entry.get("started") else ""
    head = f"#{entry['number']}{when} (line {entry['start_line']}): {entry['outcome']}"
    root = entry.get("root_cause")
    if root is not None:
        head += f": {incidents[root]['title']}"
        if entry.get("failed_before"):
            head += f" (failed the same way {entry['failed_before']} time(s) before)"
    if entry.get("exit_code") not in (None, 0):
        head += f", exit code {entry['exit_code']}"
    return head


def _number(launches: Sequence[Mapping[str, Any]], diag: Mapping[str, Any]) -> str:
    index = diag.get("launch")
    return str(launches[index]["number"]) if index is not None and launches else "?"


def _unique(items: list[Any], key: Callable[[Any], Any]) -> list[Any]:
    seen: set[Any] = set()
    out = []
    for item in items:
        if key(item) not in seen:
            seen.add(key(item))
            out.append(item)
    return out


def _merged(incidents: Sequence[Mapping[str, Any]], skip: int | None) -> list[dict[str, Any]]:
    """Incidents of every launch, one per problem (signature and key captures): counts add
    up, the newest sighting is kept as the last. `skip`: the root cause, shown already."""
    merged: dict[str, dict[str, Any]] = {}
    for index, inc in enumerate(incidents):
        if index == skip:
            continue
        key = problem_of(inc)
        seen = merged.get(key)
        if seen is None:
            merged[key] = dict(inc)
        else:  # an older launch's sighting (the report lists the newest launch first)
            seen["count"] += inc["count"]
            seen["first_seen"] = inc["first_seen"]
    return list(merged.values())


def _snapshot_lines(digest: str, snap: Mapping[str, Any], width: int,
                    full: int) -> list[str]:
    launch, model, gpu = snap.get("launch") or {}, snap.get("model") or {}, snap.get("gpu") or {}
    quant = model.get("quant") or {}
    mtp = model.get("mtp") or {}
    parts = [f"model {model.get('path') or launch.get('model') or '?'}"]
    if quant:
        parts.append(f"{quant.get('scheme')}"
                     + (" via Marlin" if quant.get("marlin_on_this_gpu") else ""))
    if launch.get("tensor_parallel_size"):
        parts.append(f"TP {launch['tensor_parallel_size']}")
    spec = launch.get("speculative_config")
    if spec:
        parts.append("MTP " + ("covered" if mtp.get("covered") else "NOT covered" if mtp
                               else "on (draft layout unknown)"))
    cap = gpu.get("capability")
    parts.append(f"GPU {gpu.get('name') or ''} cc {cap / 10:.1f}".replace("  ", " ")
                 if cap else "GPU unknown")
    if snap.get("vllm_version"):
        parts.append(f"vLLM {snap['vllm_version']}")
    out = _fill(f"{digest}: " + ", ".join(parts), width, "  ", "    ")
    for problem in snap.get("problems") or []:
        out += _value_rows("problem: ", str(problem), full, "    ", "      ")
    return out


_MARKS = {True: ("yes", "32"), False: ("no ", "31"), None: (" ? ", "33")}


def _diagnosis_block(diag: Mapping[str, Any], colour: bool, width: int) -> list[str]:
    out = _heading(diag["title"], f"  (confidence {diag['confidence']:.0%}"
                   + (f", from {diag['signature']})" if diag["signature"] else ")"),
                   colour, width, code="1")
    out.extend("  " + ln for ln in _wrap(diag["summary"], width - 2))
    for detail in diag["details"]:
        wrapped = _wrap(detail, width - 6)
        out.append("    - " + wrapped[0])
        out.extend("      " + ln for ln in wrapped[1:])
    if diag["remedies"]:
        out.append("  what fixes it:")
        for remedy in diag["remedies"]:
            mark, code = _MARKS[remedy["applicable"]]
            lines = _wrap(f"{remedy['summary']} ({remedy['why']})", width - 12)
            out.append(f"    [{_paint(mark, code, colour)}] " + lines[0])
            out.extend("          " + ln for ln in lines[1:])
    return out


def _incident_block(inc: Mapping[str, Any], colour: bool, width: int, full: int,
                    max_evidence: int) -> list[str]:
    badge = f"[{inc['severity'].upper()}]"
    out = _fill(f"{badge}{' FATAL' if inc['fatal'] else ''} {inc['title']}", width, "", "  ")
    out[0] = _paint(badge, SEVERITY_COLOURS[inc["severity"]], colour) + out[0][len(badge):]
    out += _fill(f"signature {inc['signature']} v{inc['signature_version']} "
                 f"({inc['category']}, {inc['status']}), remedy: {inc['remedy']}",
                 width, "  ", "    ")
    copies = f" (+{inc['copies']} copies)" if inc["copies"] else ""
    out += _fill(f"seen {inc['count']}x{copies}, first {_when(inc['first_seen'])}"
                 + (f", last {_when(inc['last_seen'])}" if inc["count"] > 1 else ""),
                 width, "  ", "    ")
    where = []
    if inc["processes"]:
        where.append("processes " + ", ".join(inc["processes"]))
    if inc["ranks"]:
        where.append("ranks " + ", ".join(inc["ranks"]))
    if where:
        out += _fill("; ".join(where), width, "  ", "    ")
    if inc["captures"]:
        captures = "  ".join(f"{k}={v}" for k, v in inc["captures"].items())
        out += _value_rows("captured: ", captures, full, "  ", "    ")
    evidence = inc["evidence"]
    shown = evidence if len(evidence) <= max_evidence else evidence[-max_evidence:]
    count = (f" (last {len(shown)} of {len(evidence)} lines)"
             if len(shown) < len(evidence) else "")
    sources = _unique([ev["source"] for ev in shown], lambda source: source)
    if len(sources) == 1:  # the usual case: the file named once, then line numbers
        out += _fill(f"evidence{count} in {sources[0]}:", width, "  ", "    ")
        out += _evidence_rows(shown, colour, full, "    ")
    else:
        out.append(f"  evidence{count}:")
        for source in sources:
            out += _fill(f"{source}:", width, "    ", "      ")
            out += _evidence_rows([ev for ev in shown if ev["source"] == source], colour, full,
                                  "      ")
    out.append("  why:")
    out.extend("    " + ln for ln in _wrap(inc["explanation"], width - 4))
    return out


def _evidence_rows(shown: Sequence[Mapping[str, Any]], colour: bool, full: int,
                   indent: str) -> list[str]:
    """Quoted log lines under their line numbers; a long one wraps under its text."""
    digits = max(len(str(ev["line"])) for ev in shown)
    out = []
    for ev in shown:
        number = f"{indent}{str(ev['line']).rjust(digits)}: "
        rows = _excerpt(ev["text"], full - len(number), EXCERPT_ROWS)
        out.append(_paint(number, "2", colour) + rows[0])
        out.extend(" " * len(number) + row for row in rows[1:])
    return out


def _heading(title: str, rest: str, colour: bool, width: int, code: str = "1;4") -> list[str]:
    """A heading painted `code`, then plain words after it (`rest`), wrapped."""
    rows = _fill(title + rest, width, "", "  ")
    if not colour:
        return rows
    painted, left = [], len(title)
    for row in rows:  # the title's part of each row (textwrap only drops the spaces between)
        lead = len(row) - len(row.lstrip())
        body = row[lead:]
        take = min(left, len(body))
        painted.append(row[:lead] + (_paint(body[:take], code, colour) if take else "")
                       + body[take:])
        left = max(0, left - take - 1)
    return painted


def _value_rows(label: str, value: str, full: int, first: str, rest: str,
                rows: int = VALUE_ROWS) -> list[str]:
    """`label` then a value from the log (captures, a template): wrapped, every character
    kept, cut after `rows` rows with a marker that says how much is left out."""
    room = max(20, full - len(rest))
    out = _fill(label, full, first, rest) if label else [first]
    head = out.pop() + (" " if label else "")
    if full - len(head) < 20:  # a long label: the value starts on a row of its own
        out.append(head.rstrip())
        head = rest
    chunks = _excerpt(value, max(20, full - len(head)), rows, room)
    return out + [head + chunks[0]] + [rest + chunk for chunk in chunks[1:]]


def _excerpt(text: str, room: int, rows: int, later: int | None = None) -> list[str]:
    """`text` in rows of at most `room` characters (`later` for the rows after the first),
    broken after a space (else a slash) near the end, every character kept; past `rows` rows
    the last ends with `… (+N chars cut)`."""
    later = room if later is None else later
    out: list[str] = []
    pos = 0
    while pos < len(text):
        space = room if not out else later
        if len(text) - pos <= space:
            out.append(text[pos:])
            break
        if len(out) == rows - 1:
            marker_room = len(f" … (+{len(text)} chars cut)")
            end = pos + max(1, space - marker_room)
            out.append(f"{text[pos:end]} … (+{len(text) - end} chars cut)")
            break
        end = pos + space  # after the last space in the row's second half, else a slash
        for mark in " /":
            cut = text.rfind(mark, pos + space // 2, pos + space)
            if cut >= 0:
                end = cut + 1
                break
        out.append(text[pos:end])
        pos = end
    return out or [""]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    lines: list[str] = []
    for paragraph in text.split("\n"):
        lines.extend(textwrap.wrap(paragraph, width, break_on_hyphens=False) or [""])
    return lines


def _fill(text: str, width: int, first: str, rest: str) -> list[str]:
    """Prose in rows of at most `width` columns, the first after `first`, the others after
    `rest`."""
    import textwrap

    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False) or [first]


def _command_rows(words: Sequence[str], width: int, first: str, rest: str) -> list[str]:
    """A shell command in rows of at most `width` columns, each but the last ending with
    ` \\` so that it pastes as one command. A word too long for a row of its own (a path in
    a deep directory) is cut where the row ends and goes on at the next row's first column:
    a backslash-newline inside an unquoted word is no break to a shell."""
    rows: list[str] = []
    row = first
    for word in words:
        if row.strip() and len(row) + 1 + len(word) + 2 > width:
            rows.append(row + " \\")
            row = rest
        elif row.strip():
            row += " "
        while (len(row) + len(word) + 2 > width and "'" not in word
               and width - 2 - len(row) >= 1):
            take = width - 2 - len(row)
            rows.append(row + word[:take] + "\\")
            row, word = "", word[take:]
        row += word
    return [*rows, row]
