"""How issue trackers, terminals and notebooks hand a vLLM failure over: quoted with `> `,
collapsed onto one line, a Jupyter traceback, a message wrapped at a word without any prefix,
a `**bold**` line, an `@user` glued to the first line, markdown bullets, frames elided with
`...`, Windows paths, ANSI colour, journald and Docker prefixes, a worker's prefix on every row,
rows cut hard by an 80-column terminal. Each form, written here the way those tools produce it,
names the failure's own cause (never healthy, never "no vLLM output")."""

# The forms keep the row lengths those tools produce (a wrap near 100 columns, IPython's long
# frame lines), so some rows here are longer than the code's limit.
# ruff: noqa: E501
from __future__ import annotations

import io
from typing import Any

import pytest

from logwatch.core.signatures.library import Library
from logwatch.scan.offline import ScanInput, scan_inputs

HEAD = "(EngineCore_DP0 pid=88) ERROR 12-01 02:10:20 [core.py:708] "
TENSOR = ("RuntimeError: The size of tensor a (256) must match the size of tensor b (512) at "
          "non-singleton dimension 0")
MIN_THREAD_N = ("ValueError: Weight output_size_per_partition = 40 is not divisible by  "
                "min_thread_n = 64. Consider reducing tensor_parallel_size or running with "
                "--quantization gptq.")
FRAMES = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/site-packages/vllm/model_executor/model_loader/weight_utils.py",'
    " line 612, in default_weight_loader",
    "    param.data.copy_(loaded_weight)",
]
LOGGED = [HEAD + "EngineCore failed to start.", *(HEAD + ln for ln in FRAMES), HEAD + TENSOR]

FORMS = {
    # GitHub's quote button on a logged traceback
    "quoted": ("".join(f"> {ln}\n" for ln in LOGGED), "weights.tensor_size_mismatch"),
    # a chat or a form field that lost the newlines
    "collapsed": (" ".join(LOGGED) + "\n", "weights.tensor_size_mismatch"),
    # IPython's traceback: the exception class first, `---->` arrows, `File path:line, in f`
    "jupyter": ("""\
---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
Cell In[3], line 1
----> 1 llm = LLM(model="/models/qwen-awq")

File /usr/lib/python3/site-packages/vllm/model_executor/model_loader/weight_utils.py:612, in default_weight_loader(param, loaded_weight)
    610 try:
--> 612     param.data.copy_(loaded_weight)

""" + TENSOR + "\n", "weights.tensor_size_mismatch"),
    # an issue body wrapped at a word near 100 columns, no prefix on any row
    "wrapped": ("""\
ValueError: To serve at least one request with the models's max seq len (32768), (4.0 GiB KV cache is
needed, which is larger than the available KV cache memory (2.5 GiB). Based on the available memory,
the estimated maximum model length is 20480. Try increasing `gpu_memory_utilization` or decreasing
`max_model_len` when initializing the engine.
""", "memory.kv_cache_too_small"),
    # the reporter's emphasis
    "bold": (f"**{MIN_THREAD_N}**\n", "marlin.min_thread_n"),
    # a mention glued to the first line of the paste
    "at-user": (f"@vllm-maintainer {HEAD}{MIN_THREAD_N}\n", "marlin.min_thread_n"),
    # a markdown list, one log line per bullet
    "bullets": ("".join(f"- {ln}\n" for ln in LOGGED), "weights.tensor_size_mismatch"),
    "star-bullets": ("".join(f"* {ln}\n" for ln in LOGGED), "weights.tensor_size_mismatch"),
    # the reporter cut the middle of the traceback out
    "elided-frames": ("".join(f"{ln}\n" for ln in [
        LOGGED[0], LOGGED[1], HEAD + "  ...", HEAD + "[... 14 frames omitted ...]",
        *LOGGED[2:]]), "weights.tensor_size_mismatch"),
    # a run on Windows (WSL paths pasted from a Windows editor)
    "windows-paths": ("".join(f"{ln}\n" for ln in [
        "Traceback (most recent call last):",
        '  File "C:\\Users\\op\\venv\\Lib\\site-packages\\vllm\\model_executor\\'
        'model_loader\\weight_utils.py", line 612, in default_weight_loader',
        "    param.data.copy_(loaded_weight)", TENSOR]), "weights.tensor_size_mismatch"),
    # colours copied from a terminal
    "ansi": ("".join(f"\x1b[31m{ln}\x1b[0m\n" for ln in LOGGED),
             "weights.tensor_size_mismatch"),
    # `journalctl -u vllm` pasted
    "journald": ("".join(f"Dec 01 02:10:20 gpu-07 vllm[2391]: {ln}\n" for ln in LOGGED),
                 "weights.tensor_size_mismatch"),
    # `docker logs -t` pasted
    "docker": ("".join(f"2026-12-01T02:10:20.123456789Z {ln}\n" for ln in LOGGED),
               "weights.tensor_size_mismatch"),
    # a worker's lines: its prefix on every row, frames included
    "worker-prefixed": ("".join(
        "(Worker_TP1 pid=2402) ERROR 12-01 02:10:20 [multiproc_executor.py:953] " + ln + "\n"
        for ln in ["WorkerProc failed to start.", *FRAMES, TENSOR]),
        "weights.tensor_size_mismatch"),
    # a terminal 80 columns wide copied as it shows: each long row cut hard mid-word
    "terminal-wrapped": ("".join(
        "".join(ln[i:i + 80] + "\n" for i in range(0, len(ln), 80)) for ln in LOGGED),
        "weights.tensor_size_mismatch"),
}


def scan_text(library: Library, text: str) -> dict[str, Any]:
    return scan_inputs([ScanInput("<stdin>", None, stream=True)], library,
                       stdin=io.BytesIO(text.encode()))


@pytest.mark.parametrize("form", FORMS)
def test_each_paste_form_names_its_cause(library: Library, form: str) -> None:
    text, cause = FORMS[form]
    report = scan_text(library, text)
    assert report["verdict"] == "failed", (form, report["verdict_reason"])
    assert report["incidents"][report["root_cause"]]["signature"] == cause


def test_a_word_wrapped_healthy_paragraph_is_left_alone(library: Library) -> None:
    """The word-wrap join is for an exception's message: prose in a paste that merely wraps
    (no raised error before it) is not joined, and a healthy server's lines stay healthy."""
    text = ("(APIServer pid=1) INFO 12-01 02:10:20 [launcher.py:44] Route: /v1/completions\n"
            "INFO:     Application startup complete.\n"
            "We restarted the server this morning after the upgrade and everything came up\n"
            "fine, the error below is from yesterday's run which we already fixed ourselves\n")
    report = scan_text(library, text)
    assert (report["verdict"], report["root_cause"]) == ("healthy", None)
