"""What the real-vLLM tier's steps share: where things are, a step's outcome, HTTP asks."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.real_vllm.cases import Case

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "0.32.0"  # the release install.sh installs
LOGWATCH = ROOT / ".venv" / "bin" / "logwatch"


@dataclass
class Outcome:
    name: str
    said: str  # what logwatch recorded: outcome, root cause, signature
    expected: str
    matched: bool
    seconds: float
    exit_code: int | None
    note: str = ""


def expected_of(case: Case) -> str:
    return (f"{case.outcome}; run exit 0" if case.outcome != "failed"
            else "failed: " + " or ".join(case.causes) + "; run exit non-zero")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ask(url: str, body: dict[str, object] | None = None, timeout: float = 5) -> int:
    """The HTTP status of a GET (or a POST of `body`); 0 when nothing answers."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data,
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except OSError:
        return 0


def history_rows(db: Path, query: str) -> list[tuple[Any, ...]]:
    """A query's rows from a history the run or the daemon wrote (read once it ended)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def wait_healthy(port: int, alive: Callable[[], bool], seconds: float) -> bool:
    """Whether vLLM on `port` answered /health within `seconds`, while `alive` holds."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and alive():
        if ask(f"http://127.0.0.1:{port}/health", timeout=1) == 200:
            return True
        time.sleep(0.5)
    return False
