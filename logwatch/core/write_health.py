"""Whether the history can be written, and when to try again after it could not.

The daemon's commits fail when the disk is full or the file cannot be written. What to keep
and how to retry is the daemon's; this is the state it reports: the error, since when, how
many tries failed, and when the next one is due (0.5 s after the first failure, twice as
long after each further one, at most `max_delay`). Times are the caller's monotonic clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FIRST_DELAY = 0.5


@dataclass(slots=True)
class WriteHealth:
    max_delay: float = 30.0
    error: str | None = None  # why the last commit failed; None: the last one landed
    failures: int = 0  # in a row
    since: float = 0.0  # the first failure of this run
    retry_at: float = 0.0

    @property
    def writable(self) -> bool:
        return self.error is None

    def failed(self, error: str, now: float) -> float:
        """A commit failed: the delay before the next try."""
        if self.error is None:
            self.since = now
        self.failures += 1
        self.error = error
        delay: float = min(self.max_delay, FIRST_DELAY * 2.0 ** (self.failures - 1))
        self.retry_at = now + delay
        return delay

    def landed(self, now: float) -> tuple[float, int] | None:
        """A commit landed: (seconds unwritable, failed tries) if it had been failing."""
        if self.error is None:
            return None
        outage = (now - self.since, self.failures)
        self.error, self.failures = None, 0
        return outage

    def waiting(self, now: float) -> bool:
        """Whether the next try is not due yet."""
        return self.error is not None and now < self.retry_at

    def state(self, now: float) -> dict[str, Any]:
        """For `status`: writable, or the error with its tries and age."""
        if self.error is None:
            return {"writable": True}
        return {"writable": False, "error": self.error, "failed_tries": self.failures,
                "since_s": round(now - self.since, 1)}
