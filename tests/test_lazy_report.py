"""`scan --json` without --db makes the report's incidents and diagnoses as it writes them
(core.report.triage.ReportItems): a crash loop's thousands of launches gave tens of MB of
dicts held at once (peak RSS on the 256 MB backlog of make bench: 234 -> 168 MiB). The text
written is the same as from the lists, and the exit status is read from the launches."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

from logwatch.cli.scan_command import write_json
from logwatch.core.report.triage import ReportItems
from logwatch.core.signatures.library import Library
from logwatch.scan.offline import resolve_inputs, scan_inputs
from tests.conftest import SAMPLES


def _written(report: dict[str, object]) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        write_json(report)
    return out.getvalue()


def test_a_lazy_report_writes_the_text_the_lists_give(library: Library, tmp_path: Path) -> None:
    failures = [p for p in sorted(SAMPLES.glob("*.log")) if not p.name.startswith("healthy")]
    log = tmp_path / "loop.log"
    log.write_bytes(b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in failures[:12]))
    inputs = resolve_inputs([str(log)])
    whole = scan_inputs(inputs, library, jobs=1)
    lazy = scan_inputs(inputs, library, jobs=1, lazy_report=True)
    assert isinstance(lazy["incidents"], ReportItems) and isinstance(whole["incidents"], list)
    assert len(whole["launches"]) > 3 and whole["incidents"] and whole["diagnoses"]
    for report in (whole, lazy):
        report["stats"].pop("seconds")
        report["stats"].pop("mb_per_s")
    assert _written(lazy) == _written(whole)
    items = [json.loads(text) for text in lazy["incidents"]]  # spooled: their JSON text
    assert items == [json.loads(text) for text in lazy["incidents"]] == whole["incidents"]
    assert [json.loads(text) for text in lazy["diagnoses"]] == whole["diagnoses"]
    assert json.loads(_written(lazy))["verdict"] == whole["verdict"]


def test_the_launches_say_what_the_incidents_say_of_fatal_ones(library: Library) -> None:
    """The exit status (a fatal incident found) is read from the launches' counts, which a
    lazy report has at hand: the same answer as the incidents give, on every sample."""
    for log in sorted(SAMPLES.glob("*.log")):
        report = scan_inputs(resolve_inputs([str(log)]), library, jobs=1)
        assert any(i["fatal"] for i in report["incidents"]) == any(
            launch["fatal_incidents"] for launch in report["launches"]), log.name


def test_a_lazy_report_of_nothing_is_json(library: Library, tmp_path: Path) -> None:
    """Empty lists (an empty log, a log with no finding) are written as such."""
    for text in ("", "hello world\n"):
        log = tmp_path / "plain.log"
        log.write_text(text)
        inputs = resolve_inputs([str(log)])
        lazy = scan_inputs(inputs, library, jobs=1, lazy_report=True)
        whole = scan_inputs(inputs, library, jobs=1)
        for report in (whole, lazy):
            report["stats"].pop("seconds")
            report["stats"].pop("mb_per_s")
        assert _written(lazy) == _written(whole)
        assert json.loads(_written(lazy))["incidents"] == []
