"""`logwatch scan` at its edges: pipes given as paths, a file truncated while it is read."""

from __future__ import annotations

import gzip
import json
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from logwatch.core.report.text import render_text
from logwatch.core.signatures.library import Library
from logwatch.scan.offline import resolve_inputs, scan_inputs
from tests.conftest import ROOT, SAMPLES
from tests.inprocess import logwatch

DEMO = SAMPLES / "demo_marlin_and_mtp.log"
ENV = {**os.environ, "NO_COLOR": "1"}
LOGWATCH = [sys.executable, "-m", "logwatch"]


def signatures(report: dict[str, object]) -> list[str]:
    return [i["signature"] for i in report["incidents"]]  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def demo_report(library: Library) -> dict[str, object]:
    return scan_inputs(resolve_inputs([str(DEMO)]), library)


class FifoWriter:
    """Writes to a named pipe once a reader opens it; `release` unblocks a writer still
    waiting because the reader never came."""

    def __init__(self, fifo: Path, data: bytes, then: object = None) -> None:
        self.fifo, self.data, self.then = fifo, data, then
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._write, daemon=True)
        self.thread.start()

    def _write(self) -> None:
        try:
            with open(self.fifo, "wb") as pipe:  # blocks until the reader opens the pipe
                pipe.write(self.data)
                if callable(self.then):
                    self.then()
        except BaseException as exc:  # reported by release()
            self.error = exc

    def release(self) -> None:
        if self.thread.is_alive():  # the reader never opened it: open it ourselves
            fd = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)
            self.thread.join(timeout=30)
            os.close(fd)
        if self.error is not None:
            raise self.error


@pytest.fixture()
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "vllm.fifo"
    os.mkfifo(path)
    yield path


# --- pipes given as paths ------------------------------------------------------------------

def test_a_named_fifo_is_read_as_a_stream(fifo: Path, demo_report: dict[str, object]) -> None:
    writer = FifoWriter(fifo, DEMO.read_bytes())
    try:
        result = logwatch("scan", "--json", str(fifo), env={"NO_COLOR": "1"})
    finally:
        writer.release()
    assert result.returncode == 1, result.stderr.decode()
    report = json.loads(result.stdout)
    assert signatures(report) == signatures(demo_report)
    assert report["stats"]["lines"] == DEMO.read_bytes().count(b"\n")
    assert report["incidents"][0]["first_seen"]["source"] == str(fifo)


def test_a_fifo_reports_progress_in_bytes_read_without_a_total(
        fifo: Path, library: Library) -> None:
    """A pipe has no size: the progress bar shows how much was read, never a percentage."""
    calls: list[tuple[int, int]] = []
    writer = FifoWriter(fifo, DEMO.read_bytes())
    try:
        report = scan_inputs(resolve_inputs([str(fifo)]), library,
                             on_progress=lambda done, total: calls.append((done, total)))
    finally:
        writer.release()
    assert report["stats"]["lines"] == DEMO.read_bytes().count(b"\n")
    assert calls and calls[-1] == (len(DEMO.read_bytes()), 0)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shell", "what"),
    [
        ("logwatch scan --json <(cat {log})", "process substitution"),
        ("cat {log} | logwatch scan --json /dev/stdin", "/dev/stdin on a pipe"),
        ("logwatch scan --json <(gzip -c {log})", "a gzip through a pipe"),
        ("gzip -c {log} | logwatch scan --json -", "a gzip on stdin"),
    ],
)
def test_pipes_given_as_paths(shell: str, what: str, demo_report: dict[str, object]) -> None:
    logwatch = " ".join(shlex.quote(a) for a in LOGWATCH)
    # the command's own name replaced before the path goes in (a checkout may be `.../logwatch`)
    command = shell.replace("logwatch", "{logwatch}", 1).format(
        log=shlex.quote(str(DEMO)), logwatch=logwatch)
    result = subprocess.run(["bash", "-c", command], capture_output=True, cwd=ROOT, env=ENV,
                            timeout=120, check=False)
    assert result.returncode == 1, f"{what}: {result.stderr.decode()}"
    assert signatures(json.loads(result.stdout)) == signatures(demo_report), what


# --- a file truncated while it is scanned --------------------------------------------------

def big_log(path: Path, size: int) -> bytes:
    """A healthy access log of `size` bytes or a little more, with the demo failure first."""
    line = b'INFO:     10.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    data = DEMO.read_bytes() + line * (size // len(line) + 1)
    path.write_bytes(data)
    return data


def test_a_file_truncated_under_the_reader_is_reported(tmp_path: Path,
                                                      library: Library) -> None:
    """The file shrinks after the first block is read (8 MiB): the scan ends early, and
    the report says how many bytes were expected and how many were read."""
    log = tmp_path / "vllm.log"
    expected = len(big_log(log, 20 << 20))
    keep = 12 << 20
    truncated: list[int] = []

    def truncate_once(done: int, total: int) -> None:
        if not truncated:
            os.truncate(log, keep)  # as `logrotate copytruncate` would, mid-scan
            truncated.append(done)

    report = scan_inputs(resolve_inputs([str(log)]), library, on_progress=truncate_once)
    assert truncated and truncated[0] < keep  # it really happened during the scan
    assert report["incomplete"] == [{"source": str(log), "expected_bytes": expected,
                                     "read_bytes": keep}]
    assert "marlin.repack_tile_n" in signatures(report)  # what was read is still reported
    # wide enough that the path is never cut, wherever the test's directory is
    text = " ".join(render_text(report, width=4000).split())
    assert f"{log}: the file shrank while it was scanned" in text
    assert f"expected {expected:,} bytes, read {keep:,}" in text


def test_a_complete_scan_reports_nothing_incomplete(demo_report: dict[str, object]) -> None:
    assert demo_report["incomplete"] == []
    assert "shrank" not in render_text(demo_report)


@pytest.mark.parametrize("as_json", [False, True])
def test_truncation_by_another_process_warns_on_stderr(tmp_path: Path, fifo: Path,
                                                       as_json: bool) -> None:
    """`logwatch scan FIFO FILE`: sizes are taken when the scan starts; another process
    truncates FILE while logwatch still reads the FIFO, then closes it."""
    log = tmp_path / "vllm.log"
    expected = len(big_log(log, 1 << 20))
    keep = 4096
    writer = FifoWriter(fifo, b"INFO 11-29 10:00:00 [api_server.py:1] starting\n",
                        then=lambda: os.truncate(log, keep))
    try:
        result = logwatch("scan", *(["--json"] if as_json else []), str(fifo), str(log),
                          env={"NO_COLOR": "1", "COLUMNS": "4000"})  # the path never cut
    finally:
        writer.release()
    err = result.stderr.decode()
    assert result.returncode in (0, 1), err
    assert (f"logwatch: warning: {log}: the file shrank while it was scanned "
            f"(expected {expected:,} bytes, read {keep:,})") in err
    if as_json:
        assert json.loads(result.stdout)["incomplete"] == [
            {"source": str(log), "expected_bytes": expected, "read_bytes": keep}]
    else:
        assert (f"{log}: the file shrank while it was scanned"
                in " ".join(result.stdout.decode().split()))  # wrapped at 80 columns


@pytest.mark.slow
def test_a_gzip_truncated_under_the_reader_is_incomplete_not_an_error(
        tmp_path: Path, library: Library) -> None:
    log = tmp_path / "vllm.log.gz"
    noise = os.urandom(12 << 20).hex().encode()  # compresses about 2:1, like a real log
    lines = b"\n".join(noise[i:i + 100] for i in range(0, len(noise), 100))
    log.write_bytes(gzip.compress(DEMO.read_bytes() + lines + b"\n", compresslevel=1))
    expected = log.stat().st_size
    keep = expected // 2

    def truncate_once(done: int, total: int) -> None:
        if log.stat().st_size > keep:
            os.truncate(log, keep)

    report = scan_inputs(resolve_inputs([str(log)]), library, on_progress=truncate_once)
    [gap] = report["incomplete"]
    assert gap["source"] == str(log) and gap["expected_bytes"] == expected
    assert gap["read_bytes"] == keep
    assert "marlin.repack_tile_n" in signatures(report)
