"""The fallback on a launch: failures no specific signature explains are still incidents, never
"healthy".

A launch whose failure a specific signature explains, or that came up and kept serving, shows
its generic incidents (core.signatures.fallback) demoted, never a second root cause; a launch
with no fatal incident that never came up promotes its unrecognised error (an ERROR line, else
a traceback without its exception); a `run` child that
exited non-zero with nothing recognised gets an exit-status incident.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from logwatch.core.launches.incidents import Incident
from logwatch.core.launches.lifecycle import FAILED, SERVING, STOPPED, Launch
from logwatch.core.signatures.fallback import TRACEBACK_CUT, is_generic
from logwatch.core.signatures.findings import Finding
from logwatch.core.signatures.placed import ERROR_LINE, rule_of
from logwatch.core.signatures.signature import FALLBACK_CATEGORY, Signature

EXIT_STATUS = "generic.exit_status"
# Not a pattern, so not a file: a child's non-zero exit that nothing in its output explains.
EXIT_SIGNATURE = Signature(
    id=EXIT_STATUS, version=1, status="stable", severity="error", fatal=True,
    category=FALLBACK_CATEGORY,
    title="Unrecognised fatal error: the process exited with a failure status",
    patterns=(), remedy="investigate", examples=(), counter_examples=(),
    key_captures=("exit_code",), vllm_versions="any",
    explanation="The command exited with status {exit_code} and no signature recognised "
                "anything in its output that explains it. Read the last lines it printed; "
                "a recurring cause can become a signature (`logwatch signatures draft`).")


def cause_rank(incident: Incident) -> int:
    """Among fatal incidents that are causes: specific ones before the fallback."""
    return 1 if is_generic(incident.signature) else 0


def settle_launch(launch: Launch, incidents: list[Incident], root: int | None
                  ) -> tuple[list[Incident], int | None]:
    """A launch's incidents with the fallback applied (see the module docstring)."""
    rooted = incidents[root] if root is not None else None
    if rooted is not None and not is_generic(rooted.signature):
        return [i if i is rooted else _demoted(i) for i in incidents], root
    if rooted is not None and launch.outcome in (SERVING, STOPPED):
        # the server came up and kept going: an unrecognised error is one to look at, not
        # the end of the launch
        return [_demoted(i) for i in incidents], None
    if rooted is not None:
        return incidents, root
    if any(i.signature.fatal for i in incidents):
        return incidents, root
    # an error said in words before frames without their exception
    errors = sorted((i for i in incidents if rule_of(i.signature) in (ERROR_LINE, TRACEBACK_CUT)),
                    key=lambda i: rule_of(i.signature) != ERROR_LINE)
    if errors and launch.outcome not in (SERVING, STOPPED):
        promoted = replace(errors[0], signature=replace(errors[0].signature, fatal=True))
        rest = [i for i in incidents if i is not errors[0]]
        return [promoted, *rest], 0
    if launch.outcome == FAILED and launch.exit_code not in (None, 0):
        return [exit_incident(launch), *incidents], 0
    return incidents, root


def _demoted(incident: Incident) -> Incident:
    """A fallback incident shown but not fatal; any other incident as it is."""
    if not (is_generic(incident.signature) and incident.signature.fatal):
        return incident
    return replace(incident, signature=replace(incident.signature, fatal=False))


def exit_incident(launch: Launch) -> Incident:
    """The incident of a child's failure status that nothing in its output explained."""
    code = str(launch.exit_code)
    text = f"the process exited with status {code}; no signature recognised its output"
    finding = Finding.restored(EXIT_SIGNATURE, {"exit_code": code}, launch.source,
                               max(launch.last_line, launch.start_line), text, None, None,
                               None, None)
    return Incident(EXIT_SIGNATURE, (f"exit_code={code}",), finding, finding,
                    evidence=list(finding.evidence))


def synthetic(incidents: Sequence[Incident]) -> list[Incident]:
    """Incidents no finding backs (a store writes their rows itself)."""
    return [i for i in incidents if i.signature.id == EXIT_STATUS]
