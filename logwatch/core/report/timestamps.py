"""One way a time from the history is written, whichever path answered (the file read
directly, the daemon's socket, JSON, CSV, a table, the TUI): `YYYY-MM-DD HH:MM:SS`, with
microseconds when the time has them, and a date as `YYYY-MM-DD`."""

from __future__ import annotations

from datetime import date, datetime


def written(value: datetime | date) -> str:
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return value.isoformat()
