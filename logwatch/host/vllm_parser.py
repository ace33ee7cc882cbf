"""A vLLM release's own `vllm serve` parser, run where that release is installed: the probe
(vllm_parse_probe.py) in the release's interpreter, isolated (-I: none of logwatch's paths),
given the command line as JSON arguments (no shell). Importing vLLM takes seconds: only on
request (`preflight --vllm-python`, the real-vLLM tier)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

PROBE = Path(__file__).resolve().parent / "vllm_parse_probe.py"
TIMEOUT_S = 180


@dataclass(frozen=True, slots=True)
class ParserVerdict:
    accepted: bool | None  # None: the probe could not run (said in `error`)
    error: str  # what the parser or the release's validation said ("" when accepted)
    release: str = "?"
    unknown_env: tuple[str, ...] = ()


def release_parser(python: Path, words: Sequence[str], env: Mapping[str, str] | None = None,
                   timeout: float = TIMEOUT_S) -> ParserVerdict:
    """Whether the release behind `python` accepts `vllm serve` with `words` (from `serve`
    on: ["serve", MODEL, "--flag", ...])."""
    try:
        done = subprocess.run([str(python), "-I", str(PROBE), json.dumps(list(words)),
                               json.dumps(dict(env or {}))], capture_output=True, text=True,
                              timeout=timeout, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ParserVerdict(None, f"{python}: cannot run it: {exc}")
    lines = done.stdout.strip().splitlines()
    try:
        said = json.loads(lines[-1]) if lines else None
    except ValueError:
        said = None
    if not isinstance(said, dict):
        return ParserVerdict(None, f"{python}: no answer from vLLM's parser: "
                                   + done.stderr.strip()[-300:])
    if done.returncode != 0:
        return ParserVerdict(None, str(said.get("error") or "the probe failed"))
    return ParserVerdict(bool(said.get("accepted")), str(said.get("error") or ""),
                         str(said.get("release") or "?"),
                         tuple(str(n) for n in said.get("unknown_env") or ()))
