"""Actions in a real DuckDB file: every move recorded, the history rebuilt, the same decision;
and the migration from schema 3."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from logwatch.core.remedy import actions as A
from logwatch.core.remedy import policy as P
from logwatch.core.remedy.actions import transition
from logwatch.store.actions import (
    load_action,
    load_history,
    record_action,
    record_operator_event,
)
from logwatch.store.db import open_store, schema_version
from logwatch.store.schema import MIGRATIONS, SCHEMA_VERSION
from tests.test_policy import MIN, T0, attempt, policy, request, reset

HOSTILE = "'; DROP TABLE actions; -- $(rm -rf /) `id` \x1b[31m ../../etc"


def test_transitions_round_trip_and_decide_gives_the_same_answer(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    history: list[P.HistoryItem] = [
        attempt("a", T0, "failed", config="cfg-bad"),
        attempt("b", T0 + timedelta(hours=1), "failed"),
        attempt("c", T0 + timedelta(hours=2), "succeeded", source="cfg9"),
        attempt("d", T0 + timedelta(hours=3), "failed"),
        attempt("x", T0, "failed", target="llama"),
        reset(T0 + timedelta(minutes=30)),
    ]
    with open_store(db) as store:
        for item in history:
            if isinstance(item, A.Action):
                # recorded move by move, as the runner will
                for n in range(1, len(item.transitions) + 1):
                    partial = replace(item, transitions=item.transitions[:n])
                    assert record_action(store, partial, plan_json='{"flags": []}') == 1
                assert record_action(store, item) == 0  # again: nothing new
            else:
                assert record_operator_event(store, item)
                assert not record_operator_event(store, item)
    with open_store(db) as store:
        loaded = load_history(store, "qwen")
        assert sorted(map(repr, loaded)) == sorted(
            repr(h) for h in history if getattr(h, "target", "") == "qwen")
        assert store.query("SELECT plan FROM actions WHERE id = 'a'") == [('{"flags": []}',)]
        # each action's row says where it is now
        assert sorted(store.query("SELECT id, state, updated, created FROM actions")) == sorted(
            (a.id, a.state, a.updated, a.created) for a in history if isinstance(a, A.Action))
    rng = random.Random(7)
    limits = P.Thresholds(breaker_failures=3, attempts_per_failure=2)
    seen = set()
    for _ in range(60):
        now = T0 + timedelta(minutes=rng.randint(0, 600))
        req = request(config=rng.choice(["cfg-bad", "cfg-new"]),
                      source=rng.choice(["cfg0", "cfg1"]))
        pol = policy(max_per_hour=rng.choice([1, 2, 5]), thresholds=limits)
        expected = P.decide(history, now, pol, req)
        assert P.decide(loaded, now, pol, req) == expected
        seen.add(expected.reason)
    assert {P.FAILED_CONFIG, P.BACKOFF, ""} <= seen


def test_log_text_travels_as_parameters(tmp_path: Path) -> None:
    a = A.propose("act-1", "qwen", "p", HOSTILE, "cfg0", "sig", HOSTILE, T0, HOSTILE)
    a = transition(a, A.REJECTED, T0 + MIN, "operator:ann", HOSTILE)
    with open_store(tmp_path / "h.duckdb") as store:
        record_action(store, a)
        record_operator_event(store, P.OperatorEvent(P.BREAKER_RESET, "qwen", T0,
                                                     "operator:ann", HOSTILE))
        assert load_history(store, "qwen") == [
            a, P.OperatorEvent(P.BREAKER_RESET, "qwen", T0, "operator:ann", HOSTILE)]
        assert load_history(store, HOSTILE) == []
        assert load_action(store, "act-1") == a
        assert load_action(store, HOSTILE) is None
        assert store.query("SELECT count(*) FROM actions") == [(1,)]


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    a = attempt("a", T0, "succeeded")
    with open_store(tmp_path / "h.duckdb") as store:
        store.con.execute("DROP TABLE action_transitions")
        with pytest.raises(duckdb.CatalogException, match="action_transitions"):
            record_action(store, a)
        assert store.query("SELECT count(*) FROM actions") == [(0,)]


def test_schema_3_migrates_and_keeps_what_it_held(tmp_path: Path) -> None:
    assert SCHEMA_VERSION == 7
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    for version in (1, 2, 3):  # migrations are never edited: this is what schema 3 wrote
        for statement in MIGRATIONS[version]:
            con.execute(statement)
    con.execute("INSERT INTO meta VALUES ('schema_version', '3')")
    con.execute("INSERT INTO launches (id, outcome) VALUES ('l1', 'failed')")
    con.execute("INSERT INTO actions (id, state, created) VALUES ('old', 'proposed', ?)", [T0])
    con.close()
    with open_store(db) as store:
        assert schema_version(store.con) == SCHEMA_VERSION
        assert store.query("SELECT id, outcome, seq FROM launches") == [("l1", "failed", 1)]
        assert store.query("SELECT id, state, target, config_hash FROM actions") == [
            ("old", "proposed", None, None)]
        assert load_history(store, "qwen") == []  # an old row without a target is no one's
        record_action(store, attempt("a", T0, "succeeded"))
        assert len(load_history(store, "qwen")) == 1
    with open_store(db) as store:  # opening again migrates nothing
        assert schema_version(store.con) == SCHEMA_VERSION
        assert store.query("SELECT count(*) FROM action_transitions") == [(6,)]
        assert store.query("SELECT count(*) FROM quarantined") == [(0,)]  # schema 5
