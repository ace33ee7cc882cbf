"""An incident keeps its first and last findings for as long as its launch lasts: each with
its record cut to the lines its evidence shows (findings.kept), which give the same evidence
again. A crash loop's launches once held every traceback they met whole."""

from __future__ import annotations

from datetime import datetime

from logwatch.core.launches.incidents import IncidentBook
from logwatch.core.signatures.block_scan import BlockScanner
from logwatch.core.signatures.findings import MAX_EVIDENCE_LINES_OF_ONE, kept
from logwatch.core.signatures.library import Library
from tests.conftest import SAMPLES, roomy_matcher


def test_an_incident_keeps_only_the_lines_its_evidence_shows(library: Library) -> None:
    long = []
    for path in sorted(SAMPLES.glob("*.log")):
        scanner = BlockScanner(roomy_matcher(library), path.name, datetime(2026, 11, 30),
                               whole_input=True)
        found = scanner.feed(path.read_bytes()) + scanner.finish()
        long += [f for f in found if len(f.record.lines) > MAX_EVIDENCE_LINES_OF_ONE]
    assert len(long) > 20  # tracebacks: tens of lines each
    for finding in long:
        book = IncidentBook()
        incident = book.add(finding)
        for stored in (incident.first, incident.last, kept(finding)):
            assert len(stored.record.lines) <= MAX_EVIDENCE_LINES_OF_ONE
            assert stored.evidence == finding.evidence
            assert (stored.lineno, stored.record_lineno, stored.record_last_lineno,
                    stored.captures) == (finding.lineno, finding.record_lineno,
                                         finding.record_last_lineno, finding.captures)
        assert incident.evidence == list(finding.evidence)
