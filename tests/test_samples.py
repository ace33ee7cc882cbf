"""One generated test per annotated sample log: the scan must meet the expectations beside it.

Each `samples/logs/NAME.log` has `NAME.expect.toml` listing the incidents it must produce (with
captures, counts, ranks), the root cause, the verdict, and for healthy logs the highest severity
allowed.
Both scan paths (prefiltered blocks and the full per-line pipeline) must give the same report.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.report.verdict import VERDICTS
from logwatch.core.signatures.library import Library
from logwatch.core.signatures.placed import rule_of
from logwatch.core.signatures.signature import SEVERITIES
from logwatch.scan.offline import resolve_inputs, scan_inputs
from tests.conftest import SAMPLES

SAMPLE_LOGS = sorted(p for p in SAMPLES.glob("*.log*") if not p.name.endswith(".toml"))


def _expectations(log: Path) -> dict[str, Any]:
    name = log.name.split(".log")[0]
    return tomllib.loads((log.parent / f"{name}.expect.toml").read_text(encoding="utf-8"))


def _scan(log: Path, tmp_path: Path, expect: dict[str, Any], library: Library,
          mode: str) -> dict[str, Any]:
    copy = tmp_path / log.name
    shutil.copyfile(log, copy)
    reference = datetime.fromisoformat(expect["reference_time"])
    os.utime(copy, (reference.timestamp(), reference.timestamp()))
    return scan_inputs(resolve_inputs([str(copy)]), library, mode=mode)


def _problems(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's incidents merged over launches (the same signature and key captures):
    what the whole file holds, the oldest launch's first sighting first."""
    merged: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
    for incident in reversed(report["incidents"]):  # newest launch first: oldest first here
        key = (incident["signature"], tuple(incident["key"]))
        seen = merged.get(key)
        if seen is None:
            merged[key] = dict(incident)
            continue
        seen["count"] += incident["count"]
        seen["last_seen"] = incident["last_seen"]
        for field in ("ranks", "processes"):
            seen[field] = sorted(set(seen[field]) | set(incident[field]))
    return list(merged.values())


def _describe(incident: dict[str, Any]) -> str:
    return (f"{incident['signature']} x{incident['count']} {incident['captures']} "
            f"first {incident['first_seen']}")


def test_every_sample_has_expectations() -> None:
    assert SAMPLE_LOGS, "no sample logs found"
    for log in SAMPLE_LOGS:
        assert _expectations(log).get("verdict") in VERDICTS, f"{log.name}: no verdict"


@pytest.mark.parametrize("log", SAMPLE_LOGS, ids=lambda p: p.name)
def test_sample(log: Path, tmp_path: Path, library: Library) -> None:
    expect = _expectations(log)
    report = _scan(log, tmp_path, expect, library, mode="auto")
    incidents = report["incidents"]
    problems = _problems(report)
    by_signature: dict[str, list[dict[str, Any]]] = {}
    for incident in problems:
        by_signature.setdefault(incident["signature"], []).append(incident)
    seen = "\n  ".join(_describe(i) for i in problems)

    for want in expect.get("incidents", []):
        candidates = by_signature.get(want["signature"], [])
        assert candidates, f"{log.name}: expected {want['signature']}; got:\n  {seen}"
        matching = [c for c in candidates
                    if all(c["captures"].get(k) == v for k, v in want.get("captures", {}).items())]
        assert matching, (f"{log.name}: {want['signature']} captures {want.get('captures')} "
                          f"not found; got {[c['captures'] for c in candidates]}")
        got = matching[0]
        if "count" in want:
            assert got["count"] == want["count"], f"{log.name}: {_describe(got)}"
        for key in ("ranks", "processes"):
            if key in want:
                assert got[key] == sorted(want[key]), f"{log.name}: {key} of {_describe(got)}"
        if "first_time" in want:
            assert got["first_seen"]["time"] == want["first_time"], _describe(got)
        if "last_time" in want:
            assert got["last_seen"]["time"] == want["last_time"], _describe(got)
        if "first_line" in want:
            assert got["first_seen"]["line"] == want["first_line"], _describe(got)

    # a fallback rule is absent placed too (core.signatures.placed: `<area>.<kind>` refines it)
    rules = {found: rule_of(library.get(found) or library.signatures[0]) for found in by_signature}
    for absent in expect.get("absent", []):
        assert absent not in by_signature and absent not in rules.values(), \
            f"{log.name}: {absent} must not be reported"

    root = report["root_cause"]
    if expect.get("root_cause"):
        assert root is not None, f"{log.name}: no root cause; got:\n  {seen}"
        assert incidents[root]["signature"] == expect["root_cause"], (
            f"{log.name}: root cause {incidents[root]['signature']}, "
            f"expected {expect['root_cause']}")
    else:
        assert root is None, f"{log.name}: unexpected root cause {incidents[root]['signature']}"

    if "launches" in expect:  # oldest first, as the log tells them
        launches = list(reversed(report["launches"]))
        got = [(entry["outcome"], incidents[entry["root_cause"]]["signature"]
                if entry["root_cause"] is not None else None) for entry in launches]
        want = [(entry["outcome"], entry.get("root_cause")) for entry in expect["launches"]]
        assert got == want, f"{log.name}: launches {got}, expected {want}"

    if "max_severity" in expect:
        limit = SEVERITIES.index(expect["max_severity"])
        loud = [i for i in incidents if SEVERITIES.index(i["severity"]) > limit]
        assert not loud, (f"{log.name}: above {expect['max_severity']}: "
                          f"{[_describe(i) for i in loud]}")

    assert report["verdict"] == expect["verdict"], f"{log.name}: {report['verdict_reason']}"

    full = _scan(log, tmp_path, expect, library, mode="full")
    assert full["incidents"] == incidents, f"{log.name}: prefilter and full scans disagree"
    assert full["root_cause"] == root


def test_every_signature_is_exercised_by_a_sample(library: Library) -> None:
    expected: set[str] = set()
    for log in SAMPLE_LOGS:
        expect = _expectations(log)
        expected |= {i["signature"] for i in expect.get("incidents", [])}
        if expect.get("root_cause"):
            expected.add(expect["root_cause"])
    # a placed signature exercises the rule it refines (core.signatures.placed)
    expected |= {rule_of(found) for found in map(library.get, expected) if found is not None}
    missing = sorted(s.id for s in library.signatures if s.id not in expected)
    assert missing == [], f"signatures no sample log expects: {missing}"


def test_samples_cover_every_wrapper_and_process_era() -> None:
    from logwatch.core.lines.normalize import unwrap
    from logwatch.core.lines.vllm_format import parse_line

    reference = datetime(2026, 11, 30)
    wrappers: set[str] = set()
    processes: set[str] = set()
    kinds: set[str] = set()
    for log in SAMPLES.glob("*.log"):
        for raw in log.read_text(encoding="utf-8", errors="replace").splitlines():
            wrappers.update(unwrap(raw, reference).wrappers)
            parsed = parse_line(log.name, 1, raw, reference)
            kinds.add(parsed.kind)
            if parsed.process:
                processes.add(parsed.process.split("_")[0])
    assert {"docker-compose", "timestamp", "journald", "ci-gutter", "torch-rank", "kubectl",
            "ray-repeated", "docker-json", "markdown"} <= wrappers
    assert {"APIServer", "EngineCore", "Worker", "VllmWorker", "VllmWorkerProcess",
            "MainProcess", "RayWorkerWrapper"} <= processes
    assert {"vllm", "prefix", "uvicorn", "glog", "json", "raw"} <= kinds
