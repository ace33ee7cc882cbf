"""The history's upkeep while the daemon runs: pruned to `[database] keep_days`, exported as
Parquet for a fleet every `[export]` minutes, each on the database's thread between commits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from logwatch.daemon.writes import Writes
from logwatch.store.db import Store
from logwatch.store.live import LiveWriter

if TYPE_CHECKING:  # loaded with the first prune, as before
    from logwatch.store.retention import Pruned

T = TypeVar("T")

PRUNE_EVERY_SECONDS = 3600.0  # [database] keep_days: how often the history is pruned


class Kept(Protocol):
    """What the upkeep needs from the daemon, and nothing more."""

    log: Any

    @property
    def writer(self) -> LiveWriter: ...

    @property
    def writes(self) -> Writes: ...  # its thread: the database's

    def in_store(self, fn: Callable[[Store], T]) -> T: ...  # one DuckDB call at a time


async def keep_days(daemon: Kept, days: float) -> None:
    """`[database] keep_days`: the history pruned at start and every hour after, on the
    database's thread between commits (store.retention)."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            pruned = await loop.run_in_executor(
                daemon.writes.thread, lambda: daemon.in_store(lambda store: _pruned(daemon,
                                                                                   store, days)))
        except Exception as exc:  # the database's trouble: said, tried again next hour
            daemon.log.error("prune_failed", error=str(exc))
        else:
            daemon.log.info("pruned", keep_days=days, **pruned.removed)
        await asyncio.sleep(PRUNE_EVERY_SECONDS)


def _pruned(daemon: Kept, store: Store, days: float) -> Pruned:
    """Prune, then have the writer forget what it knew was stored."""
    from logwatch.store.retention import prune

    try:
        return prune(store, days)
    finally:
        daemon.writer.forget_stored()


async def export_every(daemon: Kept, out: Path, host: str, minutes: float) -> None:
    """`[export]`: the history as Parquet for a fleet (store.export), at start and every
    `minutes`: a copy made between commits, exported off the database's thread. After
    the first, each export rewrites the days that can still change (from the day
    before the last export on, and the days of launches and actions changed since)."""
    from datetime import date, timedelta

    from logwatch.store.export import copy_for_export, export_copy

    loop = asyncio.get_running_loop()
    scratch = daemon.writer.store.path.with_name(daemon.writer.store.path.name + ".export")
    since: date | None = None
    exported: datetime | None = None  # when the copy last exported was taken
    while True:
        today, copied = date.today(), datetime.now()
        try:
            await loop.run_in_executor(daemon.writes.thread, lambda: daemon.in_store(
                lambda store: copy_for_export(store, scratch)))
            written = await loop.run_in_executor(None, export_copy, scratch, out, host,
                                                 since, exported)
        except Exception as exc:  # a full disk, a directory gone: said, tried again
            daemon.log.error("export_failed", directory=str(out), error=str(exc))
        else:
            daemon.log.info("exported", directory=str(out), host=host,
                            since=since and since.isoformat(),
                            rows={w.table: w.rows for w in written})
            since, exported = today - timedelta(days=1), copied
        await asyncio.sleep(minutes * 60)
