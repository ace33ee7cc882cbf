"""`logwatch scan`: read files, .gz files, pipes or stdin, and produce the triage report."""

from __future__ import annotations

import gzip
import os
import stat
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from logwatch.core.launches.lifecycle import LaunchBook
from logwatch.core.lines.pasted import soft_wrapped, wrap_width
from logwatch.core.lines.vllm_format import parse_line
from logwatch.core.report.triage import report_dict
from logwatch.core.signatures.block_scan import BlockScanner, ScanStats
from logwatch.core.signatures.fallback import is_generic, vllm_output_seen
from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from logwatch.core.signatures.templates import TemplateGroups
from logwatch.scan.blocks import keep_freed_blocks, read_blocks
from logwatch.scan.parallel import scan_split, two_cores_idle
from logwatch.scan.progress import Progress
from logwatch.scan.report_spool import ReportSpool
from logwatch.scan.triage import SnapshotOptions, SnapshotResolver, triage

if TYPE_CHECKING:
    from logwatch.core.diagnosis.analysis import LaunchAnalysis
    from logwatch.store.record import ScanRecorder

WRAP_SAMPLE_BYTES = 1 << 20


class InputError(Exception):
    """A scan input that cannot be read; the message names it."""


GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class ScanInput:
    label: str
    path: Path | None  # None: stdin
    stream: bool = False  # a pipe, FIFO or terminal: read once, front to back; no size, no seek

    @property
    def is_gzip(self) -> bool:
        """Named like a gzip file (any input starting with the gzip magic is one as well)."""
        return self.path is not None and self.path.suffix == ".gz"

    @property
    def kind(self) -> str:
        return "stdin" if self.path is None else "pipe" if self.stream else "file"


def resolve_inputs(names: Sequence[str]) -> list[ScanInput]:
    """Check every input before reading any, so a typo fails fast with exit 2."""
    inputs = []
    for name in names:
        if name == "-":
            inputs.append(ScanInput("<stdin>", None, stream=True))
            continue
        path = Path(name)
        if not path.exists():
            raise InputError(f"{name}: no such file")
        if path.is_dir():
            raise InputError(f"{name}: is a directory (give the log files inside it)")
        if not os.access(path, os.R_OK):
            raise InputError(f"{name}: permission denied")
        # /dev/stdin, <(...) (/dev/fd/N) and named pipes: not regular files, read as streams
        inputs.append(ScanInput(name, path, stream=not stat.S_ISREG(path.stat().st_mode)))
    return inputs


def paste_wrapping(sample: bytes) -> tuple[int | None, bool]:
    """How a paste was wrapped, from the sample's rows (decoded and judged once): the width a
    terminal cut them at (core.lines.pasted.wrap_width), and, when it cut none, whether an
    exception's message was wrapped at a word (core.lines.pasted.soft_wrapped)."""
    rows = sample.decode("utf-8", errors="replace").split("\n")[:-1]
    reference = datetime.now()

    def headerless(row: str) -> bool:  # a row with no header of its own
        return parse_line("sample", 1, row, reference).kind == "raw"

    width = wrap_width(rows, headerless)
    return width, width is None and soft_wrapped(rows, headerless)


class _Peekable:
    """A binary stream whose first bytes can be inspected without consuming them."""

    def __init__(self, stream: BinaryIO, size: int) -> None:
        self._stream = stream
        self._head = stream.read(size)

    @property
    def head(self) -> bytes:
        return self._head

    def read(self, n: int = -1) -> bytes:
        if self._head:
            data, self._head = self._head, b""
            if n < 0:
                return data + self._stream.read()
            if len(data) < n:
                data += self._stream.read(n - len(data))
            return data
        return self._stream.read(n)


def scan_inputs(inputs: Sequence[ScanInput], library: Library, engine: str = "auto",
                mode: str = "auto", stdin: IO[bytes] | None = None,
                on_progress: Callable[[int, int], None] | None = None,
                snapshot_options: SnapshotOptions | None = None,
                recorder: ScanRecorder | None = None, jobs: int | None = None,
                matcher: Matcher | None = None, plan: bool = False,
                one_run: bool = False, lazy_report: bool = False) -> dict[str, Any]:
    """Scan every input and return the report (with snapshots and diagnoses) as a dict.

    `one_run`: the inputs are the streams of one run (vLLM's stdout and stderr written to two
    files): their findings make one source's launches, named after the first input, each
    finding keeping its own file and line.
    `jobs`: 2 scans a large regular file with two processes, 1 with one; None (auto) uses
    two when the file is large and two cores are idle. `matcher`: one already built from
    `library` (many small scans of one library). `plan`: add the corrected launch for the
    newest launch's diagnoses (core.remedy.plan), or None when a relaunch fixes none of them.
    `lazy_report`: the report's incidents and diagnoses are made as they are read
    (core.report.triage.ReportItems), for a caller that writes or records them one by one:
    without `plan`, each launch is analysed as it ends and kept on disk
    (scan.report_spool)."""
    matcher = matcher or Matcher(library.signatures, engine=engine,
                                 vocabulary=library.vocabulary)
    book = LaunchBook()
    if one_run:
        book.aliases.update({i.label: inputs[0].label for i in inputs[1:]})
    unrecognised = TemplateGroups()
    keep_freed_blocks()
    options = snapshot_options or SnapshotOptions()
    # a report written (or recorded) as it is read, with no plan: each launch analysed as
    # it ends and kept on disk (scan.report_spool)
    spool = (ReportSpool(SnapshotResolver(book, options))
             if lazy_report and not plan else None)

    def record(findings: list[Any]) -> None:
        for finding in findings:
            if is_generic(finding.signature):
                unrecognised.add(finding)
            change = book.observe(finding)
            if recorder is not None:  # as it counts in its launch (a teardown's: context)
                recorder.finding(change.finding, change.launch.start_line)
            if spool is not None and change.new_launch:
                for ended in book.take_ended(change.launch.source):
                    spool.add(ended)

    totals = ScanStats()
    started = time.perf_counter()
    # what each file holds as the scan starts: reading less than that means it shrank
    sizes = [None if i.path is None or i.stream else i.path.stat().st_size for i in inputs]
    total_bytes = 0 if None in sizes else sum(s or 0 for s in sizes)  # 0: unknown (a pipe)
    done_bytes = 0
    modes: list[str] = []
    faults: list[dict[str, Any]] = []
    incomplete: list[dict[str, Any]] = []
    vllm_seen = False  # any line vLLM wrote, in the head of some input
    for item, size in zip(inputs, sizes, strict=True):
        try:
            with _open(item, stdin) as (raw, position):
                stream = _Peekable(raw, WRAP_SAMPLE_BYTES)
                if recorder is not None:
                    recorder.source(item.label, stream.head, size, item.kind)
                wrap_width, soft = (paste_wrapping(stream.head) if mode != "prefilter"
                                    else (None, False))
                full = mode == "full" or wrap_width is not None or soft
                modes.append("full" if full else "prefilter")
                reference = (datetime.fromtimestamp(item.path.stat().st_mtime)
                             if item.path is not None and not item.stream else datetime.now())
                vllm_seen = vllm_seen or vllm_output_seen(
                    stream.head.decode("utf-8", errors="replace"), reference, item.label)
                scanner = BlockScanner(matcher, item.label, reference, full=full,
                                       wrap_width=wrap_width, soft_wrap=soft,
                                       whole_input=True)
                split = None
                if (not full and item.path is not None and not item.stream and size
                        and stream.head[:2] != GZIP_MAGIC and not item.is_gzip
                        and (jobs == 2 or (jobs is None and two_cores_idle(size)))):
                    split = scan_split(str(item.path), matcher, item.label, reference, size,
                                       record)
                if split is not None:
                    scanner.stats, read = split, size
                else:
                    read = _scan_stream(stream, scanner, record, position, size,
                                        on_progress, (done_bytes, total_bytes))
                if recorder is not None:
                    recorder.scanned(item.label, scanner.stats.bytes)
        except (EOFError, OSError, zlib.error, gzip.BadGzipFile) as exc:
            raise InputError(f"{item.label}: cannot read: {exc}") from exc
        faults.extend({"source": item.label, "line": line, "error": error}
                      for line, error in scanner.take_faults())
        if size is not None and read is not None and read < size:
            incomplete.append({"source": item.label, "expected_bytes": size, "read_bytes": read})
        done_bytes += size if size is not None else scanner.stats.bytes
        for name, value in asdict(scanner.stats).items():
            setattr(totals, name, getattr(totals, name) + value)
    elapsed = time.perf_counter() - started
    order = [i.label for i in inputs]
    result = None
    if spool is not None:  # the launches still open end with the input
        for launch in list(book.launches()):
            spool.add(launch)
        launches, incidents = len(spool), spool.incidents
    else:
        result = triage(book, options, order)
        launches = len(result.analyses)
        incidents = sum(len(a.incidents) for a in result.analyses)
    stats = asdict(totals)
    stats.update(
        files=len(inputs), seconds=round(elapsed, 3),
        mb_per_s=round(totals.bytes / 1e6 / elapsed, 1) if elapsed > 0 else None,
        engine=matcher.scanner.engine,
        speedups=bool(getattr(matcher.scanner, "speedups", False)),
        mode=",".join(sorted(set(modes))),
        incidents=incidents, launches=launches, match_timeouts=dict(matcher.timeouts),
        disabled_signatures=dict(matcher.disabled),
        vllm_output=vllm_seen or totals.findings > 0,
    )
    if result is None:
        assert spool is not None
        report = spool.report(library.version, stats, order)
        snapshot_at, snapshots = spool.snapshot_at, spool.snapshots
    else:
        report = report_dict(library.version, result.analyses, stats, result.digest,
                             lazy=lazy_report)
        snapshot_at, snapshots = result.snapshot_at, result.snapshots
    report["incomplete"] = incomplete
    report["scan_faults"] = faults  # records a fault of the scan's passed over (bugs to report)
    report["unrecognised"] = [g.to_dict() for g in unrecognised.ordered()]
    report["unrecognised_others"] = unrecognised.others
    if recorder is not None:  # each finding links to its launch's snapshot
        recorder.snapshot_at = snapshot_at
    report["snapshots"] = snapshots
    if plan:  # (never spooled: the plan is the newest launch's, analysed in memory)
        assert result is not None
        report["plan"] = _plan(result.analyses[0]) if result.analyses else None
    return report


def _plan(analysis: LaunchAnalysis) -> dict[str, Any] | None:
    """The corrected launch for one launch's diagnoses, with the variants beside its model."""
    from logwatch.core.remedy.plan import render_plan
    from logwatch.relaunch.planned import checked_plan

    snapshot = analysis.snapshot
    found = checked_plan(analysis.diagnoses, snapshot)
    if found is None:
        return None
    return {**found.to_dict(), "text": render_plan(found, snapshot)}


def _scan_stream(stream: _Peekable, scanner: BlockScanner,
                 record: Callable[[list[Any]], None], position: Callable[[], int] | None,
                 size: int | None, on_progress: Callable[[int, int], None] | None,
                 done_of_total: tuple[int, int]) -> int | None:
    """Feed a whole stream to the scanner; the file bytes read (None for a pipe)."""
    done, total = done_of_total
    try:
        for block in read_blocks(stream):  # type: ignore[arg-type]
            record(scanner.feed(block))
            if on_progress is not None:
                on_progress(done + (position() if position else scanner.stats.bytes), total)
    except EOFError:  # a gzip that ends early: shrank under the reader, or broken
        if position is None or size is None or position() >= size:
            raise
    read = position() if position else None
    record(scanner.finish())
    return read


class _open:
    """Context manager yielding (binary stream, function giving the file bytes consumed so
    far, or None for a stream). Gzip is recognised by name or by its first two bytes."""

    def __init__(self, item: ScanInput, stdin: IO[bytes] | None) -> None:
        self.item, self.stdin = item, stdin
        self._raw: BinaryIO | None = None
        self._gz: gzip.GzipFile | None = None

    def __enter__(self) -> tuple[BinaryIO, Callable[[], int] | None]:
        if self.item.path is None:
            raw: BinaryIO = self.stdin or sys.stdin.buffer  # type: ignore[assignment]
        else:
            try:
                self._raw = raw = open(self.item.path, "rb")  # a FIFO: waits for a writer
            except OSError as exc:
                raise InputError(f"{self.item.label}: {exc.strerror or exc}") from exc
        position = None if self.item.stream else raw.tell  # a pipe cannot tell (ESPIPE)
        magic = _Peekable(raw, len(GZIP_MAGIC))
        if self.item.is_gzip or magic.head == GZIP_MAGIC:
            self._gz = gzip.GzipFile(fileobj=magic, mode="rb")  # type: ignore[call-overload]
            return self._gz, position  # type: ignore[return-value]
        return magic, position  # type: ignore[return-value]

    def __exit__(self, *exc: object) -> None:
        if self._gz is not None:
            self._gz.close()
        if self._raw is not None:
            self._raw.close()


def run_scan(inputs: Sequence[ScanInput], library: Library, **kwargs: Any) -> dict[str, Any]:
    """scan_inputs with a progress bar on a terminal for scans that take a while."""
    progress = Progress(sys.stderr, label="scanning")
    try:
        return scan_inputs(inputs, library, on_progress=progress.update, **kwargs)
    finally:
        progress.close()
