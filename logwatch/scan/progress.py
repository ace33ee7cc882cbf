"""A progress bar on stderr, shown only on a terminal and only once a scan runs a while."""

from __future__ import annotations

import os
import time
from typing import TextIO

from logwatch.core.safe_text.visible import visible

SHOW_AFTER_S = 2.0  # quick scans stay quiet; LOGWATCH_PROGRESS_AFTER overrides (seconds)


class Progress:
    """A one-line bar redrawn in place at most ten times a second; erased when done."""

    def __init__(self, stream: TextIO, label: str, width: int = 30) -> None:
        self.stream = stream
        self.label = visible(label)  # a file name may hold control characters
        self.width = width
        self.enabled = stream.isatty()
        self.show_after = float(os.environ.get("LOGWATCH_PROGRESS_AFTER", SHOW_AFTER_S))
        self.started = time.monotonic()
        self.shown = False
        self._last_draw = 0.0

    def update(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.started < self.show_after or now - self._last_draw < 0.1:
            return
        self._last_draw = now
        self.shown = True
        elapsed = now - self.started
        rate = done / elapsed / 1e6 if elapsed > 0 else 0.0
        if total > 0:
            frac = min(done / total, 1.0)
            filled = int(frac * self.width)
            bar = "█" * filled + "░" * (self.width - filled)
            eta = (total - done) / (done / elapsed) if done else 0.0
            text = f"\r{self.label} {bar} {frac:6.1%} {rate:7.1f} MB/s  eta {eta:4.0f}s"
        else:
            text = f"\r{self.label} {done / 1e6:10.1f} MB {rate:7.1f} MB/s"
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
