"""The triage report as text for a terminal: the headline, launches, the root cause and its
diagnosis, latent problems, other problems and unrecognised errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from logwatch.core.report import PROSE_FIELDS, problem_of, verdict
from logwatch.core.visible import visible_data

SEVERITY_COLOURS = {"critical": "1;35", "error": "1;31", "warning": "33", "info": "2"}
# Report fields that are prose the renderer wraps into lines itself: their newlines stay.
MAX_GROUPS_SHOWN = 10  # unrecognised templates in the text report; --json has them all
def _headline(report: Mapping[str, Any], fatal: int) -> str:
    """The report's first judgement, one line: never "healthy" for a failure or for input
    that holds no vLLM output."""
    incidents, root = report["incidents"], report["root_cause"]
    state = report.get("verdict") or verdict(incidents, root, report["stats"])
    if state == "unrecognised":
        captures = incidents[root]["captures"]
        what = captures.get("exc_type") or captures.get("what") or ""
        if captures.get("message"):
            what = f"{what}: {captures['message']}" if what else captures["message"]
        if captures.get("exit_code"):
            what = f"exit status {captures['exit_code']}"
        return (f"{fatal} fatal incident(s); root cause: unrecognised fatal error"
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
    return "No fatal incident and no error: vLLM looks healthy in this log."


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


def render_text(report: Mapping[str, Any], colour: bool = False, width: int = 100,
                title: str = "logwatch scan") -> str:
    """A report an operator reads top to bottom: the launches newest first, the newest
    failure's root cause and diagnoses, earlier failures in a line each, other problems,
    then the context (versions, backends, lifecycle) one line each. Every string from the
    report (log text, captures, file names) is rendered visibly: the terminal shows control
    characters, and obeys only the colours added here."""
    report = visible_data(report, PROSE_FIELDS)
    stats = report["stats"]
    incidents = report["incidents"]
    launches = report.get("launches") or []
    root = report["root_cause"]
    focus = incidents[root].get("launch") if root is not None else None
    fatal = sum(1 for i in incidents if i["fatal"] and i.get("launch", focus) == focus)
    out = [_paint(f"{title}: {stats.get('lines', 0):,} lines in {stats.get('files', 0)} "
                  f"input(s), signature library {report['library_version']}", "1", colour)]
    out.append(_headline(report, fatal))
    out.extend(_latent_headline(report, focus))
    for gap in report.get("incomplete") or []:
        out.append(_paint(f"warning: {incomplete_warning(gap)}", "1;33", colour))
    if len(launches) > 1:
        out += ["", _paint(f"LAUNCHES ({len(launches)}, newest first)", "1;4", colour)]
        out.extend(_launch_line(entry, incidents, width) for entry in launches)

    if root is not None:
        where = _launch_where(launches[focus]) if len(launches) > 1 and focus is not None else ""
        out += ["", _paint("ROOT CAUSE", "1;4", colour) + where]
        out += _incident_block(incidents[root], colour, width, max_evidence=8)
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
            out += _incident_block(inc, colour, width, max_evidence=3)
            out.append("")
        out.pop()
    out += _unrecognised_lines(report, colour, width)
    snapshots = report.get("snapshots") or {}
    if snapshots and (diagnoses or root is not None):
        out += ["", _paint("CONFIGURATION", "1;4", colour)]
        for digest, snap in snapshots.items():
            out.extend(_snapshot_lines(digest, snap, width))
    if context:
        out += ["", _paint("CONTEXT", "1;4", colour)]
        for inc in context:
            captures = " ".join(f"{k}={v}" for k, v in inc["captures"].items())
            seen = f"{inc['count']}x" if inc["count"] > 1 else f"line {inc['first_seen']['line']}"
            out.append(_clip(f"  {inc['title']}: {captures or '-'} ({seen})", width + 20))
    timeouts = stats.get("match_timeouts") or {}
    if timeouts:
        out += ["", "warning: the pattern time bound was hit (signature: count): "
                + ", ".join(f"{k}: {v}" for k, v in timeouts.items())]
    for signature_id, why in (stats.get("disabled_signatures") or {}).items():
        out.append(f"warning: signature {signature_id} was disabled: {why}")
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
        head = (f"Not an all-clear: {len(latent)} latent problem(s) in the configuration, "
                "which this log has not reached yet")
    return [head + ": " + "; ".join(d["title"] for d in latent) + " (see LATENT PROBLEMS)."]


def _latent_section(report: Mapping[str, Any], focus: int | None, colour: bool,
                    width: int) -> list[str]:
    latent = _latent_of(report, focus)
    if not latent:
        return []
    out = ["", _paint("LATENT PROBLEMS", "1;4", colour)
           + " (the configuration shows them; the log has not reached them yet)"]
    for diag in latent:
        out += _diagnosis_block(diag, colour, width)
        out.append("")
    out.pop()
    return out


def _unrecognised_lines(report: Mapping[str, Any], colour: bool, width: int) -> list[str]:
    """Unrecognised lines grouped by template, most frequent first, each with the command
    that drafts a signature from it."""
    groups = report.get("unrecognised") or []
    if not groups:
        return []
    out = ["", _paint(f"UNRECOGNISED ERRORS ({len(groups)} template(s); no signature knows "
                      "them)", "1;4", colour)]
    for number, group in enumerate(groups[:MAX_GROUPS_SHOWN], 1):
        out.append(_clip(f"  {number}. {group['count']}x  {group['template']}", width + 20))
        out.append(_paint(f"       first {group['source']}:{group['line']} "
                          f"({group['signature']}); draft a signature: logwatch signatures "
                          f"draft {group['source']} --group {number}", "2", colour))
    hidden = len(groups) - MAX_GROUPS_SHOWN + (1 if report.get("unrecognised_others") else 0)
    if hidden > 0:
        out.append(f"  ... and more (--json lists {len(groups)})")
    return out


def _launch_where(entry: Mapping[str, Any]) -> str:
    when = f", {entry['started']}" if entry.get("started") else ""
    return f" (launch {entry['number']}, from line {entry['start_line']}{when})"


def _launch_line(entry: Mapping[str, Any], incidents: Sequence[Mapping[str, Any]],
                 width: int) -> str:
    when = f" {entry['started']}" if entry.get("started") else ""
    head = f"  #{entry['number']}{when} (line {entry['start_line']}): {entry['outcome']}"
    root = entry.get("root_cause")
    if root is not None:
        head += f": {incidents[root]['title']}"
        if entry.get("failed_before"):
            head += f" (failed the same way {entry['failed_before']} time(s) before)"
    if entry.get("exit_code") not in (None, 0):
        head += f", exit code {entry['exit_code']}"
    return _clip(head, width + 20)


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


def _snapshot_lines(digest: str, snap: Mapping[str, Any], width: int) -> list[str]:
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
    out = [_clip(f"  {digest}: " + ", ".join(parts), width + 20)]
    out.extend(_clip(f"    problem: {p}", width + 20) for p in snap.get("problems") or [])
    return out


_MARKS = {True: ("yes", "32"), False: ("no ", "31"), None: (" ? ", "33")}


def _diagnosis_block(diag: Mapping[str, Any], colour: bool, width: int) -> list[str]:
    out = [_paint(diag["title"], "1", colour)
           + f"  (confidence {diag['confidence']:.0%}"
           + (f", from {diag['signature']})" if diag["signature"] else ")")]
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


def _incident_block(inc: Mapping[str, Any], colour: bool, width: int,
                    max_evidence: int) -> list[str]:
    badge = _paint(f"[{inc['severity'].upper()}]", SEVERITY_COLOURS[inc["severity"]], colour)
    out = [f"{badge}{' FATAL' if inc['fatal'] else ''} {inc['title']}",
           f"  signature {inc['signature']} v{inc['signature_version']} "
           f"({inc['category']}, {inc['status']}), remedy: {inc['remedy']}"]
    copies = f" (+{inc['copies']} copies)" if inc["copies"] else ""
    out.append(f"  seen {inc['count']}x{copies}, first {_when(inc['first_seen'])}"
               + (f", last {_when(inc['last_seen'])}" if inc["count"] > 1 else ""))
    where = []
    if inc["processes"]:
        where.append("processes " + ", ".join(inc["processes"]))
    if inc["ranks"]:
        where.append("ranks " + ", ".join(inc["ranks"]))
    if where:
        out.append("  " + "; ".join(where))
    if inc["captures"]:
        captures = "  ".join(f"{k}={v}" for k, v in inc["captures"].items())
        out.append(f"  captured: {_clip(captures, width - 12)}")
    evidence = inc["evidence"]
    shown = evidence if len(evidence) <= max_evidence else evidence[-max_evidence:]
    out.append("  evidence:" + (f" (last {len(shown)} of {len(evidence)} lines)"
                                if len(shown) < len(evidence) else ""))
    for ev in shown:
        out.append(_paint(f"    {ev['source']}:{ev['line']}: ", "2", colour)
                   + _clip(ev["text"], width + 40))
    out.append("  why:")
    out.extend("    " + ln for ln in _wrap(inc["explanation"], width - 4))
    return out


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    lines: list[str] = []
    for paragraph in text.split("\n"):
        lines.extend(textwrap.wrap(paragraph, width) or [""])
    return lines
