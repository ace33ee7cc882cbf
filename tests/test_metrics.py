"""Prometheus metrics from a running daemon, scraped over real HTTP on loopback."""

from __future__ import annotations

import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from logwatch.core.signatures.library import Library
from logwatch.daemon.metrics import parse_listen, render
from tests.conftest import LIBRARY_VERSION, ROOT, SAMPLES, free_port


def test_only_loopback_is_served() -> None:
    assert parse_listen("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_listen("[::1]:9464") == ("::1", 9464)
    for bad in ("0.0.0.0:9464", "10.0.0.1:80", "localhost:9464", "127.0.0.1", "127.0.0.1:0"):
        with pytest.raises(ValueError):
            parse_listen(bad)


def test_render_escapes_labels() -> None:
    text = render([("logwatch_lines_read_total", {"source": 'file:/a "b"\\c'}, 3)])
    assert '# TYPE logwatch_lines_read_total counter' in text
    assert 'logwatch_lines_read_total{source="file:/a \\"b\\"\\\\c"} 3' in text


@pytest.mark.slow
def test_a_running_daemon_serves_its_numbers(tmp_path: Path, library: Library) -> None:
    log, port = tmp_path / "vllm.log", free_port()
    log.write_bytes((SAMPLES / "demo_marlin_and_mtp.log").read_bytes())
    proc = subprocess.Popen([sys.executable, "-m", "logwatch", "daemon", "--file", str(log),
                             "--db", str(tmp_path / "h.duckdb"), "--no-socket", "--metrics",
                             f"127.0.0.1:{port}"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline, text = time.monotonic() + 30, ""
        while "logwatch_findings_total" not in text or "checkpoint_age" not in text:
            assert time.monotonic() < deadline and proc.poll() is None, text
            time.sleep(0.2)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    text = r.read().decode()
            except OSError:
                continue
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=5)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    source = f"file:{log}"
    assert f'logwatch_lines_read_total{{source="{source}"}} 118' in text
    assert f'logwatch_lag_bytes{{source="{source}"}} 0' in text
    tile_n = tomllib.loads((ROOT / "signatures" / "marlin" / "repack_tile_n.toml").read_text())
    assert (f'logwatch_findings_total{{signature="marlin.repack_tile_n",'
            f'version="{tile_n["version"]}"}} 4') in text
    assert 'logwatch_incidents{fatal="true"}' in text
    assert f'logwatch_library_info{{version="{LIBRARY_VERSION}"}} 1' in text


def test_every_metric_is_in_the_reference() -> None:
    from logwatch.daemon.metrics import HELP
    from tests.conftest import ROOT

    reference = (ROOT / "docs" / "daemon.md").read_text(encoding="utf-8")
    assert [name for name in HELP if f"| `{name}` |" not in reference] == []
