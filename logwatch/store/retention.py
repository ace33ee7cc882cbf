"""Retention: the history of a busy host without end. Launches that started more than
`keep_days` ago go, with their incidents, findings and diagnoses; scans, sources and
snapshots nothing refers to any more go too. Each source's newest launch stays whatever its
age (a daemon goes on with it), and actions, their moves and the operators' events stay
always: they are few, and a target's breaker is read from them (pruning a failed relaunch
must never reopen the way to the next one)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from logwatch.store.db import Store

OLD_LAUNCHES = """
CREATE TEMP TABLE pruned_launches AS
SELECT id FROM launches
WHERE coalesce(started, updated) < $cutoff
  AND id NOT IN (SELECT id FROM launches QUALIFY row_number() OVER (
                   PARTITION BY source ORDER BY number DESC) = 1)"""

# each statement's table, and the rows it removes
STEPS = (
    ("findings", "DELETE FROM findings WHERE incident_id IN (SELECT id FROM incidents WHERE "
                 "launch_id IN (SELECT id FROM pruned_launches) OR (launch_id IS NULL AND "
                 "last_time < $cutoff))"),
    ("diagnoses", "DELETE FROM diagnoses WHERE launch_id IN (SELECT id FROM pruned_launches) "
                  "OR incident_id NOT IN (SELECT id FROM incidents WHERE launch_id NOT IN "
                  "(SELECT id FROM pruned_launches) AND NOT (launch_id IS NULL AND last_time "
                  "< $cutoff))"),
    ("incidents", "DELETE FROM incidents WHERE launch_id IN (SELECT id FROM pruned_launches) "
                  "OR (launch_id IS NULL AND last_time < $cutoff)"),
    ("launches", "DELETE FROM launches WHERE id IN (SELECT id FROM pruned_launches)"),
    ("scans", "DELETE FROM scans WHERE started < $cutoff"),
    ("sources", "DELETE FROM sources WHERE last_seen < $cutoff AND id NOT IN (SELECT "
                "source_id FROM findings) AND id NOT IN (SELECT source_id FROM checkpoints)"),
    ("snapshots", "DELETE FROM snapshots WHERE first_recorded < $cutoff AND hash NOT IN ("
                  "SELECT snapshot_hash FROM launches WHERE snapshot_hash IS NOT NULL UNION "
                  "SELECT snapshot_hash FROM incidents WHERE snapshot_hash IS NOT NULL UNION "
                  "SELECT snapshot_hash FROM findings WHERE snapshot_hash IS NOT NULL UNION "
                  "SELECT snapshot_hash FROM diagnoses WHERE snapshot_hash IS NOT NULL UNION "
                  "SELECT snapshot_hash FROM actions WHERE snapshot_hash IS NOT NULL UNION "
                  "SELECT config_hash FROM actions WHERE config_hash IS NOT NULL)"),
)


@dataclass(frozen=True, slots=True)
class Pruned:
    cutoff: datetime
    removed: dict[str, int]  # table -> rows

    def describe(self) -> str:
        gone = ", ".join(f"{n:,} {t}" for t, n in self.removed.items() if n) or "nothing"
        return f"older than {self.cutoff:%Y-%m-%d %H:%M}: removed {gone}"


def prune(store: Store, keep_days: float, now: datetime | None = None) -> Pruned:
    """Remove what ended more than `keep_days` ago, in one transaction."""
    if keep_days <= 0:
        raise ValueError(f"keep_days {keep_days}: more than 0 days (0 keeps everything)")
    cutoff = (now or datetime.now()) - timedelta(days=keep_days)
    con = store.con
    removed: dict[str, int] = {}
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DROP TABLE IF EXISTS pruned_launches")
        con.execute(OLD_LAUNCHES, {"cutoff": cutoff})
        for table, statement in STEPS:
            params = {"cutoff": cutoff} if "$cutoff" in statement else {}
            row = con.execute(statement, params).fetchone()
            removed[table] = removed.get(table, 0) + (int(row[0]) if row else 0)
        con.execute("DROP TABLE pruned_launches")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return Pruned(cutoff, removed)
