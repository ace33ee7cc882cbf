"""The findings of a relaunched launch, as the daemon reads them: a relaunch is verified on
what the daemon itself reads from the target's output, not on a second reader.

`begin(source)` is called (from the action's thread) right after the executor restarted the
target: the source's launches known by then are the ones before the relaunch, and lines of
theirs that arrive late are left out. Findings placed in any later launch of the source
are the relaunch's. `observe` is the event loop's (the daemon calls it for every finding it
places); `seen` is the action thread's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from logwatch.core.signatures.findings import Finding

KNOWN_KEPT = 64  # launch ids remembered per source (a few restarts are plenty)
WATCHED_KEPT = 100_000  # findings kept per watch (a relaunch that floods is judged on these)


class LaunchWatch:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[str, list[str]] = {}  # source -> launch ids, oldest first
        self._before: dict[str, frozenset[str]] = {}  # watched source -> launches before
        self._seen: dict[str, list[Finding]] = {}  # watched source -> the relaunch's

    def observe(self, source: str, placed: Iterable[tuple[Finding, str]]) -> None:
        """Findings placed in launches (finding, launch id), in the order read."""
        with self._lock:
            known = self._known.setdefault(source, [])
            before = self._before.get(source)
            for finding, launch in placed:
                if (not known or known[-1] != launch) and launch not in known:
                    known.append(launch)
                    del known[:-KNOWN_KEPT]
                if before is not None and launch not in before:
                    seen = self._seen[source]
                    if len(seen) < WATCHED_KEPT:
                        seen.append(finding)

    def begin(self, source: str) -> None:
        """The target was just restarted: what comes in new launches from now is watched."""
        with self._lock:
            self._before[source] = frozenset(self._known.get(source, ()))
            self._seen[source] = []

    def seen(self, source: str) -> list[Finding]:
        with self._lock:
            return list(self._seen.get(source, ()))

    def end(self, source: str) -> None:
        with self._lock:
            self._before.pop(source, None)
            self._seen.pop(source, None)
