"""vLLM's own vocabulary as a matcher layer (logwatch/core/signatures/vocabulary.py) and the
placing of what no signature diagnoses (logwatch/core/signatures/placed.py): a known wording is
named with the check that raised it, an unknown one put in the area its frames or logger tag
name; and every Marlin check of vLLM's C++ sources is named, in every release that has it."""

from __future__ import annotations

import io
import json
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from logwatch.core.signatures.placed import rule_of
from logwatch.core.signatures.vocabulary import (
    KEY,
    Vocabulary,
    Wanted,
    index_keys,
    literal_pieces,
)
from logwatch.library.files import VocabularyFile, shipped_vocabulary
from logwatch.scan.offline import ScanInput, scan_inputs
from tools.vllm_vocab.coverage import classify
from tools.vllm_vocab.generated import GENERATED, load
from tools.vllm_vocab.render import forms

ENGINE = "(EngineCore_DP0 pid=8) ERROR 12-01 03:12:44 [core.py:708] "
RAISED = Wanted(frozenset({"raise"}), frozenset({"ValueError"}))
LOGGED = Wanted(frozenset({"log"}))
SITE = "/venv/lib/python3.12/site-packages/vllm/"


def _raw(template: str, kind: str = "raise", file: str = "vllm/frob/zorblax.py",
         id: str = "0123456789ab") -> dict[str, Any]:
    return {"id": id, "kind": kind, "label": "ValueError" if kind == "raise" else "ERROR",
            "template": template, "file": file, "function": "plan",
            "releases": ["0.25.1", "0.26.0"], "area": "other", "process": "engine"}


def _scan(text: str, library: Library, vocabulary: Vocabulary | None) -> dict[str, Any]:
    matcher = Matcher(library.signatures, vocabulary=vocabulary)
    report: dict[str, Any] = scan_inputs([ScanInput("<stdin>", None, stream=True)], library,
                                         stdin=io.BytesIO(text.encode()), matcher=matcher)
    return report


def _traceback(exception: str, frame: str = "v1/engine/core.py", code: str = "plan()",
               after: tuple[str, ...] = ()) -> str:
    return "".join(ENGINE + line + "\n" for line in (
        "EngineCore failed to start.", "Traceback (most recent call last):",
        f'  File "{SITE}{frame}", line 12, in plan', f"    {code}", exception, *after))


def _root(report: dict[str, Any]) -> dict[str, Any]:
    assert report["root_cause"] is not None, report["incidents"]
    root: dict[str, Any] = report["incidents"][report["root_cause"]]
    return root


def test_a_wording_is_its_fixed_pieces_in_order() -> None:
    assert literal_pieces("size_n = {n} is not divisible by {d}") == (
        ("size_n = ", " is not divisible by "), True)
    assert literal_pieces("{x} needs {{braces}}\nsecond line {y}") == ((" needs {braces}",),
                                                                       False)
    vocabulary = Vocabulary([_raw("size_n = {n} is not divisible by tile_n_size = {t}")])
    found = vocabulary.lookup([("size_n = 40 is not divisible by tile_n_size = 64", RAISED)])
    assert found is not None and found.release_span == "0.25.1–0.26.0"
    # the first fixed piece starts the message; the pieces come in order
    assert vocabulary.lookup([("oh: size_n = 40 is not divisible by tile_n_size = 64",
                               RAISED)]) is None
    assert vocabulary.lookup([("size_n = 40 tile_n_size = 64 is not divisible by",
                               RAISED)]) is None
    # a raised wording is not a logged one, nor raised as another class
    text = "size_n = 40 is not divisible by tile_n_size = 64"
    assert vocabulary.lookup([(text, LOGGED)]) is None
    assert vocabulary.lookup([(text, Wanted(frozenset({"raise"}),
                                            frozenset({"KeyError"})))]) is None
    # a wording that ends with fixed text ends the message (unless the message was cut)
    closed = Vocabulary([_raw("Worker failed to load the model")])
    assert closed.lookup([("Worker failed to load the model", RAISED)]) is not None
    assert closed.lookup([("Worker failed to load the model adapter 'x' of a user",
                           RAISED)]) is None


def test_a_wording_with_too_little_fixed_text_is_never_matched() -> None:
    vocabulary = Vocabulary([_raw("Invalid {x}", id="a" * 12), _raw("{x}: {y}", id="b" * 12),
                             _raw("{x} is not supported.", id="c" * 12),
                             _raw("Failed to load it {x}", id="d" * 12,
                                  file="vllm/model_executor/layers/marlin_utils_test.py")])
    assert vocabulary.lookup([("Invalid zorblax frobnication requested", RAISED)]) is None
    assert vocabulary.lookup([("a: b", RAISED)]) is None
    # a wording that starts with a placeholder needs more fixed text; a test helper's none
    assert vocabulary.lookup([("Image input is not supported.", RAISED)]) is None
    assert vocabulary.lookup([("Failed to load it now", RAISED)]) is None


def test_the_closest_wording_wins_and_a_withheld_one_is_unknown() -> None:
    vocabulary = Vocabulary([
        _raw("Marlin cannot serve {what}", id="a" * 12),
        _raw("Marlin cannot serve {what} with group size {g}", id="b" * 12)])
    found = vocabulary.lookup([("Marlin cannot serve this layer with group size 16", RAISED)])
    assert found is not None and found.id == "b" * 12
    fewer = vocabulary.without(["b" * 12])
    found = fewer.lookup([("Marlin cannot serve this layer with group size 16", RAISED)])
    assert found is not None and found.id == "a" * 12
    assert fewer.without(["a" * 12]).lookup([("Marlin cannot serve it", RAISED)]) is None


def test_a_hostile_message_costs_a_few_finds_not_backtracking() -> None:
    template = "".join(f"piece{i} {{v{i}}} " for i in range(12))
    vocabulary = Vocabulary([_raw(template)])
    hostile = "piece0 " * 2000  # every piece's start, never the rest
    assert vocabulary.lookup([(hostile, RAISED)]) is None


def test_the_shipped_vocabulary_crosses_to_a_worker_without_its_index() -> None:
    shipped = shipped_vocabulary()
    assert isinstance(shipped, VocabularyFile)
    check = Wanted(frozenset({"torch_check"}), frozenset({"RuntimeError"}))
    assert shipped.lookup([("Invalid MNK = [16, 2880, 4096]", check)]) is not None
    copy = pickle.loads(pickle.dumps(shipped.without(["x"])))
    assert copy.__dict__["_raw"] is None and copy.__dict__["_index"] is None
    found = copy.lookup([("Invalid MNK = [16, 2880, 4096]", check)])
    assert found is not None and found.file.startswith("csrc/quantization/marlin/")


def test_the_keys_the_data_file_holds_are_the_ones_a_scan_would_work_out() -> None:
    """The shipped file holds each wording's index word (written by tools.vllm_vocab with
    index_keys): a scan files the wordings by it instead of working it out for twelve
    thousand of them first. The file's keys and a full build must find the same wording for
    every wording's own text."""
    shipped = VocabularyFile(GENERATED)
    raw = list(shipped.entries())
    assert all(KEY in r for r in raw)
    assert {r["id"]: r[KEY] for r in raw} == index_keys(raw)
    built = Vocabulary([{k: v for k, v in r.items() if k != KEY} for r in raw])  # no keys
    every = Wanted(frozenset({"raise", "assert", "torch_check", "log"}))
    texts = [r["template"].split("\n", 1)[0].replace("{}", "7") for r in raw[::7]]
    found = [shipped.lookup([(t, every)]) for t in texts]
    assert found == [built.lookup([(t, every)]) for t in texts]
    assert sum(f is not None for f in found) > len(texts) // 2
    assert shipped._index is not None and len(shipped._index) < len(built._index or {})


def test_a_known_marlin_check_is_named_with_its_source(library: Library) -> None:
    """The issue's own examples: Marlin's TORCH_CHECKs came out as a bare unrecognised
    exception although vLLM's sources print them."""
    text = _traceback("RuntimeError: Invalid MNK = [16, 2880, 4096]",
                      frame="_custom_ops.py", code="return torch.ops._C.gptq_marlin_gemm(")
    before = _root(_scan(text, library, None))
    assert before["signature"] != "marlin.known_error"
    report = _scan(text, library, library.vocabulary)
    root = _root(report)
    assert root["signature"] == "marlin.known_error" and root["fatal"]
    assert root["captures"]["check"].startswith("torch_check STD_TORCH_CHECK in "
                                                "csrc/quantization/marlin/")
    assert report["verdict"] == "failed" and report["verdict_reason"] == "known_vllm_error"
    signature = library.get("marlin.known_error")
    assert signature is not None and rule_of(signature) == "generic.uncaught_exception"


def test_a_config_check_inside_pydantic_and_a_bare_assert_are_looked_up(
        library: Library) -> None:
    vocabulary = Vocabulary([
        _raw("zorblax_slots ({n}) must be a multiple of the frob width", id="a" * 12,
             file="vllm/config/zorblax.py"),
        _raw("assert frob_width % tp_size == 0", kind="assert", id="b" * 12,
             file="vllm/model_executor/layers/quantization/frob.py")])
    pydantic = _traceback(
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ZorblaxConfig",
        frame="config/zorblax.py", after=(
            "  Value error, zorblax_slots (7) must be a multiple of the frob width "
            "[type=value_error, input_value=ArgsKwargs(()), input_type=ArgsKwargs]",))
    root = _root(_scan(pydantic, library, vocabulary))
    assert (root["signature"], root["captures"]["vocab"]) == ("config.known_error", "a" * 12)
    bare = _traceback("AssertionError",
                      frame="model_executor/layers/quantization/frob.py",
                      code="assert frob_width % tp_size == 0")
    root = _root(_scan(bare, library, vocabulary))
    assert (root["signature"], root["captures"]["vocab"]) == ("quantization.known_error",
                                                              "b" * 12)


def test_an_unknown_error_line_is_placed_by_its_logger_tag(library: Library) -> None:
    vocabulary = Vocabulary([], files={
        "zorblax_connector.py": ["vllm/distributed/kv_transfer/zorblax_connector.py"],
        "utils.py": ["vllm/utils.py", "vllm/distributed/utils.py"],
        "zorblax.py": ["vllm/distributed/x/kv_transfer/zorblax.py"]})
    line = ("(APIServer pid=1) ERROR 12-01 03:12:44 [{tag}:40] Zorblax handshake failed "
            "with peer 7\n")
    root = _root(_scan(line.format(tag="zorblax_connector.py"), library, vocabulary))
    assert root["signature"] == "distributed.unrecognised_error_line"
    assert root["captures"]["area"] == "distributed"
    # a name two areas share places nothing; vLLM's shortened path names its directory
    root = _root(_scan(line.format(tag="utils.py"), library, vocabulary))
    assert root["signature"] == "generic.error_line"
    root = _root(_scan(line.format(tag="distributed/.../kv_transfer/zorblax.py"), library,
                       vocabulary))
    assert root["signature"] == "distributed.unrecognised_error_line"


def test_user_content_quoting_a_known_wording_is_still_not_evidence(library: Library) -> None:
    text = ("(APIServer pid=1) INFO 12-01 03:12:44 [logger.py:40] Received request chatcmpl-1: "
            "prompt: 'why does vLLM say Invalid MNK = [16, 2880, 4096]?'\n")
    assert _scan(text, library, library.vocabulary)["incidents"] == []


def _marlin_csrc() -> list[Any]:
    return [e for e in load(GENERATED) if e.file.startswith("csrc/")
            and "marlin" in e.file]


def test_every_marlin_check_of_the_sources_is_named_in_every_release(
        library: Library) -> None:
    """Done-when of issue 27: every message under csrc/quantization/marlin/ (and Marlin's
    MoE kernels) specific in every release that prints it, in every form vLLM prints it."""
    entries = _marlin_csrc()
    assert len(entries) > 100
    matcher = Matcher(library.signatures, disable_after=None, vocabulary=library.vocabulary)
    missed = []
    for entry in entries:
        for release in entry.releases:
            for form, text in forms(replace(entry, releases=(release,))).items():
                report = scan_inputs([ScanInput("<m>", None, stream=True)], library,
                                     stdin=io.BytesIO(text.encode()), matcher=matcher)
                outcome, said = classify(report)
                if outcome != "specific":
                    missed.append(f"{entry.id} {release} {form}: {outcome} {said}")
    assert missed == []


@pytest.mark.parametrize("half", ["tuning", "held_out"])
def test_a_half_withheld_is_not_known_by_its_own_wordings(library: Library,
                                                          half: str) -> None:
    """The honest measure: a half is measured with its own wordings left out, so a message
    is named only by a signature or by another wording of vLLM's."""
    assert library.vocabulary is not None
    entries = load(GENERATED, half)[:50]
    vocabulary = library.vocabulary.without(e.id for e in entries)
    wanted = Wanted(frozenset({"raise", "assert", "torch_check", "log"}))
    found = [vocabulary.lookup([(e.template, wanted)]) for e in entries]
    assert [e.id for e, f in zip(entries, found, strict=True)
            if f is not None and f.id == e.id] == []


VENV = "/opt/vllm/lib/python3.12/site-packages/"  # a virtual environment in a `vllm/` folder


def _engine(*lines: str) -> str:
    return "".join(ENGINE + line + "\n" for line in (
        "EngineCore failed to start.", "Traceback (most recent call last):", *lines))


@pytest.mark.parametrize(("text", "area"), [
    # transformers raises while vLLM reads the config: not vLLM's wording, even where one of
    # vLLM's (pynccl's dtype check) reads the same
    (_engine(f'  File "{VENV}vllm/transformers_utils/config.py", line 612, in get_config',
             "    config = AutoConfig.from_pretrained(model, dtype=dtype)",
             f'  File "{VENV}transformers/configuration_utils.py", line 1012, in _set_dtype',
             "    raise ValueError(msg)",
             "ValueError: Unsupported dtype: 'float8'. Must be 'auto' or a valid torch dtype "
             "(e.g. 'float16', 'bfloat16')."), "config"),
    # torch's own bare assert: its statement is not looked up
    (_engine(f'  File "{VENV}vllm/compilation/backends.py", line 620, in __call__',
             "    compiled = self.compiler_manager.compile(graph)",
             f'  File "{VENV}torch/_inductor/codegen/wrapper.py", line 1830, in enter',
             "    assert device is not None", "AssertionError"), "compilation"),
    # torch's sparse conversion (vLLM's Marlin test helper copies its wording)
    (_engine(f'  File "{VENV}vllm/model_executor/layers/quantization/compressed_tensors/'
             'schemes/compressed_tensors_24.py", line 120, in process_weights_after_loading',
             "    w = to_sparse_semi_structured(layer.weight)",
             f'  File "{VENV}torch/sparse/_semi_structured_conversions.py", line 60, in conv',
             "    raise RuntimeError(",
             "RuntimeError: Expected 2-dimensional dense tensor, got 3-dimensional tensor"),
     "quantization")])
def test_a_library_exception_is_not_named_as_vllm_s_own(library: Library, text: str,
                                                       area: str) -> None:
    """Found by an adversarial review: an exception raised by another library (its frame the
    innermost) was named as a vLLM wording of an unrelated area and judged `failed`."""
    report = _scan(text, library, library.vocabulary)
    root = _root(report)
    assert root["signature"] == f"{area}.unrecognised_error", root
    assert report["verdict"] == "unrecognised"


def test_a_client_traceback_with_no_vllm_frame_names_nothing(library: Library) -> None:
    text = ("Traceback (most recent call last):\n"
            '  File "/app/bench.py", line 12, in <module>\n'
            "    r = client.chat.completions.create(model='m', messages=msgs)\n"
            '  File "/usr/lib/python3.12/site-packages/openai/_base_client.py", line 1047, '
            "in request\n"
            "    raise self._make_status_error_from_response(err.response) from None\n"
            "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': "
            "'Image input is not supported.', 'type': 'BadRequestError', 'code': 400}\n")
    root = _root(_scan(text, library, library.vocabulary))
    assert root["signature"] == "generic.uncaught_exception"


def test_a_request_error_the_api_server_raises_is_not_a_failed_launch(
        library: Library) -> None:
    """vLLM's own wording, raised while it handles a request: named, but a client's input,
    so the verdict stays `unrecognised` (not `failed`)."""
    head = "(APIServer pid=7) ERROR 12-04 20:20:05 [serving_chat.py:250] "
    text = "".join(head + line + "\n" for line in (
        "Error in preprocessing prompt inputs", "Traceback (most recent call last):",
        f'  File "{VENV}vllm/entrypoints/openai/serving_chat.py", line 230, in create',
        "    mm_data = await self._preprocess_chat(request)",
        f'  File "{VENV}vllm/entrypoints/chat_utils.py", line 700, in _placeholder_str',
        '    raise TypeError(f"Unknown modality: {modality}")',
        "TypeError: Unknown modality: audio"))
    report = _scan(text, library, library.vocabulary)
    assert _root(report)["signature"] == "api_server.known_error"
    assert report["verdict"] == "unrecognised"


def test_a_damaged_vocabulary_file_is_said_once_and_loses_nothing(
        library: Library, tmp_path: Path) -> None:
    shipped = shipped_vocabulary()
    assert shipped is not None
    cut = tmp_path / "vocabulary.json.gz"
    cut.write_bytes(shipped.path.read_bytes()[:400_000])
    damaged = VocabularyFile(cut)
    text = _traceback("RuntimeError: Invalid MNK = [16, 2880, 4096]",
                      frame="model_executor/layers/quantization/utils/marlin_utils.py")
    report = _scan(text + "(APIServer pid=1) ERROR 12-01 03:12:45 [core.py:9] zorblax gave up\n",
                   library, damaged)
    # placed by its frames as without a vocabulary; the consequences and the ERROR line kept
    assert _root(report)["signature"] == "marlin.unrecognised_error"
    found = {i["signature"] for i in report["incidents"]}
    assert {"engine.core_failed_to_start", "generic.error_line"} <= found, found  # no file list
    assert "could not be read" in damaged.problem


def test_a_logger_tag_path_must_be_a_file_of_vllm(library: Library) -> None:
    vocabulary = Vocabulary([], files={
        "x.py": ["vllm/attention/x.py"],
        "fp8_utils.py": ["vllm/model_executor/layers/quantization/utils/fp8_utils.py"]})
    assert vocabulary.paths_of("model_executor/.../quantization/utils/fp8_utils.py") == [
        "vllm/model_executor/layers/quantization/utils/fp8_utils.py"]
    assert vocabulary.paths_of("/opt/app/my_attention/x.py") == []
    line = "(APIServer pid=1) ERROR 12-01 03:12:44 [/opt/app/my_attention/x.py:3] plugin broke\n"
    assert _root(_scan(line, library, vocabulary))["signature"] == "generic.error_line"


def test_scan_says_the_vocabulary_is_damaged(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from logwatch.library import files
    from tests.inprocess import logwatch_text

    shipped = shipped_vocabulary()
    assert shipped is not None
    cut = tmp_path / "vocabulary.json.gz"
    cut.write_bytes(shipped.path.read_bytes()[:1000])
    monkeypatch.setattr(files, "shipped_vocabulary", lambda: VocabularyFile(cut))
    log = tmp_path / "vllm.log"
    log.write_text(_traceback("RuntimeError: Invalid MNK = [16, 2880, 4096]",
                              frame="model_executor/layers/quantization/utils/marlin_utils.py"))
    done = logwatch_text("scan", "--json", str(log))
    assert "vLLM's vocabulary could not be read" in done.stderr
    report = json.loads(done.stdout)
    assert report["incidents"][report["root_cause"]]["signature"] == "marlin.unrecognised_error"
