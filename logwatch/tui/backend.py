"""Where the TUI's data comes from, behind one interface: a running daemon's control socket
(`SocketBackend`: queries, status, events, and the operator's approve/reject, recorded
under the connecting user), or with no daemon the history file read-only
(`HistoryBackend`: the same queries, nothing to act on). The TUI never opens the database for
writing and never runs an action itself.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from logwatch.daemon.client import Client, DaemonUnavailable, RequestFailed


class BackendError(Exception):
    """A query or request that failed: said on screen, the TUI goes on."""


@dataclass(frozen=True, slots=True)
class Rows:
    columns: list[str]
    rows: list[list[Any]]
    truncated: str | None = None

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


class Backend(Protocol):
    @property
    def can_act(self) -> bool: ...  # approve/reject reach a daemon

    @property
    def where(self) -> str: ...  # for the connection bar

    async def sql(self, query: str) -> Rows: ...

    async def status(self) -> dict[str, Any] | None: ...

    async def signatures(self) -> dict[str, Any]: ...

    async def recent_lines(self, limit: int) -> list[dict[str, Any]]: ...  # read before

    async def act(self, op: str, **params: Any) -> dict[str, Any]: ...

    async def close(self) -> None: ...


BUSY_RETRIES = 5  # the daemon runs at most two socket queries at once; others say "busy"


class SocketBackend:
    """A daemon's control socket (one connection, one request at a time)."""

    def __init__(self, path: Path, hello: dict[str, Any]) -> None:
        self.path = path
        self.hello = hello
        self.client = Client(path, timeout=15.0)

    @property
    def can_act(self) -> bool:
        return True

    @property
    def where(self) -> str:
        return f"daemon pid {self.hello.get('pid')} · {self.path} · {self.hello.get('db')}"

    async def _request(self, op: str, **params: Any) -> dict[str, Any]:
        for attempt in range(BUSY_RETRIES):
            try:
                answer = await self.client.request(op, **params)
            except (DaemonUnavailable, OSError, TimeoutError) as exc:
                raise BackendError(f"{op}: {exc}") from None
            if answer.get("ok") or not str(answer.get("error", "")).startswith("busy"):
                return answer
            await asyncio.sleep(0.05 * (attempt + 1))  # another client's queries run
        return answer

    async def sql(self, query: str) -> Rows:
        answer = await self._request("sql", query=query)
        if not answer.get("ok"):
            raise BackendError(str(answer.get("error")))
        return Rows(answer["columns"], answer["rows"], answer.get("truncated"))

    async def status(self) -> dict[str, Any] | None:
        answer = await self._request("status")
        if not answer.get("ok"):
            raise BackendError(str(answer.get("error")))
        status: dict[str, Any] = answer["status"]
        return status

    async def signatures(self) -> dict[str, Any]:
        if "signatures" not in (self.hello.get("requests") or []):
            raise BackendError("this daemon is older than the `signatures` request")
        answer = await self._request("signatures")
        if not answer.get("ok"):
            raise BackendError(str(answer.get("error")))
        return answer

    async def recent_lines(self, limit: int) -> list[dict[str, Any]]:
        """Each source's last lines, read before this client subscribed (none from a daemon
        older than the request)."""
        if "recent_lines" not in (self.hello.get("requests") or []):
            return []
        answer = await self._request("recent_lines", limit=limit)
        if not answer.get("ok"):
            raise BackendError(str(answer.get("error")))
        lines: list[dict[str, Any]] = answer["lines"]
        return lines

    async def act(self, op: str, **params: Any) -> dict[str, Any]:
        if op not in ("approve", "reject", "reset_breaker"):
            raise BackendError(f"{op}: not an operator's request")
        try:
            return await self._request(op, **params)
        except RequestFailed as exc:
            raise BackendError(str(exc)) from None

    async def close(self) -> None:
        await self.client.close()


class HistoryBackend:
    """The history file, read-only, opened for each query and closed after it (a daemon
    starting meanwhile must be able to take it)."""

    def __init__(self, db: Path, library_dirs: tuple[Path, ...] = ()) -> None:
        self.db = db
        self.library_dirs = library_dirs

    @property
    def can_act(self) -> bool:
        return False

    @property
    def where(self) -> str:
        return f"history {self.db} (read-only: no daemon)"

    async def sql(self, query: str) -> Rows:
        from logwatch.store.errors import DatabaseError
        from logwatch.store.operator_sql import read_only_query

        try:
            result = await asyncio.to_thread(read_only_query, self.db, query)
        except DatabaseError as exc:
            raise BackendError(str(exc)) from None
        return Rows(result.columns, [list(r) for r in result.rows], result.truncated)

    async def status(self) -> dict[str, Any] | None:
        return None

    async def signatures(self) -> dict[str, Any]:
        from logwatch.core.signatures.library import LibraryError
        from logwatch.library.worker import load_bounded

        try:
            library = await asyncio.to_thread(load_bounded, list(self.library_dirs))
        except LibraryError as exc:
            raise BackendError("; ".join(map(str, exc.problems))) from None
        return {"ok": True, "library": library.version, "signatures": [
            {"id": s.id, "version": s.version, "status": s.status, "severity": s.severity,
             "fatal": s.fatal, "category": s.category, "title": s.title, "path": s.path,
             "disabled": None} for s in library.signatures]}

    async def recent_lines(self, limit: int) -> list[dict[str, Any]]:
        return []  # the history keeps findings, not lines

    async def act(self, op: str, **params: Any) -> dict[str, Any]:
        raise BackendError("no daemon runs: there is nothing to approve or reject")

    async def close(self) -> None:
        return None
