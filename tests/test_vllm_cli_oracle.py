"""The committed `vllm serve` flags and VLLM_* variables (logwatch/core/snapshot/data/vllm_cli.json)
against a fresh extraction from each release's own sources: a release whose sdist is cached is
re-read and must match exactly; one that is not cached is skipped with the reason."""

from __future__ import annotations

import json

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
    # what the releases are known to have, as a check that the extraction reads the parser
    assert {"--tensor-parallel-size", "-tp", "--speculative-config", "--port"} <= fresh.flags
    assert "VLLM_LOGGING_LEVEL" in fresh.env


def test_an_incomplete_tree_is_refused_not_read_as_empty() -> None:
    with pytest.raises(SourceMissing, match="arg_utils"):
        extract({"vllm/envs.py": "environment_variables = {}"})


def test_the_table_round_trips_through_the_vocabulary() -> None:
    from tools.vllm_cli.__main__ import compact_json, table
    from tools.vllm_cli.extract import CliFacts

    facts = {"0.26.0": CliFacts(frozenset({"--a", "--b"}), frozenset({"VLLM_X"})),
             "0.9.2": CliFacts(frozenset({"--a"}), frozenset({"VLLM_X", "VLLM_OLD"})),
             "0.33.0": CliFacts(frozenset({"--a"}), frozenset())}
    data = json.loads(compact_json(table(facts)))
    assert data["releases"] == ["0.9.2", "0.26.0", "0.33.0"]  # by release, not by text
    assert data["flags"] == {"--a": ["0.9.2-0.33.0"], "--b": ["0.26.0"]}
    assert data["env"] == {"VLLM_OLD": ["0.9.2"], "VLLM_X": ["0.9.2-0.26.0"]}
    back = vocabulary(data)
    for release, fact in facts.items():
        at = parse_release(release)
        assert at is not None
        assert back.flags_at(at) == fact.flags and back.env_at(at) == fact.env
