"""tools/vllm_vocab's measuring half: a curated message rendered as the log text vLLM writes,
classified by logwatch's real scan, the curated file, and the README section it all feeds."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from logwatch.core.lines.vllm_format import parse_line
from logwatch.core.signatures.library import Library
from tools.vllm_vocab.__main__ import MISSES, misses_page
from tools.vllm_vocab.coverage import classify, coverage_body, is_generic, measure
from tools.vllm_vocab.curated import Curated, CuratedError, load
from tools.vllm_vocab.readme import MarkersMissing, current, replaced, section
from tools.vllm_vocab.render import render


def _entry(**changes: object) -> Curated:
    fields: dict[str, object] = dict(
        id="memory.no_cache_blocks", area="worker/engine/memory", kind="raise",
        label="ValueError", template="No available memory for the cache blocks. Try "
        "increasing `gpu_memory_utilization` when initializing the engine.",
        file="vllm/v1/core/kv_cache_utils.py", function="check_enough_kv_cache_memory",
        releases=("0.10.2", "0.11.0"), fatal=True, process="engine")
    fields.update(changes)
    return Curated(**fields)  # type: ignore[arg-type]


def _parsed(text: str) -> list[tuple[str | None, str | None, str]]:
    lines = [parse_line("<t>", n, raw, datetime(2026, 12, 1))
             for n, raw in enumerate(text.splitlines(), 1)]
    return [(p.process, p.level, p.message) for p in lines]


def test_an_engine_error_is_a_traceback_after_the_engine_core_failure() -> None:
    lines = _parsed(render(_entry()))
    assert lines[0] == ("EngineCore_DP0", "ERROR", "EngineCore failed to start.")
    message = "ValueError: " + _entry().template
    assert ("EngineCore_DP0", "ERROR", message) in lines
    assert lines[-1][0] == "APIServer"
    assert lines[-1][2].startswith("RuntimeError: Engine core initialization failed.")


def test_releases_before_0_10_2_name_the_engine_core_0_and_prefix_no_api_line() -> None:
    lines = _parsed(render(_entry(releases=("0.8.5", "0.9.2"))))
    assert lines[0] == ("EngineCore_0", "ERROR", "EngineCore failed to start.")
    assert lines[-1] == (None, None, "RuntimeError: Engine core initialization failed. See root "
                         "cause above. Failed core proc(s): {}")


def test_an_api_server_error_has_no_engine_line() -> None:
    entry = _entry(process="api", template="Unknown vLLM environment variable detected: "
                   "{env}", file="vllm/platforms/interface.py", values={"env": "VLLM_X"})
    lines = _parsed(render(entry))
    assert {process for process, _, _ in lines} == {"APIServer"}
    assert lines[-1][2] == "ValueError: Unknown vLLM environment variable detected: VLLM_X"


def test_a_config_validator_error_arrives_through_pydantic() -> None:
    entry = _entry(process="api", template="max_model_len {n} is too large",
                   file="vllm/config/model.py", function="ModelConfig.__post_init__",
                   releases=("0.11.0",), values={"n": "9"})
    messages = [m for _, _, m in _parsed(render(entry))]
    assert messages[-3].endswith("ValidationError: 1 validation error for ModelConfig")
    assert messages[-2].startswith("  Value error, max_model_len 9 is too large [type=")


def test_a_torch_check_and_a_bare_assert_and_a_log_line() -> None:
    check = _entry(kind="torch_check", label="TORCH_CHECK", template="size_n = {size_n} is "
                   "not divisible", file="csrc/quantization/marlin/gptq_marlin_repack.cu")
    assert "RuntimeError: size_n = 2880 is not divisible" in render(check)
    bare = _entry(kind="assert", label="AssertionError",
                  template="assert isinstance(quant_method, FusedMoEMethodBase)")
    messages = [m for _, _, m in _parsed(render(bare))]
    assert "    assert isinstance(quant_method, FusedMoEMethodBase)" in messages
    assert "AssertionError" in messages
    log = _entry(kind="log", label="WARNING", template="Marlin padding {n}", fatal=False)
    assert _parsed(render(log)) == [("EngineCore_DP0", "WARNING", "Marlin padding 2880")]


def test_logwatch_classifies_specific_area_generic_and_healthy(library: Library) -> None:
    unknown = _entry(id="x.unknown", template="the frobnicator exploded")
    # raised in a file of no area of vLLM, logged as a plain ERROR line: nothing places it
    stray = _entry(id="x.stray", kind="log", label="ERROR", fatal=True,
                   template="the frobnicator gave up", file="vllm/frobnicate.py")
    warning = _entry(id="x.warning", kind="log", label="WARNING", fatal=False,
                     template="the frobnicator is warm")
    outcomes = measure([_entry(), unknown, stray, warning], library)
    assert [o.outcome for o in outcomes] == ["specific", "area", "generic", "healthy"]
    assert "memory.no_cache_blocks" in outcomes[0].signatures
    # the frames name KV-cache sizing, which fits the message's area
    assert outcomes[1].signatures == ("kv_cache.unrecognised_error@kv_cache",)
    assert all(is_generic(s) for s in outcomes[2].signatures)
    assert classify({"incidents": []}) == ("healthy", ())


def test_the_curated_file_rejects_bad_entries(tmp_path: Path) -> None:
    path = tmp_path / "curated.toml"
    entry = ('[[message]]\nid = "a"\narea = "marlin"\nkind = "raise"\nlabel = "E"\n'
             'template = "t"\nfile = "f"\nreleases = ["0.9.2"]\nfatal = true\n')
    path.write_text(entry + entry, encoding="utf-8")
    with pytest.raises(CuratedError, match="appears twice"):
        load(path)
    path.write_text(entry.replace('"marlin"', '"kernels"'), encoding="utf-8")
    with pytest.raises(CuratedError, match="unknown area"):
        load(path)
    path.write_text(entry.replace('releases = ["0.9.2"]\n', ""), encoding="utf-8")
    with pytest.raises(CuratedError, match="missing 'releases'"):
        load(path)
    path.write_text(entry, encoding="utf-8")
    assert load(path)[0].releases == ("0.9.2",)


@pytest.mark.slow
def test_the_readme_coverage_section_is_what_the_command_computes(library: Library) -> None:
    """`make vocab` wrote it (and docs/vocab-misses.md) from this repository's curated set and
    signatures; no vLLM sources are needed to check it."""
    body, outcomes = coverage_body(load(), library)
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    assert current(text) == section(body), "README coverage is stale: `make vocab`"
    assert MISSES.read_text(encoding="utf-8") == misses_page(outcomes), (
        "docs/vocab-misses.md is stale: run `make vocab`")


def test_the_readme_section_is_replaced_between_its_markers() -> None:
    text = f"intro\n{section('old table')}\noutro\n"
    assert replaced(text, "new table") == f"intro\n{section('new table')}\noutro\n"
    with pytest.raises(MarkersMissing):
        current("no markers here")


def test_the_repository_curated_set_loads() -> None:
    entries = load()
    assert len(entries) >= 150
    assert {e.area for e in entries} >= {"marlin", "quantization configs",
                                          "nvfp4/mxfp4 backends", "speculative decoding/MTP",
                                          "worker/engine/memory", "config validation"}


def test_a_curated_file_that_is_not_toml_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "curated.toml"
    path.write_text("matrix = [\n", encoding="utf-8")
    with pytest.raises(CuratedError, match=r"curated\.toml: "):
        load(path)
    with pytest.raises(CuratedError, match="No such file"):
        load(tmp_path / "missing.toml")


@pytest.mark.slow
def test_the_coverage_command_prints_the_table_and_writes_the_misses(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tools.vllm_vocab.__main__ import main

    curated = tmp_path / "curated.toml"
    curated.write_text(
        'matrix = ["0.25.1"]\n'
        '[[message]]\nid = "engine.frobnicator"\narea = "worker/engine/memory"\nkind = "raise"\n'
        'label = "RuntimeError"\ntemplate = "the frobnicator exploded"\n'
        'file = "vllm/v1/worker/gpu_worker.py"\nreleases = ["0.25.1"]\nfatal = true\n',
        encoding="utf-8")
    misses_file = tmp_path / "misses.md"
    assert main(["coverage", "--curated", str(curated), "--misses", str(misses_file),
                 "--no-generated"]) == 0
    table = capsys.readouterr().out
    # no signature knows it; its traceback's frames place it in the engine's workers
    assert "| worker/engine/memory | 1 | 0 (0%) | 1 (100%) | 0 (0%) | 0 (0%) |" in table
    written = misses_file.read_text(encoding="utf-8")
    assert "`engine.frobnicator` [fatal; area (" in written
    assert "RuntimeError: the frobnicator exploded" in written
