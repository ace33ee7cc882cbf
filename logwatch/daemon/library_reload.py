"""The library in force and its reload: loaded and checked again off the loop, swapped in on
it, the running one kept on any problem; and the signatures the matcher gives up on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from logwatch.core.safe_text.visible import visible
from logwatch.core.signatures.library import Library, LibraryError
from logwatch.core.signatures.matcher import Matcher
from logwatch.core.signatures.signature import Signature
from logwatch.daemon.notify import Notifier
from logwatch.daemon.scan_streams import ScanStreams
from logwatch.store.live import LiveWriter


class Reloaded(Protocol):
    """What a reload tells, and swaps the new library into, in the rest of the daemon."""

    events: list[str]  # what the operator should know
    log: Any
    notifier: Notifier

    @property
    def control(self) -> Any: ...  # a ControlServer, when a socket is configured

    @property
    def writer(self) -> LiveWriter: ...

    @property
    def scan_streams(self) -> ScanStreams: ...


class LibraryReload:
    def __init__(self, library: Library, load: Callable[[], Library] | None,
                 told: Reloaded) -> None:
        """`load`: loads and checks the library again (None: it is never reloaded)."""
        self.library = library
        self.load = load
        self.told = told
        self._reloading: asyncio.Task[None] | None = None  # the reload running, if any
        self._reload_again = False  # asked for while it runs: one more after it

    @property
    def running(self) -> bool:
        return self._reloading is not None

    def reload(self) -> None:
        """Load and check the library again off the loop (in a child process with a deadline:
        a hostile signature cannot stall ingestion), then swap it in on the loop; keep the
        running one on any problem. Requests while a reload runs make one more after it."""
        if self.load is None:
            return
        if self._reloading is not None:
            self._reload_again = True
            return
        self._reload_again = False
        self._reloading = asyncio.get_running_loop().create_task(self._reload())

    async def _reload(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    library, matcher = await loop.run_in_executor(None, self._load_library)
                except (LibraryError, OSError) as exc:
                    self._refuse_library(exc)
                else:
                    self._swap_library(library, matcher)
                if not self._reload_again:
                    return
                self._reload_again = False
        finally:
            self._reloading = None

    def _load_library(self) -> tuple[Library, Matcher]:
        """In a worker thread: the bounded load, and compiling what it checked."""
        assert self.load is not None
        library = self.load()
        matcher = Matcher(library.signatures, on_disable=self.signature_disabled,
                          vocabulary=library.vocabulary)
        matcher.warm()  # here, not on the loop at the first finding after the swap
        return library, matcher

    def _refuse_library(self, exc: LibraryError | OSError) -> None:
        told = self.told
        told.events.append(f"reload refused, keeping library {self.library.version}: {exc}")
        told.log.error("reload_refused", library=self.library.version,
                       problems=str(exc).splitlines()[:20])
        told.notifier.status("reload refused: " + visible(str(exc).splitlines()[0][:120]))
        if told.control is not None:
            told.control.publish("library", loaded=False, version=self.library.version,
                                 error=str(exc)[:4000])

    def _swap_library(self, library: Library, matcher: Matcher) -> None:
        """Scanners built from now on use the new library."""
        told = self.told
        self.library = library
        told.writer.library = library
        told.scan_streams.use(matcher)  # settle, then new scanners
        told.events.append(f"library {library.version} loaded")
        if told.control is not None:
            told.control.publish("library", loaded=True, version=library.version,
                                 signatures=len(library.signatures))
        told.log.info("library_loaded", library=library.version,
                      signatures=len(library.signatures))

    def signature_disabled(self, signature: Signature, reason: str) -> None:
        """The matcher gave up on a signature that kept running over its budget."""
        told = self.told
        told.events.append(f"signature {signature.id} ({signature.path}) disabled: {reason}")
        told.log.warning("signature_disabled", signature=signature.id, path=signature.path,
                         reason=reason)
        if told.control is not None:
            told.control.publish("signature_disabled", signature=signature.id,
                                 path=signature.path, reason=reason)
