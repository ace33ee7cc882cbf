"""A scan's report kept on disk launch by launch, for `scan --json`.

A crash loop's backlog holds thousands of launches; holding each one's incidents, findings
and lines until the scan ends cost ~22 KB a launch (the 256 MB backlog of `make bench`:
165 MiB). Here a launch is analysed as soon as the next one of its source begins (nothing
after that changes it: a scan places each finding in its source's current launch), its
incidents and diagnoses written to an unnamed temporary file as JSON text, and only its
summary (core.report.triage.LaunchSummary) kept. The report's two long lists are read back
in the report's order as they are written out, each item placed (its launch's number, its
incident index moved by the launch's base) in its text: the same text as the report made in
memory gives (tests/test_report_spool.py).
"""

from __future__ import annotations

import bisect
import json
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any, NamedTuple

from logwatch.core.diagnosis.analysis import analyse
from logwatch.core.launches.lifecycle import Launch
from logwatch.core.report.triage import (
    EncodedJson,
    LaunchSummary,
    ReportItems,
    assemble,
    bases,
    own_diagnoses,
    own_incidents,
    summarise,
)
from logwatch.core.snapshot.model import Snapshot
from logwatch.scan.triage import SnapshotResolver

# A diagnosis's incident index as spooled: replaced by its place in the report when read.
# An integer no launch reaches, written where the key is (a string value cannot hold the
# key's unescaped quotes).
_INCIDENT = -7_700_000_000_000_000_001
_INCIDENT_TEXT = f'"incident": {_INCIDENT}'
IN_MEMORY_BYTES = 8 << 20  # of report text, before it goes to a temporary file


class SpoolError(RuntimeError):
    """The report could not be kept on disk (a full or unwritable temporary directory)."""


class _Spooled(NamedTuple):
    order: tuple[int, int]  # among the book's launches: (source first seen, number)
    summary: LaunchSummary
    incidents_at: int  # where its incidents' lines start in the spool
    diagnoses_at: int  # and its diagnoses'


class ReportSpool:
    """Launches analysed as they end, their report items on disk."""

    def __init__(self, resolver: SnapshotResolver) -> None:
        self._resolver = resolver
        self.snapshots: dict[str, dict[str, Any]] = {}  # by hash, each a launch used
        # read back when the report is written, after the scan: closed with the spool. In
        # memory up to IN_MEMORY_BYTES (a small scan touches no disk), then an unnamed file
        self._file: IO[bytes] = tempfile.SpooledTemporaryFile(  # noqa: SIM115
            max_size=IN_MEMORY_BYTES, prefix="logwatch-report-")
        self._encode = json.JSONEncoder(ensure_ascii=False).encode  # as scan --json writes
        self._launches: list[_Spooled] = []
        self._sources: dict[str, int] = {}  # the order sources were first seen
        # each source's launches in order: where each started, its snapshot's hash
        self._starts: dict[str, tuple[list[int], list[str]]] = {}

    def __len__(self) -> int:
        return len(self._launches)

    @property
    def incidents(self) -> int:
        return sum(spooled.summary.incidents for spooled in self._launches)

    def add(self, launch: Launch) -> None:
        """Analyse an ended launch and spool its items; nothing of it is kept but its
        summary."""
        snapshot = self._resolver.for_launch(launch)
        self._resolver.forget(launch)
        digest = self._recorded(snapshot)
        analysis = analyse(launch, snapshot)
        summary = summarise(analysis, digest)
        incidents = "".join(self._encode(entry) + "\n" for entry in own_incidents(analysis))
        diagnoses = []
        for entry in own_diagnoses(analysis):
            relative = entry.get("incident")
            if relative is not None:
                entry["incident"] = _INCIDENT
            diagnoses.append(f"{'' if relative is None else relative}\t{self._encode(entry)}\n")
        # a label may hold what a file name held that is not UTF-8 (lone surrogates): kept
        # as they are, as scan --json writes them
        written = incidents.encode(errors="surrogatepass")
        self._file.seek(0, 2)
        offset = self._file.tell()
        try:
            self._file.write(written + "".join(diagnoses).encode(errors="surrogatepass"))
        except OSError as exc:  # not the input's fault: say where the spool is
            raise SpoolError(f"cannot keep the report in a temporary file in "
                             f"{tempfile.gettempdir()} ({exc.strerror or exc}); set TMPDIR "
                             "to a directory with space") from exc
        source = self._sources.setdefault(launch.source, len(self._sources))
        self._launches.append(_Spooled((source, launch.number), summary, offset,
                                       offset + len(written)))
        starts, digests = self._starts.setdefault(launch.source, ([], []))
        starts.append(launch.start_line)
        digests.append(digest)

    def snapshot_at(self, source: str, line: int) -> str:
        """The hash of the snapshot in force at a line (the launch started last at or before
        it), as scan.triage.Triage.snapshot_at answers it for the launches in memory."""
        lines, digests = self._starts.get(source, ([], []))
        index = bisect.bisect_right(lines, line) - 1
        if index >= 0:
            return digests[index]
        return self._recorded(self._resolver.for_launch(None))

    def _recorded(self, snapshot: Snapshot) -> str:
        """The snapshot's hash, the snapshot kept in the report's snapshots under it."""
        digest = snapshot.content_hash()
        if digest not in self.snapshots:
            self.snapshots[digest] = snapshot.to_dict()
        return digest

    def _read(self, offset: int, count: int) -> list[str]:
        """`count` lines from `offset`, without their newline."""
        self._file.seek(offset)
        return [self._file.readline().decode(errors="surrogatepass")[:-1]
                for _ in range(count)]

    def report(self, library_version: str, stats: Mapping[str, Any],
               order: Sequence[str]) -> dict[str, Any]:
        """The report, newest launch first (`order`: the sources as read, later ones newer),
        as core.report.triage.report_dict makes it with `lazy`, its items EncodedJson."""
        rank = {source: n for n, source in enumerate(order)}
        # the book's order (sources as first seen, launches in turn), then the report's
        launches = sorted(self._launches, key=lambda spooled: spooled.order)
        launches.sort(key=lambda spooled: (rank.get(spooled.summary.source, 0),
                                           spooled.summary.start_line), reverse=True)
        summaries = [spooled.summary for spooled in launches]
        placing = bases(summaries)
        # in the order the report names them, as report_dict records them
        for digest in dict.fromkeys(s.head["snapshot"] for s in summaries):
            self.snapshots[digest] = self.snapshots.pop(digest)
        encode = self._encode

        def incident_items() -> Iterator[EncodedJson]:
            for number, (_, summary, offset, _) in enumerate(launches):
                tail = f', "launch": {number}, "snapshot": {encode(summary.head["snapshot"])}}}'
                for text in self._read(offset, summary.incidents):
                    yield EncodedJson(text[:-1] + tail)

        def diagnosis_items() -> Iterator[EncodedJson]:
            for number, (_, summary, _, offset) in enumerate(launches):
                base = placing[number][0]
                for line in self._read(offset, summary.diagnoses):
                    relative, text = line.split("\t", 1)
                    if relative:
                        text = text.replace(_INCIDENT_TEXT,
                                            f'"incident": {base + int(relative)}', 1)
                    yield EncodedJson(f"{text[:-1]}, \"launch\": {number}}}")

        def root_incident(number: int) -> dict[str, Any]:
            _, summary, offset, _ = launches[number]
            assert summary.root is not None
            text = self._read(offset, summary.root + 1)[-1]
            entry: dict[str, Any] = json.loads(text)
            return entry

        return assemble(library_version, summaries, stats, root_incident,
                        ReportItems(incident_items, sum(s.incidents for s in summaries)),
                        ReportItems(diagnosis_items, sum(s.diagnoses for s in summaries)))

    def close(self) -> None:
        self._file.close()
