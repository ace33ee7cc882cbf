"""The daemon's `[[notify]]` deliveries. What the daemon publishes is read here: a new
fatal incident, a source's launches failing N times within M minutes (a crash loop), an
action moving (a relaunch changing state). Each entry that listens to the event is told at
most once per `every_seconds` for the same recurring problem (a signature, a source, an
action's state): a crash-looping vLLM pages once, not once a launch.

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

from logwatch.core.safe_text.visible import visible
from logwatch.core.settings.notify_config import NotifyConfig

RETRY_BASE_SECONDS = 0.5


class Alerts:
    def __init__(self, entries: Sequence[NotifyConfig], log: Any,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.entries = list(entries)
        self.log = log
        self.clock = clock
        self._sent: dict[tuple[int, str, str], float] = {}  # (entry, event, key) -> when
        self._failed: dict[str, deque[tuple[float, str]]] = {}  # source -> (when, launch)
        self._tasks: set[asyncio.Task[None]] = set()

    def told_before(self, fatal: Sequence[tuple[str, float]],
                    failures: Sequence[tuple[str, str, float]]) -> None:
        """What an earlier run of the daemon (under this or another name for a source) told:
        each fatal signature and failed launch the history recorded lately, with when (wall
        clock). A fatal problem is not told again within `every_seconds` of then, and a
        crash loop that was told goes on being the same loop."""
        ago = time.time() - self.clock()  # a wall-clock time -> this clock's
        for source, launch, when in failures:
            self._failed.setdefault(source, deque(maxlen=1000)).append((when - ago, launch))
        for index, entry in enumerate(self.entries):
            for signature, when in fatal:
                if "fatal_incident" in entry.on:
                    key = (index, "fatal_incident", signature)
                    self._sent[key] = max(self._sent.get(key, float("-inf")), when - ago)
            for source in {source for source, _, _ in failures}:
                if "crash_loop" in entry.on and self._crash_loop(entry, {"source": source}):
                    self._sent[(index, "crash_loop", source)] = max(
                        when - ago for s, _, when in failures if s == source)

    def consider(self, kind: str, fields: dict[str, Any]) -> None:
        """An event the daemon published (event loop)."""
        for event, key, body in self._events(kind, fields):
            for index, entry in enumerate(self.entries):
                if event not in entry.on:
                    continue
                if event == "crash_loop" and not self._crash_loop(entry, fields):
                    continue
                now = self.clock()
                last = self._sent.get((index, event, key))
                if last is not None and now - last < entry.every_seconds:
                    continue  # told about this problem lately
                self._sent[(index, event, key)] = now
                task = asyncio.get_running_loop().create_task(
                    self._deliver(entry, {"event": event, **body}))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def _events(self, kind: str, fields: dict[str, Any]
                ) -> list[tuple[str, str, dict[str, Any]]]:
        """(event, the recurring problem it is about, what is told) for one publication."""
        if kind == "incident" and fields.get("fatal"):
            return [("fatal_incident", str(fields.get("signature")), dict(fields))]
        if kind == "launch" and fields.get("outcome") == "failed":
            source, launch = str(fields.get("source")), str(fields.get("id"))
            failures = self._failed.setdefault(source, deque(maxlen=1000))
            if launch not in {lid for _, lid in failures}:
                failures.append((self.clock(), launch))
            return [("crash_loop", source, {
                "source": source, "launch": launch, "root_cause": fields.get("root_cause"),
                "failed_before": fields.get("failed_before")})]
        if kind == "action":
            return [("relaunch", f"{fields.get('id')}:{fields.get('state')}", dict(fields))]
        return []

    def _crash_loop(self, entry: NotifyConfig, fields: dict[str, Any]) -> bool:
        window = entry.crash_loop_minutes * 60
        now = self.clock()
        recent = [t for t, _ in self._failed.get(str(fields.get("source")), ())
                  if now - t <= window]
        return len(recent) >= entry.crash_loop_launches

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
