"""Split a log into vLLM launches by the lines each start prints (version, non-default args,
engine config), so every incident is judged against the configuration in force when it
happened."""

from __future__ import annotations

from dataclasses import dataclass, field

from logwatch.core.findings import Finding

LAUNCH_SIGNATURES = ("lifecycle.version", "lifecycle.non_default_args",
                     "lifecycle.engine_config")


@dataclass(slots=True)
class LaunchSegment:
    source: str
    start_line: int
    captures: dict[str, dict[str, str]] = field(default_factory=dict)  # signature id -> captures


class LaunchTracker:
    """Observes findings in line order; a launch line seen twice starts a new launch."""

    def __init__(self) -> None:
        self.segments: dict[str, list[LaunchSegment]] = {}

    def observe(self, finding: Finding) -> None:
        sig = finding.signature.id
        if sig not in LAUNCH_SIGNATURES:
            return
        segments = self.segments.setdefault(finding.source, [])
        if not segments or sig in segments[-1].captures:
            segments.append(LaunchSegment(finding.source, finding.record_lineno))
        segments[-1].captures.setdefault(sig, dict(finding.captures))

    def segment_for(self, source: str, lineno: int) -> LaunchSegment | None:
        """The launch in force at a line: the last one that started at or before it."""
        found = None
        for segment in self.segments.get(source, []):
            if segment.start_line <= lineno:
                found = segment
        return found
