"""The real-vLLM tier's parts that need no vLLM (tools/real_vllm/; the tier itself is `make
real-vllm`, docs/real-vllm.md): its cases expect categories logwatch has, the sample maker
keeps vLLM's lines byte for byte and drops logwatch's own, and the table lands between its
markers in the doc, which holds one row per case."""

from __future__ import annotations

from pathlib import Path

import pytest

from logwatch.core.signatures.signature import CATEGORIES
from tests.conftest import ROOT
from tools.real_vllm import tier
from tools.real_vllm.cases import CASES
from tools.real_vllm.common import Outcome
from tools.real_vllm.sample import clean


def test_every_case_expects_an_outcome_and_categories_logwatch_has() -> None:
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))
    for case in CASES:
        assert case.outcome in ("stopped", "failed"), case.name
        assert (case.outcome == "failed") == bool(case.causes), case.name
        assert set(case.causes) <= set(CATEGORIES), case.name
        assert case.why, case.name


def test_the_sample_maker_keeps_vllms_lines_and_drops_logwatchs() -> None:
    root = "/home/op/logwatch"
    raw = [
        "2026-12-04T19:02:03.572232Z [error    ] fatal_incident   incident=ab\n",
        "(APIServer pid=7) INFO 12-04 19:02:00 [api_utils.py:347] banner\r\n",
        "(APIServer pid=7) INFO 12-04 19:02:00 [launcher.py:195] Route: /health, Methods: GET\n",
        f'(Worker pid=9) ERROR 12-04 19:02:03 [x.py:1]   File "{root}/.real-vllm/venv-0.32.0'
        '/lib/python3.11/site-packages/vllm/a.py", line 1, in f\n',
        f"  File \"{root}/.real-vllm/venv-0.32.0/bin/vllm\", line 8, in <module>\n",
        f"OSError: Repo id must be in the form 'repo_name': '{root}/.real-vllm/models/x'.\n",
        "nanobind: leaked 4 instances!\n",
        " - leaked type \"triton.ir\"\n",
        "logwatch run: started pid 9: vllm serve\n",
        "logwatch run: 233 lines in 1 input(s), signature library 0.3.0\n",
        "  the report, indented, to the end\n",
    ]
    kept = list(clean(raw, root))
    assert kept == [
        "(APIServer pid=7) INFO 12-04 19:02:00 [api_utils.py:347] banner\r\n",
        '(Worker pid=9) ERROR 12-04 19:02:03 [x.py:1]   File "/opt/vllm/lib/python3.11/'
        'site-packages/vllm/a.py", line 1, in f\n',
        '  File "/opt/vllm/bin/vllm", line 8, in <module>\n',
        "OSError: Repo id must be in the form 'repo_name': '/models/x'.\n",
    ]


def test_the_table_replaces_what_is_between_its_markers(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    doc = tmp_path / "real-vllm.md"
    doc.write_text(f"# t\n\nbefore\n{tier.TABLE_BEGIN}\n"
                   "| release | case | what logwatch said | expected | match |\n"
                   "| --- | --- | --- | --- | --- |\n"
                   "| 0.31.0 | relaunch | kept | kept | yes |\n"
                   "| 0.31.0 | healthy | replaced | stopped | yes |\n"
                   f"{tier.TABLE_END}\nafter\n")
    monkeypatch.setattr(tier, "DOC", doc)
    tier.write_table([Outcome("healthy", "stopped", "stopped", True, 20.0, 0),
                      Outcome("x", "failed: a | b", "failed: c", False, 9.0, 1)], "0.32.0")
    text = doc.read_text()
    assert "replaced" not in text and text.startswith("# t\n\nbefore\n")
    assert text.endswith(f"{tier.TABLE_END}\nafter\n")
    rows = [line for line in text.splitlines() if line.startswith("| 0.")]
    assert rows == [  # cases in their order, then the loops; a step not run keeps its row
        "| 0.32.0 | healthy | stopped | stopped | yes |",
        "| 0.31.0 | relaunch | kept | kept | yes |",
        "| 0.32.0 | x | failed: a \\| b | failed: c | **no** |"]


def test_the_doc_holds_a_row_for_every_case_and_loop() -> None:
    text = (ROOT / "docs" / "real-vllm.md").read_text(encoding="utf-8")
    table = text.split(tier.TABLE_BEGIN, 1)[1].split(tier.TABLE_END, 1)[0]
    rows = {line.split("|")[2].strip() for line in table.splitlines()
            if line.startswith("| 0.")}
    assert rows == {c.name for c in CASES} | set(tier.LOOPS)


def test_a_failure_read_from_stderr_alone_says_the_cause_is_on_stdout() -> None:
    """vLLM's logger, the worker's traceback with it, writes to stdout: a launch read from
    stderr alone has only the failure's wrappers, and says where the cause went. Where the
    logger's lines were read (the cause with them, or a worker killed by a signal, which
    prints none), it says nothing of the kind."""
    from logwatch.library.files import load_signature_dirs
    from logwatch.scan.offline import resolve_inputs, scan_inputs

    library = load_signature_dirs()
    causes = {}
    for name in ("real_032_stderr_only.log", "real_032_cpu_startup_failures.log",
                 "real_032_worker_killed_serving.log"):
        report = scan_inputs(resolve_inputs([str(ROOT / "samples" / "logs" / name)]), library)
        causes[name] = {d["cause"] for d in report["diagnoses"]}
    assert "cause_on_stdout" in causes["real_032_stderr_only.log"]
    assert "cause_on_stdout" not in causes["real_032_cpu_startup_failures.log"]
    assert "cause_on_stdout" not in causes["real_032_worker_killed_serving.log"]


def test_every_row_of_the_doc_matches_as_the_readme_says() -> None:
    """The README says every case matches on 0.32.0: the table `make real-vllm` wrote says
    so row by row (a row that does not is a bug to fix, not a table to keep)."""
    text = (ROOT / "docs" / "real-vllm.md").read_text(encoding="utf-8")
    table = text.split(tier.TABLE_BEGIN, 1)[1].split(tier.TABLE_END, 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| 0.")]
    assert rows and all(line.startswith("| 0.32.0") for line in rows)
    assert [line for line in rows if not line.endswith("| yes |")] == []
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "Every case matches on 0.32.0" in readme


def test_every_failure_case_says_whether_preflight_must_predict_it() -> None:
    kinds = {  # the kinds core/checkpoint and core/diagnosis/launch_checks predict
"weight_shape", "shard_missing", "config_unreadable", "model_not_found",
             "max_model_len", "unknown_flag", "invalid_argument", "mtp_unsupported",
             "quant_no_kernel", "dtype_unsupported", "weight_not_quantized",
             "tokenizer_missing", "architecture_unsupported"}
    for case in CASES:
        if case.outcome == "stopped":
            assert case.preflight == "", case.name  # a launch that starts is never refused
        else:
            assert case.preflight in kinds | {""}, case.name
    undecided = [c.name for c in CASES if c.outcome == "failed" and not c.preflight]
    assert undecided == ["bf16-request-crash"]  # the CPU's BF16 kernel: not configuration


def test_the_preflight_table_lands_between_its_markers_in_both_docs(tmp_path: Path) -> None:
    from tools.real_vllm import preflight_tier as pt

    docs = []
    for name in ("real-vllm.md", "README.md"):
        doc = tmp_path / name
        doc.write_text(f"before\n{pt.BEGIN}\nold\n{pt.END}\nafter\n")
        docs.append(doc)
    by_name = {c.name: c for c in CASES}
    results = [pt.Predicted(by_name["healthy"], "", (), ("shard_missing",)),
               pt.Predicted(by_name["wrong-shape"], "weight_shape", ("weight_shape",), ()),
               pt.Predicted(by_name["bad-flag"], "", (), ()),
               pt.Predicted(by_name["bf16-request-crash"], "", (), ())]
    text = pt.table(results, "0.32.0+cpu")
    assert text.startswith("vLLM 0.32.0+cpu: 1 of 2 failures its configuration decides "
                           "predicted with the right reason; 0 of 1 launches that start "
                           "refused; 0 of 1 failure(s) the configuration does not decide "
                           "refused.")
    assert "| bad-flag | failed: config_invalid | a clean start | unknown_flag | **no** |" \
        in text
    assert "| healthy | started | a clean start (MAYBE: shard_missing) | nothing refused | " \
           "yes |" in text
    pt.write(text, tuple(docs))
    for doc in docs:
        assert doc.read_text() == f"before\n{pt.BEGIN}\n{text}\n{pt.END}\nafter\n"


def test_the_readme_quotes_the_preflight_table_of_the_doc() -> None:
    from tools.real_vllm import preflight_tier as pt

    def quoted(path: Path) -> str:
        return path.read_text(encoding="utf-8").split(pt.BEGIN)[1].split(pt.END)[0]

    assert quoted(ROOT / "README.md") == quoted(ROOT / "docs" / "real-vllm.md")
