"""The committed `vllm serve` flags and VLLM_* variables (logwatch/core/snapshot/data/vllm_cli.json)
against a fresh extraction from each release's own sources: a release whose sdist is cached is
re-read and must match exactly; one that is not cached is skipped with the reason."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from logwatch.core.quant.ignore_rules import parse_release
from logwatch.core.snapshot.vllm_cli import vocabulary
from logwatch.host.vllm_cli_data import DATA_FILE
from tests import vllm_sources as vs
from tools.vllm_cli.extract import PATHS, SourceMissing, extract

DATA = json.loads(DATA_FILE.read_text(encoding="utf-8"))
VOCAB = vocabulary(DATA)


def test_the_data_covers_the_cached_releases_at_least() -> None:
    assert {"0.11.2", "0.25.1", "0.26.0", "0.33.0"} <= set(DATA["releases"])


@pytest.mark.parametrize("release", DATA["releases"])
def test_committed_names_match_a_fresh_extraction(release: str) -> None:
    files = vs.read_sources(release, set(PATHS))
    if files is None:
        pytest.skip(f"vLLM {release} is not under {vs.SOURCES} "
                    f"(python -m tools.fetch_vllm_sdists {release})")
    fresh = extract(files)
    at = parse_release(release)
    assert at is not None
    assert VOCAB.flags_at(at) == fresh.flags, "re-run `python -m tools.vllm_cli`"
    assert VOCAB.env_at(at) == fresh.env, "re-run `python -m tools.vllm_cli`"
    assert VOCAB.architectures_at(at) == fresh.architectures, "re-run `python -m tools.vllm_cli`"
    assert VOCAB.speculative_methods_at(at) == fresh.speculative_methods, \
        "re-run `python -m tools.vllm_cli`"
    assert {"ngram", "eagle"} <= fresh.speculative_methods
    # what the releases are known to have, as a check that the extraction reads the parser
    assert {"--tensor-parallel-size", "-tp", "--speculative-config", "--port"} <= fresh.flags
    assert "VLLM_LOGGING_LEVEL" in fresh.env
    # and the registry: served architectures in, those served no more out
    assert {"LlamaForCausalLM", "Qwen2ForCausalLM", "DeepseekV3ForCausalLM"} <= \
        fresh.architectures
    assert "NoSuchModelForCausalLM" not in fresh.architectures


def test_an_incomplete_tree_is_refused_not_read_as_empty() -> None:
    with pytest.raises(SourceMissing, match="arg_utils"):
        extract({"vllm/envs.py": "environment_variables = {}"})


def test_a_literal_alias_is_followed_through_the_aliases_it_names() -> None:
    from tools.vllm_cli.extract import literal_values

    tree = ast.parse('A = Literal["a", "b"]\nB: TypeAlias = Literal["c", A]\n'
                     'M = Literal["m", B, Undefined]\nN = Optional[str]\n')
    assert literal_values(tree, "M") == {"m", "c", "a", "b"}
    assert literal_values(tree, "N") == frozenset() and literal_values(tree, "Z") == frozenset()


def test_the_registry_tables_are_those_vllm_merges() -> None:
    """`_VLLM_MODELS` names its tables: a table it does not spread (models served no more)
    is not read; without it, every `_*_MODELS` table but those is."""
    from tools.vllm_cli.extract import architectures

    merged = ast.parse('_A_MODELS = {"A": 1}\n_B_MODELS = {"B": 1}\n'
                       '_PREVIOUSLY_SUPPORTED_MODELS = {"Old": "0.1"}\n'
                       '_VLLM_MODELS = {**_A_MODELS}\n')
    assert architectures(merged) == {"A"}
    older = ast.parse('_A_MODELS = {"A": 1}\n_B_MODELS: dict = {"B": 1}\n'
                      '_OOT_SUPPORTED_MODELS = {"Gone": "x"}\n')
    assert architectures(older) == {"A", "B"}
    with pytest.raises(SourceMissing, match="registry"):
        architectures(ast.parse("X = 1\n"))


def test_the_table_round_trips_through_the_vocabulary() -> None:
    from tools.vllm_cli.__main__ import compact_json, table
    from tools.vllm_cli.extract import CliFacts

    facts = {"0.26.0": CliFacts(frozenset({"--a", "--b"}), frozenset({"VLLM_X"}),
                                frozenset({"AForCausalLM"})),
             "0.9.2": CliFacts(frozenset({"--a"}), frozenset({"VLLM_X", "VLLM_OLD"}),
                               frozenset({"AForCausalLM", "OldForCausalLM"})),
             "0.33.0": CliFacts(frozenset({"--a"}), frozenset(), frozenset({"AForCausalLM"}))}
    data = json.loads(compact_json(table(facts)))
    assert data["releases"] == ["0.9.2", "0.26.0", "0.33.0"]  # by release, not by text
    assert data["flags"] == {"--a": ["0.9.2-0.33.0"], "--b": ["0.26.0"]}
    assert data["env"] == {"VLLM_OLD": ["0.9.2"], "VLLM_X": ["0.9.2-0.26.0"]}
    back = vocabulary(data)
    for release, fact in facts.items():
        at = parse_release(release)
        assert at is not None
        assert back.flags_at(at) == fact.flags and back.env_at(at) == fact.env
        assert back.architectures_at(at) == fact.architectures


def test_transformers_model_classes_from_a_wheel(tmp_path: Path) -> None:
    import zipfile

    from tools.vllm_cli.transformers_names import AUTO, from_wheel, model_classes

    source = ('from collections import OrderedDict\n'
              'MODEL_FOR_CAUSAL_LM_MAPPING_NAMES = OrderedDict([("llama", "LlamaForCausalLM"), '
              '("x", ("XForCausalLM", "XFastForCausalLM"))])\n'
              'OTHER = OrderedDict([("y", "NotAModelTable")])\n')
    assert model_classes(source) == {"LlamaForCausalLM", "XForCausalLM", "XFastForCausalLM"}
    wheel = tmp_path / "transformers-5.16.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(AUTO, source)
    assert from_wheel(wheel) == ("5.16.1", model_classes(source))
    with pytest.raises(ValueError, match="not a transformers wheel"):
        from_wheel(tmp_path / "torch-2.13.0-py3-none-any.whl")


def test_the_shipped_transformers_classes_are_those_vllms_newest_release_pins() -> None:
    assert VOCAB.transformers_version == "5.16.1"  # vLLM 0.32.0: transformers >= 5.16.1
    assert {"LlamaForCausalLM", "Qwen3MoeForCausalLM"} <= VOCAB.transformers_architectures
