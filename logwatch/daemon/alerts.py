"""The daemon's `[[notify]]` deliveries: one page per failed launch, naming its root cause,
one per crash loop, and each move of a relaunch.

`launch_failed` is told once a failed launch is settled (every line it printed read): its
title, root-cause signature, category, the remedy in one line, launch number, source and the
command that shows its incidents. Consequences (a worker's or the engine's "failed to start"
after the root cause) never page. `crash_loop`: N launches of a source failed or crashed
within M minutes; it pages once per loop, and while it lasts the failed launches of that
source do not page one by one; the loop ends when a launch of the source serves or stops,
or fewer than N failed within the last M minutes. A `launch_failed` page is also told at
most once per `every_seconds` for the same source and root cause, a relaunch's state once
per `every_seconds`.

A hook is run without a shell, its argv as configured; the event's fields reach it as
LOGWATCH_* environment variables (control characters shown, never obeyed) and as JSON on
stdin; it is killed past its timeout. A webhook gets the JSON in a POST, retried with
backoff. Failures are logged, never raised: telling is not worth stopping the reading for."""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from logwatch.core.diagnosis.analysis import LaunchAnalysis
from logwatch.core.launches.lifecycle import CRASHED, SERVING, STOPPED
from logwatch.core.safe_text.visible import visible
from logwatch.core.settings.notify_config import NotifyConfig

RETRY_BASE_SECONDS = 0.5
REMEDY_CHARS = 300  # a page's remedy: one line, at most this long


def failure_page(row: dict[str, Any], analysis: LaunchAnalysis) -> dict[str, Any]:
    """What a `launch_failed` page says of a failed launch: its written row (store.live) and
    its analysis. The command is logwatch's own text around the launch's id (hex digits)."""
    root = analysis.root_incident
    remedy = ""
    if root is not None:
        remedies = [r for d in analysis.diagnoses if d.incident == analysis.root
                    for r in d.remedies if r.applicable is not False]
        remedy = remedies[0].summary if remedies else root.signature.remedy
    return _page(row, root.signature.title if root is not None else None,
                 root.signature.id if root is not None else None,
                 root.signature.category if root is not None else None, remedy)


def history_page(row: dict[str, Any]) -> dict[str, Any]:
    """The page of a failed launch as the history kept it (LiveWriter.untold_failures): paged
    late, after a restart, so `late` says so."""
    return {**_page(row, row.get("title"), row.get("root_cause"), row.get("category"),
                    str(row.get("remedy") or "")), "late": True}


def _page(row: dict[str, Any], title: str | None, root_cause: str | None,
          category: str | None, remedy: str) -> dict[str, Any]:
    remedy = " ".join(remedy.split())
    if len(remedy) > REMEDY_CHARS:
        remedy = remedy[:REMEDY_CHARS - 1] + "…"
    exit_code = row.get("exit_code")
    return {"source": row["source"], "launch": row["id"], "number": row["number"],
            "title": title or (f"exit code {exit_code}" if exit_code is not None
                               else "unknown"),
            "root_cause": root_cause, "category": category,
            "remedy": remedy, "failed_before": row["failed_before"], "exit_code": exit_code,
            "command": "logwatch sql \"SELECT * FROM incident_timeline WHERE launch_id = "
                       f"'{row['id']}'\""}


class Alerts:
    def __init__(self, entries: Sequence[NotifyConfig], log: Any,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.entries = list(entries)
        self.log = log
        self.clock = clock
        self._sent: dict[tuple[int, str, str], float] = {}  # (entry, event, key) -> when
        self._failed: dict[str, deque[tuple[float, str]]] = {}  # source -> (when, launch)
        self._looping: set[tuple[int, str]] = set()  # (entry, source) paged for its loop
        self._tasks: set[asyncio.Task[None]] = set()

    def told_before(self, paged: Sequence[tuple[str, str, float]],
                    failures: Sequence[tuple[str, str, float]]) -> None:
        """What an earlier run of the daemon (under this or another name for a source) told:
        each (source, root cause) of a failed launch the history recorded lately, and each
        failed launch, with when (wall clock). A failed launch with that root cause is not
        paged again within `every_seconds` of then, and a crash loop the failures already
        made goes on being the same loop (not paged again, its launches not one by one)."""
        ago = time.time() - self.clock()  # a wall-clock time -> this clock's
        for source, launch, when in failures:
            self._failed.setdefault(source, deque(maxlen=1000)).append((when - ago, launch))
        now = self.clock()
        for index, entry in enumerate(self.entries):
            for source, root_cause, when in paged:
                key = (index, "launch_failed", f"{source}\x1f{root_cause}")
                self._sent[key] = max(self._sent.get(key, float("-inf")), when - ago)
            for source, failed in self._failed.items():
                recent = sum(1 for at, _ in failed if now - at <= entry.crash_loop_minutes * 60)
                if recent >= entry.crash_loop_launches:
                    self._looping.add((index, source))

    def consider(self, kind: str, fields: dict[str, Any]) -> None:
        """An event the daemon published (event loop): a launch that crashed counts towards
        a crash loop (a failed one counts once settled: `launch_failed`), one that serves or
        stopped ends its source's loop; an action's move is told."""
        if kind == "launch":
            source, outcome = str(fields.get("source")), fields.get("outcome")
            if outcome == CRASHED:
                self._count_failure(source, str(fields.get("id")), {
                    "source": source, "launch": fields.get("id"),
                    "root_cause": fields.get("root_cause"),
                    "failed_before": fields.get("failed_before")})
            elif outcome in (SERVING, STOPPED):
                self._failed.pop(source, None)
                self._looping = {(n, s) for n, s in self._looping if s != source}
        elif kind == "action":
            self._tell("relaunch", f"{fields.get('id')}:{fields.get('state')}",
                       {"event": "relaunch", **fields})

    def launch_failed(self, page: dict[str, Any]) -> None:
        """A failed launch, settled (`failure_page`): one page, unless its source's crash
        loop was paged (the loop says it), or this root cause of this source was paged
        within `every_seconds`."""
        source = str(page["source"])
        self._count_failure(source, str(page["launch"]), {
            key: page.get(key) for key in ("source", "launch", "number", "root_cause", "title",
                                           "failed_before")})
        self._tell("launch_failed", f"{source}\x1f{page.get('root_cause')}",
                   {"event": "launch_failed", **page},
                   skip=lambda index: (index, source) in self._looping)

    def _count_failure(self, source: str, launch: str, body: dict[str, Any]) -> None:
        """A launch of `source` failed or crashed: a crash loop's page when it makes one."""
        failures = self._failed.setdefault(source, deque(maxlen=1000))
        if launch in {lid for _, lid in failures}:
            return
        now = self.clock()
        failures.append((now, launch))
        for index, entry in enumerate(self.entries):
            recent = sum(1 for t, _ in failures if now - t <= entry.crash_loop_minutes * 60)
            if recent < entry.crash_loop_launches:
                self._looping.discard((index, source))  # a loop that was is over
            elif "crash_loop" in entry.on and (index, source) not in self._looping:
                self._looping.add((index, source))
                self._send(entry, {"event": "crash_loop", "launches": recent, **body})

    def _tell(self, event: str, key: str, body: dict[str, Any],
              skip: Callable[[int], bool] = lambda _: False) -> None:
        for index, entry in enumerate(self.entries):
            if event not in entry.on or skip(index):
                continue
            now = self.clock()
            last = self._sent.get((index, event, key))
            if last is not None and now - last < entry.every_seconds:
                continue  # told about this problem lately
            self._sent[(index, event, key)] = now
            self._send(entry, body)

    def _send(self, entry: NotifyConfig, body: dict[str, Any]) -> None:
        task = asyncio.get_running_loop().create_task(self._deliver(entry, body))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, entry: NotifyConfig, body: dict[str, Any]) -> None:
        payload = json.dumps(body, default=str, sort_keys=True).encode()
        for attempt in range(entry.retries + 1):
            try:
                if entry.kind == "hook":
                    await self._hook(entry, body, payload)
                else:
                    await asyncio.to_thread(_post, entry.url, payload, entry.timeout_seconds)
                return
            except (OSError, TimeoutError, urllib.error.URLError, RuntimeError) as exc:
                if attempt == entry.retries:
                    self.log.error("notify_failed", notify=entry.kind, event=body["event"],
                                   target=entry.url or entry.argv[0], error=str(exc))
                    return
            await asyncio.sleep(RETRY_BASE_SECONDS * 2 ** attempt)

    async def _hook(self, entry: NotifyConfig, body: dict[str, Any], payload: bytes) -> None:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               **{f"LOGWATCH_{k.upper()}": visible(v if isinstance(v, str) else
                                                  json.dumps(v, default=str))
                  for k, v in body.items()}}
        proc = await asyncio.create_subprocess_exec(
            *entry.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, env=env, start_new_session=True)
        try:
            await asyncio.wait_for(proc.communicate(payload), entry.timeout_seconds)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        if proc.returncode != 0:
            raise RuntimeError(f"exit status {proc.returncode}")

    async def close(self, timeout: float = 5.0) -> None:
        """Deliveries under way get `timeout` to end (a stop must not hang on a webhook)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)


def _post(url: str, payload: bytes, timeout: float) -> None:
    request = urllib.request.Request(url, data=payload, method="POST",
                                     headers={"Content-Type": "application/json",
                                              "User-Agent": "logwatch"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:  # the url: http(s) only
        if answer.status >= 300:
            raise RuntimeError(f"HTTP {answer.status}")
