"""Actions in the history: each move recorded with its action's row, and the policy's
`history` rebuilt from them.

An action's row says where it is now; `action_transitions` keeps every move (numbered in
order, so recording the same action twice adds nothing); `operator_events` keeps what
operators did to a target outside an action. Values travel as parameters, never as SQL text.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import duckdb

from logwatch.core.remedy.actions import Action, Transition
from logwatch.core.remedy.policy import HistoryItem, OperatorEvent

if TYPE_CHECKING:
    from logwatch.store.db import Store

# on an existing action: its state moves on, what it is for never changes
_ACTION_UPDATE = ("state = excluded.state, updated = excluded.updated, "
                  "plan = coalesce(actions.plan, excluded.plan), "
                  "diagnosis_id = coalesce(actions.diagnosis_id, excluded.diagnosis_id)")


def record_action(store: Store, action: Action, plan_json: str | None = None,
                  diagnosis_id: str | None = None) -> int:
    """Write the action's row and the moves not stored yet, in one transaction; call it
    after each `transition` (before the executor acts, so an attempt is reserved). Returns
    how many moves were new. `plan_json`/`diagnosis_id` are kept from the first write."""
    row = {"id": action.id, "diagnosis_id": diagnosis_id, "snapshot_hash": action.from_config,
           "state": action.state, "plan": plan_json, "created": action.created,
           "updated": action.updated, "target": action.target, "plan_hash": action.plan_hash,
           "config_hash": action.config_hash, "signature": action.signature,
           "fingerprint": action.fingerprint}
    moves = [{"action_id": action.id, "seq": seq, "from_state": t.from_state,
              "to_state": t.to_state, "time": t.time, "actor": t.actor, "reason": t.reason}
             for seq, t in enumerate(action.transitions)]
    with _transaction(store):
        store.upsert("actions", [row], _ACTION_UPDATE)
        return store.insert("action_transitions", moves)


def record_operator_event(store: Store, event: OperatorEvent) -> bool:
    """Write an operator event (a breaker reset); False if it was recorded already."""
    digest = hashlib.sha256("\x1f".join((event.kind, event.target, event.time.isoformat(),
                                         event.actor)).encode()).hexdigest()[:24]
    with _transaction(store):
        return store.insert("operator_events", [{
            "id": digest, "kind": event.kind, "target": event.target, "time": event.time,
            "actor": event.actor, "reason": event.reason}]) == 1


def load_history(store: Store, target: str) -> list[HistoryItem]:
    """The target's actions (with every move, oldest first), then its operator events:
    what `policy.decide` takes (it does not depend on their order)."""
    history: list[HistoryItem] = list(_load_actions(store, "a.target = ?", target))
    history += [OperatorEvent(*r) for r in store.query(
        "SELECT kind, target, time, actor, reason FROM operator_events WHERE target = ? "
        "ORDER BY time", [target])]
    return history


def load_action(store: Store, action_id: str) -> Action | None:
    """One action with its moves (`logwatch approve ID`), or None if there is none."""
    found = _load_actions(store, "a.id = ?", action_id)
    return found[0] if found else None


def _load_actions(store: Store, where: str, value: str) -> list[Action]:
    """Actions matching `where` (SQL written here, one `?` for `value`), oldest first;
    an action without recorded moves (a row from before schema 4) is left out."""
    moves: dict[str, list[Transition]] = {}
    for action_id, from_state, to_state, time, actor, reason in store.query(
            "SELECT t.action_id, t.from_state, t.to_state, t.time, t.actor, t.reason "
            f"FROM action_transitions t JOIN actions a ON a.id = t.action_id WHERE {where} "
            "ORDER BY t.action_id, t.seq", [value]):
        moves.setdefault(action_id, []).append(
            Transition(from_state, to_state, time, actor, reason))
    rows = store.query(
        "SELECT id, target, plan_hash, config_hash, snapshot_hash, signature, fingerprint, "
        f"created FROM actions a WHERE {where} ORDER BY created, id", [value])
    return [Action(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], tuple(moves[r[0]]))
            for r in rows if r[0] in moves]


@contextlib.contextmanager
def _transaction(store: Store) -> Iterator[None]:
    store.con.execute("BEGIN TRANSACTION")
    try:
        yield
        store.con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # a failed COMMIT ended it already
            store.con.execute("ROLLBACK")
        raise
