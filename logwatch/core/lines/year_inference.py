"""Give a year to timestamps that lack one (vLLM's `MM-DD HH:MM:SS`, journald's short format).

A line is written before it is read, so the year is the latest one that does not put the
moment after the reference time (an outer timestamp, the reception time, or a file's
modification time), give or take a day of clock and timezone skew. That handles New Year: a
`12-31 23:59` line read on January 1st belongs to the year before.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

SKEW = timedelta(days=1)  # timezones and clocks differ between vLLM and the reader


def closest_datetime(
    month: int, day: int, hour: int, minute: int, second: int, reference: datetime
) -> datetime | None:
    """The latest datetime with these fields that is not after `reference` (plus skew)."""
    for year in range(reference.year + 1, reference.year - 5, -1):  # Feb 29: back to a leap year
        try:
            candidate = datetime(year, month, day, hour, minute, second)
        except ValueError:  # Feb 29 outside a leap year, or fields out of range
            continue
        if candidate <= reference + SKEW:
            return candidate
    return None


@lru_cache(maxsize=4096)  # a busy log repeats each second's stamp on many lines
def parse_vllm_time(text: str, reference: datetime) -> datetime | None:
    """Parse vLLM's `MM-DD HH:MM:SS` against a reference time."""
    try:
        month, day = int(text[0:2]), int(text[3:5])
        hour, minute, second = int(text[6:8]), int(text[9:11]), int(text[12:14])
    except ValueError:
        return None
    return closest_datetime(month, day, hour, minute, second, reference)
