"""Whether a relaunch worked: more than `/health`. The relaunched launch must have logged
`Application startup complete`, answer `/health`, serve the expected model on `/v1/models`,
answer one tiny completion, have no fatal finding, not have gone through Marlin (a repack
error, a fallback, a Marlin kernel chosen: then the change did not take effect), and, with
MTP speculative decoding on, accept drafts at a rate not near zero after a short soak.

Pure: the probes' answers and the launch's findings come in as plain data (relaunch/verify.py
gathers them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from logwatch.core.diagnosis.diagnose import FP4_KERNEL_SIGNATURES
from logwatch.core.launches.lifecycle import ACCEPTANCE_READINGS, READY_SIGNATURES
from logwatch.core.remedy.plan import Check
from logwatch.core.signatures.findings import Finding
from logwatch.core.signatures.signature import parse_number

MARLIN_SIGNATURE_PREFIXES = ("marlin.",)
MARLIN_FALLBACKS = frozenset({"nvfp4.marlin_fallback", "nvfp4.marlin_negative_scales"})
MIN_ACCEPTANCE_PERCENT = 5.0  # below this, the MTP draft is garbage (see spec_decode.low_*)


@dataclass(frozen=True, slots=True)
class Probes:
    """What the relaunched server answered; None where a probe got no answer."""

    health_status: int | None = None
    models: tuple[str, ...] | None = None
    completion: str | None = None  # the completion's text, "" when it answered empty
    errors: dict[str, str] = field(default_factory=dict)  # probe -> why it got no answer


@dataclass(frozen=True, slots=True)
class Verdict:
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return all(c.holds for c in self.checks)

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.holds)


def judge(findings: Sequence[Finding], probes: Probes, expected_model: str,
          uses_mtp: bool) -> Verdict:
    """Every check of the relaunched launch, from its findings (in log order) and the
    probes' answers."""
    started = any(f.signature.id in READY_SIGNATURES for f in findings)
    checks = [
        Check("startup_complete", started, "vLLM logged `Application startup complete`"
              if started else "no `Application startup complete` line for this launch"),
        _health(probes), _models(probes, expected_model), _completion(probes),
    ]
    fatal = sorted({f.signature.id for f in findings if f.signature.fatal})
    checks.append(Check("no_fatal_finding", not fatal,
                        "no fatal finding" if not fatal else "fatal: " + ", ".join(fatal)))
    marlin = sorted({f"{f.signature.id} (line {f.lineno})" for f in findings if _marlin(f)})
    checks.append(Check("not_marlin", not marlin, "no Marlin repack, fallback or kernel" if not
                        marlin else "the change did not take effect: " + ", ".join(marlin)))
    if uses_mtp:
        checks.append(_acceptance(findings))
    return Verdict(tuple(checks))


def _marlin(finding: Finding) -> bool:
    sid = finding.signature.id
    if sid.startswith(MARLIN_SIGNATURE_PREFIXES) or sid in MARLIN_FALLBACKS:
        return True
    return sid in FP4_KERNEL_SIGNATURES and "marlin" in finding.captures.get("backend", "").lower()


def _health(probes: Probes) -> Check:
    status = probes.health_status
    if status is None:
        return Check("health", False, f"/health: {probes.errors.get('health', 'no answer')}")
    return Check("health", status == 200, f"/health answered {status}")


def _models(probes: Probes, expected: str) -> Check:
    if probes.models is None:
        return Check("serves_model", False,
                     f"/v1/models: {probes.errors.get('models', 'no answer')}")
    served = expected in probes.models
    return Check("serves_model", served, f"/v1/models lists {expected}" if served else
                 f"/v1/models lists {', '.join(probes.models) or 'nothing'}, not {expected}")


def _completion(probes: Probes) -> Check:
    if probes.completion is None:
        return Check("completion", False,
                     f"a tiny completion: {probes.errors.get('completion', 'no answer')}")
    return Check("completion", True, "a tiny completion answered")


def _acceptance(findings: Sequence[Finding]) -> Check:
    rates = [f.captures.get("rate_percent") for f in findings
             if f.signature.id in ACCEPTANCE_READINGS]
    readings = [n for r in rates if r is not None and (n := parse_number(r)) is not None]
    if not readings:
        return Check("draft_acceptance", False, "no speculative-decoding reading yet")
    last = readings[-1]
    return Check("draft_acceptance", last >= MIN_ACCEPTANCE_PERCENT,
                 f"draft acceptance {last:g}%" + ("" if last >= MIN_ACCEPTANCE_PERCENT else
                                                   " (near zero: the MTP draft is garbage)"))

