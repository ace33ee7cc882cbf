"""The report's verdict: one word an operator acts on, earned by evidence.

"healthy" is read as "do nothing" and "failed" as "wake up", so neither is a default: each
verdict needs the evidence its rule names, and the rules are tried in the order of `RULES`
(the first that holds decides). The README's verdict table is this table (a test reads it).

- failed:         a fatal incident a specific signature explains (its root cause).
- failed:         the cause is not in the excerpt: a vLLM traceback without its final
                  exception, in a launch that never came up; the deepest vLLM frames name the
                  area.
- failed:         a fatal error whose wording vLLM's own sources raise (its vocabulary,
                  core.signatures.vocabulary), raised by vLLM's code outside the API server
                  (whose errors are mostly a request's), and no signature diagnoses: the
                  check that failed and its part of vLLM.
- unrecognised:   a fatal error no specific signature explains (an exception, a process that
                  died, an ERROR line of a launch that never came up, a non-zero exit).
- errors:         no fatal incident, but errors to look at (an unexplained ERROR line while
                  serving, a draft accepted almost never, ...).
- no_vllm_output: no line of the input was written by vLLM.
- incomplete:     vLLM output, nothing wrong in it, but no evidence the newest launch came up:
                  the log stops in its start-up, or it was stopped before it served.
- healthy:        the newest launch came up (`Application startup complete`, or vLLM's
                  periodic throughput stats) and nothing above holds.

A shutdown is not a crash: the reports of the engine core gone that follow vLLM's own
shutdown line are context, and a launch that stopped after serving stays healthy
(core.launches.lifecycle). User content is never evidence: request logs and bodies are not
read for findings (core.signatures.matcher).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from logwatch.core.signatures.fallback import TRACEBACK_CUT
from logwatch.core.signatures.placed import KNOWN_ERROR_SUFFIX
from logwatch.core.signatures.signature import FALLBACK_CATEGORY

FAILED, UNRECOGNISED, ERRORS = "failed", "unrecognised", "errors"
NO_VLLM_OUTPUT, INCOMPLETE, HEALTHY = "no_vllm_output", "incomplete", "healthy"
VERDICTS = (FAILED, UNRECOGNISED, ERRORS, NO_VLLM_OUTPUT, INCOMPLETE, HEALTHY)


ERROR_SEVERITIES = ("error", "critical")


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the verdict is judged on, read from a report."""

    root: Mapping[str, Any] | None  # the root-cause incident
    errors: bool  # an incident at error severity or above, fatal or not
    vllm_output: bool  # a line of the input was vLLM's
    came_up: bool  # the newest launch served (or a launch the report holds did)
    stopped: bool  # the newest launch stopped (a shutdown line, exit 0)


@dataclass(frozen=True, slots=True)
class Rule:
    verdict: str
    reason: str  # the JSON's `verdict_reason`
    evidence: str  # what it needs, as the README says it
    holds: Callable[[Evidence], bool]


def _cause_shown(e: Evidence) -> bool:
    return e.root is not None and e.root["category"] != FALLBACK_CATEGORY


def _cause_cut(e: Evidence) -> bool:
    return e.root is not None and e.root["signature"] == TRACEBACK_CUT


def _known_check(e: Evidence) -> bool:
    # not the API server's: what it raises is mostly a request's error (a client's input)
    return (e.root is not None and str(e.root["signature"]).endswith(KNOWN_ERROR_SUFFIX)
            and e.root["captures"].get("area") != "api_server")


RULES: tuple[Rule, ...] = (
    Rule(FAILED, "root_cause",
         "a fatal incident a specific signature explains: its root cause",
         _cause_shown),
    Rule(FAILED, "cause_not_in_excerpt",
         "vLLM traceback frames without their final exception, in a launch that never came "
         "up: the cause is not in the excerpt; the deepest vLLM frames name the area",
         _cause_cut),
    Rule(FAILED, "known_vllm_error",
         "a fatal error whose wording vLLM's own sources raise (its vocabulary), raised by "
         "vLLM's own code outside the API server, and no signature diagnoses: the check that "
         "failed, where, and the releases that print it",
         _known_check),
    Rule(UNRECOGNISED, "unrecognised_fatal",
         "a fatal error no specific signature explains: an exception, a process that died, "
         "an ERROR line of a launch that never came up, a non-zero exit",
         lambda e: e.root is not None),
    Rule(ERRORS, "errors",
         "no fatal incident, but an incident at error severity (an unexplained ERROR line "
         "while serving, a draft accepted almost never)",
         lambda e: e.errors),
    Rule(NO_VLLM_OUTPUT, "no_vllm_output",
         "no line of the input was written by vLLM (no logger header, process prefix or "
         "access line of its server)",
         lambda e: not e.vllm_output),
    Rule(INCOMPLETE, "stopped_before_serving",
         "vLLM output and nothing wrong in it, but the newest launch was stopped before it "
         "came up",
         lambda e: not e.came_up and e.stopped),
    Rule(INCOMPLETE, "never_came_up",
         "vLLM output and nothing wrong in it, but no evidence the newest launch came up: "
         "the log stops in its start-up",
         lambda e: not e.came_up),
    Rule(HEALTHY, "serving",
         "the newest launch came up (`Application startup complete`, or vLLM's periodic "
         "`Avg prompt throughput` stats) and none of the above holds; a shutdown after it "
         "is not a failure",
         lambda e: True),
)


@dataclass(frozen=True, slots=True)
class Verdict:
    name: str
    reason: str


def evidence(incidents: Sequence[Mapping[str, Any]], root: int | None,
             launches: Sequence[Mapping[str, Any]], stats: Mapping[str, Any]) -> Evidence:
    """The evidence in a report's parts (launches newest first)."""
    return evidence_from(incidents[root] if root is not None else None,
                         any(i["severity"] in ERROR_SEVERITIES for i in incidents),
                         launches[0] if launches else None, stats)


def evidence_from(root: Mapping[str, Any] | None, errors: bool,
                  newest: Mapping[str, Any] | None, stats: Mapping[str, Any]) -> Evidence:
    """The evidence from the root-cause incident, whether any incident is an error, and the
    newest launch (report_dict gathers them without every incident at hand)."""
    return Evidence(
        root=root, errors=errors, vllm_output=stats.get("vllm_output") is not False,
        came_up=newest is not None and bool(newest.get("served")),
        stopped=newest is not None and newest.get("outcome") == "stopped")


def judge(e: Evidence) -> Verdict:
    rule = next(r for r in RULES if r.holds(e))
    return Verdict(rule.verdict, rule.reason)


def verdict_of(report: Mapping[str, Any]) -> Verdict:
    """The verdict of a report (one `report_dict` made, or its JSON read back)."""
    return judge(evidence(report["incidents"], report["root_cause"],
                          report.get("launches") or [], report["stats"]))
