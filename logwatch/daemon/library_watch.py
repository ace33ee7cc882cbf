"""Reload the signature library when a signature directory changes (inotify via watchdog).

Editors save in bursts (temporary file, rename, chmod): changes are gathered for `settle`
seconds, then the daemon's reload runs once on its loop; it validates the new library and
runs every example before swapping, and keeps the running one on any failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

SETTLE_SECONDS = 1.0


class LibraryWatch:
    def __init__(self, directories: Sequence[Path], reload: Callable[[], None],
                 loop: asyncio.AbstractEventLoop, settle: float = SETTLE_SECONDS) -> None:
        self.directories = [d for d in directories if d.is_dir()]
        self.reload = reload
        self.loop = loop
        self.settle = settle
        self._timer: asyncio.TimerHandle | None = None
        self._observer: Any = None

    def _changed(self) -> None:  # on the loop
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_later(self.settle, self.reload)

    def start(self) -> bool:
        """Watch; False when inotify is not available (SIGHUP still reloads)."""
        try:
            from watchdog.events import FileSystemEvent, FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:
            return False
        watch = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                paths = [event.src_path, getattr(event, "dest_path", "")]
                if event.event_type in ("opened", "closed_no_write"):
                    return
                if any(str(p).endswith(".toml") for p in paths) or event.is_directory:
                    watch.loop.call_soon_threadsafe(watch._changed)

        try:
            observer = Observer()
            for directory in self.directories:
                observer.schedule(Handler(), str(directory), recursive=True)
            observer.start()
        except OSError:
            return False
        self._observer = observer
        return True

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
