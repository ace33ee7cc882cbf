"""What real logs go through on their way to an operator, as pure text transformations.

Each mutation turns a small log (signature example plus context lines) into the form it takes
after a terminal, a container runtime, journald, CI or a markdown bug report has had it. A
mutation that cannot apply to an example raises NotApplicable with the reason. These functions
know nothing of logwatch's parser: they write what the outside world writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass


class NotApplicable(Exception):
    """The mutation has nothing to act on in this example; the message says why."""


# vLLM's header in every era: optional process prefixes, LEVEL MM-DD HH:MM:SS, the logger tag
# ("[file.py:N]" or V0's "file.py:N]"), one space; or a process prefix alone.
HEADER = re.compile(
    r"^(?P<prefix>(?:\([A-Za-z_][\w.-]{0,80}(?: [^()\n]{1,60})?\) ?)*)"
    r"(?:(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<time>\d\d-\d\d \d\d:\d\d:\d\d)"
    r"(?P<tag> \[?[^\]\s]{1,200}:\d+\])? ?)?"
)
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)"
                            r"(?::|$)")

# Healthy lines around the example: long enough that a terminal wraps them at 80 and 120
# columns (so a wrapped paste looks wrapped), and matching no signature.
CONTEXT_BEFORE = (
    "(EngineCore_DP0 pid=88) INFO 12-01 02:10:12 [parallel_state.py:1208] rank 0 in world "
    "size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, EP rank 0",
    "(EngineCore_DP0 pid=88) INFO 12-01 02:10:13 [gpu_model_runner.py:2338] Starting to load "
    "model /models/Qwen3-30B-A3B-Instruct-2507-FP8 with a context of 32768 tokens ...",
    "(EngineCore_DP0 pid=88) INFO 12-01 02:10:14 [cuda.py:403] Using Flash Attention backend "
    "on V1 engine for this model, with block size 16 and head size 128 for every layer.",
)
CONTEXT_AFTER = (
    "(APIServer pid=31) INFO 12-01 02:10:20 [launcher.py:44] Route: /v1/chat/completions, "
    "Methods: POST; Route: /v1/completions, Methods: POST; Route: /v1/embeddings, Methods: POST",
    "(APIServer pid=31) INFO 12-01 02:10:21 [launcher.py:46] Route: /tokenize, Methods: POST; "
    "Route: /detokenize, Methods: POST; Route: /v1/models, Methods: GET; Route: /version, GET",
)


def in_context(example: str) -> list[str]:
    """The example between healthy lines, as physical lines."""
    return [*CONTEXT_BEFORE, *example.splitlines(), *CONTEXT_AFTER]


def _example_lines(lines: list[str]) -> list[str]:
    return lines[len(CONTEXT_BEFORE):len(lines) - len(CONTEXT_AFTER)]


def _join(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def header_of(line: str) -> str:
    """vLLM's header at the start of the line (process prefix, level, time, logger tag)."""
    m = HEADER.match(line)
    assert m is not None  # every part is optional: it always matches
    return m.group(0)


def bare_message(line: str) -> str:
    """The line without vLLM's header."""
    return line[len(header_of(line)):]


# -- headers ------------------------------------------------------------------------------
def strip_headers(lines: list[str]) -> str:
    if not any(header_of(ln) for ln in _example_lines(lines)):
        raise NotApplicable("the example carries no vLLM header to strip")
    return _join([bare_message(ln) for ln in lines])


# -- markdown -----------------------------------------------------------------------------
_UNDERSCORE_BOLD = re.compile(r"(?<![\w_])__(?=\w)(?P<inner>[^_\n]+?)(?<=\w)__(?![\w_])")


def unmark(text: str) -> str:
    """What markdown rendering leaves of text pasted outside a code block: code spans and
    bold lose their marks (`__init__.py` shows as a bold `init.py`)."""
    return _UNDERSCORE_BOLD.sub(r"\g<inner>", text.replace("**", "").replace("`", ""))


def markdown_rendered(lines: list[str]) -> str:
    if all(unmark(ln) == ln for ln in _example_lines(lines)):
        raise NotApplicable("the example holds no backtick, ** or __bold__ that rendering "
                            "would eat")
    return _join([unmark(ln) for ln in lines])


def _line_prefix(prefix: str) -> Callable[[list[str]], str]:
    def mutate(lines: list[str]) -> str:
        return _join([prefix + ln for ln in lines])
    return mutate


def code_fence(lines: list[str]) -> str:
    return _join(["```text", *lines, "```"])


# -- terminal -----------------------------------------------------------------------------
def _hard_wrap(width: int, excerpt: bool = False) -> Callable[[list[str]], str]:
    """Every line cut into rows of `width` characters, as a terminal shows it; `excerpt`:
    only the example, as a bug report quotes the error and nothing around it."""
    def mutate(lines: list[str]) -> str:
        if not any(len(ln) > width for ln in _example_lines(lines)):
            raise NotApplicable(f"every line of the example fits in {width} columns")
        return _join([line[i:i + width] for line in (_example_lines(lines) if excerpt else lines)
                      for i in range(0, max(len(line), 1), width)])
    return mutate


def crlf(lines: list[str]) -> str:
    return "\r\n".join(lines) + "\r\n"


_LEVEL_COLOURS = {"DEBUG": "37", "INFO": "32", "WARNING": "33", "ERROR": "31", "CRITICAL": "35"}


def _colour_header(line: str) -> str:
    """vLLM's colour formatter: level by severity, grey time and logger tag (0.12+), cyan
    process prefix (0.31+). Lines without a header stay as they are."""
    m = HEADER.match(line)
    assert m is not None
    if not m.group("level"):
        return line
    out = ""
    if m.group("prefix"):
        out += f"\x1b[0;36m{m.group('prefix').rstrip()}\x1b[0;0m "
    out += (f"\x1b[{_LEVEL_COLOURS[m.group('level')]}m{m.group('level')}\x1b[0m "
            f"\x1b[90m{m.group('time')}\x1b[0m")
    if m.group("tag"):
        out += f" \x1b[90m{m.group('tag').strip()}\x1b[0m"
    return out + " " + line[m.end():]


def ansi_vllm(lines: list[str]) -> str:
    """vLLM's own colours: the process prefix, level and logger tag coloured, then reset."""
    return _join([_colour_header(ln) for ln in lines])


def ansi_256(lines: list[str]) -> str:
    """A pager or log viewer painting whole lines in a 256-colour tone, short reset, erase."""
    return _join([f"\x1b[38;5;196m{ln}\x1b[m\x1b[K" for ln in lines])


def _copied_colours(esc: str) -> Callable[[list[str]], str]:
    """vLLM's colours after a copy that showed ESC as caret text (`^[`) or dropped it."""
    def mutate(lines: list[str]) -> str:
        return _join([_colour_header(ln).replace("\x1b", esc) for ln in lines])
    return mutate


def ray_repeated(lines: list[str]) -> str:
    """Ray's log deduplication: the process as Ray names it, and a repeat count at the end."""
    out = []
    for line in lines:
        m = HEADER.match(line)
        assert m is not None
        rest = line[len(m.group("prefix")):]
        out.append(f"(RayWorkerWrapper pid=5085, ip=10.20.0.4) {rest} "
                   "[repeated 3x across cluster]")
    return _join(out)


# -- embedding and tracebacks -------------------------------------------------------------
V0_HEADER = "(VllmWorkerProcess pid=235) ERROR 08-05 23:29:38 multiproc_worker_utils.py:226] "


def v0_embedded(lines: list[str]) -> str:
    """V0's worker loop logs `Exception in worker ... while processing method M: <message>,
    Traceback ...` on one line, then the traceback under the same header."""
    example = _example_lines(lines)
    if len(example) != 1:
        raise NotApplicable("the V0 embedding carries one line's message; a multi-line "
                            "example is a traceback, which the embedding prints after it")
    message = bare_message(example[0])
    embedded = [
        f"{V0_HEADER}Exception in worker VllmWorkerProcess while processing method "
        f"load_model: {message}, Traceback (most recent call last):",
        f'{V0_HEADER}  File "/usr/local/lib/python3.10/dist-packages/vllm/executor/'
        f'multiproc_worker_utils.py", line 223, in _run_worker_loop',
        f"{V0_HEADER}    output = executor(*args, **kwargs)",
    ]
    return _join([*CONTEXT_BEFORE, *embedded, *CONTEXT_AFTER])


_FRAME = re.compile(r'^  File "[^"]+", line \d+, in ')
_CODE = re.compile(r"^    (?P<code>\S.*)$")


def _py313_frames(header: str) -> list[str]:
    return [
        f"{header}Traceback (most recent call last):",
        f'{header}  File "/usr/lib/python3.13/site-packages/vllm/v1/engine/core.py", '
        f"line 699, in run_engine_core",
        f"{header}    engine_core = EngineCoreProc(*args, **kwargs)",
        f"{header}                  ~~~~~~~~~~~~~~^^^^^^^^^^^^^^^^^",
        f'{header}  File "/usr/lib/python3.13/site-packages/vllm/model_executor/model_loader/'
        f'base_loader.py", line 49, in load_model',
        f"{header}    self.load_weights(",
        f"{header}    ~~~~~~~~~~~~~~~~~^",
        f"{header}    ...<3 lines>...",
        f"{header}    )",
        f"{header}    ^",
    ]


def python313(lines: list[str]) -> str:
    """Python 3.13's traceback: `~~~^^^` markers under code and `...<N lines>...` elision."""
    example = _example_lines(lines)
    if len(example) == 1:
        header, message = header_of(example[0]), bare_message(example[0])
        if not EXCEPTION_LINE.match(message):
            raise NotApplicable("a one-line example that is not an exception line cannot "
                                "end a traceback")
        mutated = [*_py313_frames(header), example[0]]
    else:
        if not any(_FRAME.match(bare_message(ln)) for ln in example):
            raise NotApplicable("the multi-line example holds no traceback frame")
        mutated = []
        for line in example:
            mutated.append(line)
            code = _CODE.match(bare_message(line))
            if code and not code.group("code").startswith(("~", "^", "...<")):
                header = header_of(line)
                mutated.append(f"{header}    {'~' * 6}{'^' * max(len(code['code']) - 6, 1)}")
                mutated.append(f"{header}    ...<3 lines>...")
    return _join([*CONTEXT_BEFORE, *mutated, *CONTEXT_AFTER])


# -- outer wrappers -----------------------------------------------------------------------
def _docker_json(tty: bool) -> Callable[[list[str]], str]:
    """docker's json-file driver, as `/var/lib/docker/containers/*/*-json.log` holds it;
    `tty`: run with -t, so vLLM coloured its headers."""
    def mutate(lines: list[str]) -> str:
        return _join([json.dumps({"log": (_colour_header(ln) if tty else ln) + "\n",
                                  "stream": "stdout" if tty else "stderr",
                                  "time": f"2026-05-12T08:01:{i % 60:02d}.331095044Z"})
                      for i, ln in enumerate(lines)])
    return mutate


def _numbered(template: str) -> Callable[[list[str]], str]:
    def mutate(lines: list[str]) -> str:
        return _join([template.format(s=i % 60) + ln for i, ln in enumerate(lines)])
    return mutate


def unchanged(value: str) -> str:
    return value


@dataclass(frozen=True)
class Mutation:
    name: str
    apply: Callable[[list[str]], str]  # the example between context lines -> the mutated log
    capture: Callable[[str], str] = unchanged  # what the mutation does to a captured value
    live: bool = True  # a followed file can arrive this way (the daemon must see it too)


MUTATIONS = (
    Mutation("as-is", _join),
    Mutation("header-stripped", strip_headers),
    Mutation("markdown-rendered", markdown_rendered, unmark),
    Mutation("markdown-dash-bullets", _line_prefix("- ")),
    Mutation("markdown-star-bullets", _line_prefix("* ")),
    Mutation("markdown-quote", _line_prefix("> ")),
    Mutation("markdown-code-fence", code_fence),
    # a terminal's copy-paste: the scan detects the width; a followed file is never wrapped
    Mutation("wrapped-80", _hard_wrap(80), live=False),
    Mutation("wrapped-120", _hard_wrap(120), live=False),
    Mutation("wrapped-80-excerpt", _hard_wrap(80, excerpt=True), live=False),
    Mutation("wrapped-120-excerpt", _hard_wrap(120, excerpt=True), live=False),
    Mutation("v0-embedded", v0_embedded),
    Mutation("python313-traceback", python313),
    Mutation("docker-cri", _numbered("2026-05-12T08:01:{s:02d}.331095044Z stdout F ")),
    Mutation("docker-json", _docker_json(tty=False)),
    Mutation("docker-json-tty", _docker_json(tty=True)),
    Mutation("docker-compose", _line_prefix("vllm-1  | ")),
    Mutation("kubectl-prefix", _line_prefix("[pod/vllm-7f9c6d5b8-x2x4k/vllm] ")),
    Mutation("journald", _numbered("Dec 01 02:10:{s:02d} gpu-node-3 vllm[2231]: ")),
    Mutation("github-actions", _numbered("2026-05-12T08:01:{s:02d}.3310950Z ")),
    Mutation("github-actions-error", _numbered("2026-05-12T08:01:{s:02d}.3310950Z ##[error]")),
    Mutation("journald-localised", _numbered("Dez 01 02:10:{s:02d} gpu-node-3 python3[2231]: ")),
    Mutation("torch-rank", _line_prefix("[rank1]: ")),
    Mutation("ray-repeated", ray_repeated),
    Mutation("crlf", crlf),
    Mutation("ansi-vllm-colours", ansi_vllm),
    Mutation("ansi-256-colours", ansi_256),
    Mutation("ansi-caret-notation", _copied_colours("^[")),
    Mutation("ansi-remnants", _copied_colours("")),
)
