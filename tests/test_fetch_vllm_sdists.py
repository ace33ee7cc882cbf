"""tools/fetch_vllm_sdists.py against a real HTTP server on loopback: an sdist whose sha256
matches is kept, one that does not is discarded, a cached one is not fetched again, and an
unreachable index is said and skipped (exit 0: the tests that need the sources skip)."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools import fetch_vllm_sdists as fetcher

GOOD, BAD = b"the 0.26.0 sources", b"not what the index promised"


@pytest.fixture
def pypi(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    served: list[str] = []

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.append(self.path)
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            files = [{"filename": "vllm-0.26.0.tar.gz", "url": f"{base}/good",
                      "hashes": {"sha256": hashlib.sha256(GOOD).hexdigest()}},
                     {"filename": "vllm-0.25.1.tar.gz", "url": f"{base}/bad",
                      "hashes": {"sha256": hashlib.sha256(GOOD).hexdigest()}}]
            body = {"/simple/vllm/": json.dumps({"files": files}).encode(),
                    "/good": GOOD, "/bad": BAD}.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(fetcher, "INDEX", f"http://127.0.0.1:{server.server_address[1]}"
                                          "/simple/vllm/")
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


def test_checked_sdists_are_kept_and_others_discarded(
        pypi: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fetcher.main(["--dest", str(tmp_path), "0.26.0", "0.25.1", "0.99.0"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "vllm-0.26.0.tar.gz").read_bytes() == GOOD
    assert not (tmp_path / "vllm-0.25.1.tar.gz").exists()
    assert not list(tmp_path.glob("*.partial"))
    assert "vLLM 0.25.1: sha256 mismatch: discarded" in out
    assert "vLLM 0.99.0: no sdist on PyPI" in out
    fetched = pypi.count("/good")
    assert fetcher.main(["--dest", str(tmp_path), "0.26.0"]) == 0
    assert "vLLM 0.26.0: cached" in capsys.readouterr().out
    assert pypi.count("/good") == fetched


def test_an_unreachable_index_is_said_and_skipped(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(fetcher, "INDEX", "http://127.0.0.1:9/simple/vllm/")  # discard port
    assert fetcher.main(["--dest", str(tmp_path), "0.26.0"]) == 0
    assert "PyPI not reachable" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
