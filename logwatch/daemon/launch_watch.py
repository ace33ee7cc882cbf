"""The findings of a relaunched launch, as the daemon reads them: a relaunch is verified on
what the daemon itself reads from the target's output, not on a second reader.

`begin(source)` is called (from the action's thread) right after the executor restarted the
target: the source's launches known by then are the ones before the relaunch, and lines of
theirs that arrive late are left out. Findings placed in any later launch of the source
are the relaunch's. `observe` is the event loop's (the daemon calls it for every finding it
places); `seen` is the action thread's.

A relaunch that was judged and did not stand (rolled back, escalated) is remembered after the
watch ends: the first launch after the restart is that relaunch, whose failure its action has
already answered, even when the daemon reads the end of it only after the action closed (a
journal read late). Restarts are held during an action, so that launch is the first new one;
the next (the rollback's) is a failure like any other.
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
        self._judged: dict[str, frozenset[str]] = {}  # source -> launches before a relaunch
        # that did not stand

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
            self._judged.pop(source, None)

    def seen(self, source: str) -> list[Finding]:
        with self._lock:
            return list(self._seen.get(source, ()))

    def end(self, source: str, stood: bool = True) -> None:
        """The action is over; `stood`: False when its relaunch was judged and did not stand
        (its failure answered by the action, see the module docstring)."""
        with self._lock:
            before = self._before.pop(source, None)
            self._seen.pop(source, None)
            if not stood and before is not None:
                self._judged[source] = before

    def answered(self, source: str, launch: str) -> bool:
        """Whether `launch` is a relaunch that did not stand: the first launch of the source
        after the restart of an action that ended so."""
        with self._lock:
            before = self._judged.get(source)
            if before is None:
                return False
            new = [known for known in self._known.get(source, ()) if known not in before]
            return new[:1] == [launch]
