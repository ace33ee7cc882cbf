"""What the daemon says of itself: its status (`logwatch status`), each configured source's
state, the signatures it has loaded and how far file sources are behind their writers.

Functions over the daemon's state as it is now; the judgement of a source's state is
source_states.judge's, over what is observed here.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Mapping, Sequence, Sized
from dataclasses import replace
from typing import Any, Protocol

from logwatch import __version__
from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from logwatch.daemon.library_reload import LibraryReload
from logwatch.daemon.live_launches import LiveLaunches
from logwatch.daemon.protocol.base import PROTOCOL_VERSION
from logwatch.daemon.relaunches import Relaunches
from logwatch.daemon.scan_streams import Stream
from logwatch.daemon.source_states import Observed, judge
from logwatch.daemon.writes import Writes
from logwatch.sources.base import Source
from logwatch.store.live import Checkpoint


class Seen(Protocol):
    """What the status reads of the daemon, and nothing more."""

    events: list[str]  # what the operator should know

    @property
    def started(self) -> float: ...  # monotonic

    @property
    def sources(self) -> Sequence[Source]: ...  # as configured

    @property
    def resume(self) -> Mapping[str, Checkpoint]: ...  # the positions read to before the start

    @property
    def streams(self) -> Mapping[str, Stream]: ...

    @property
    def read_positions(self) -> Mapping[str, tuple[str, int]]: ...  # file sources

    @property
    def lines(self) -> int: ...

    @property
    def library_reload(self) -> LibraryReload: ...

    @property
    def launches(self) -> LiveLaunches: ...

    @property
    def writes(self) -> Writes: ...

    @property
    def committed(self) -> int: ...

    @property
    def pending(self) -> Sized: ...

    @property
    def relaunches(self) -> Relaunches | None: ...

    @property
    def scan_failures(self) -> Mapping[str, int]: ...  # source -> slices passed over


def lag_bytes(read_positions: Mapping[str, tuple[str, int]]) -> dict[str, int]:
    """How far each file source is behind its writer (bytes not read yet)."""
    lag = {}
    for source, (path, offset) in read_positions.items():
        with contextlib.suppress(OSError):
            lag[source] = max(0, os.stat(path).st_size - offset)
    return lag


def _observe(seen: Seen, source: Any) -> list[Observed]:
    """What status says of a configured source (a glob: itself, then each file)."""
    from logwatch.sources.files import FileSource
    from logwatch.sources.globbed import GlobSource
    from logwatch.sources.process import ProcessSource

    stream = seen.streams.get(source.name)
    idle = None if stream is None else time.monotonic() - stream.last_data
    if isinstance(source, GlobSource):
        return [Observed(source.name, "glob", source.pattern, matched=len(source.files)),
                *(o for f in list(source.files.values()) for o in _observe(seen, f))]
    if isinstance(source, FileSource):
        try:
            st = os.stat(source.path)
        except OSError:
            st = None
        read = seen.read_positions.get(source.name)
        checkpoint = seen.resume.get(source.stream) or seen.resume.get(source.name)
        read_to = (read[1] if read is not None
                   else checkpoint.offset if checkpoint is not None else None)
        regular = st is not None and stat.S_ISREG(st.st_mode)
        return [Observed(source.name, "file", str(source.path), exists=st is not None,
                         refused=source.refused or (None if regular or st is None
                                                    else "not a regular file"),
                         size=st.st_size if regular and st else None, read_to=read_to,
                         idle_s=idle, writes_behind=not seen.writes.room.is_set())]
    if isinstance(source, ProcessSource):
        return [Observed(source.name, "run", running=source.running(),
                         returncode=source.returncode, idle_s=idle)]
    kind = "journal" if hasattr(source, "selector") else "stdin"
    return [Observed(source.name, kind, idle_s=idle)]


def source_states(seen: Seen) -> list[dict[str, Any]]:
    """Every configured source with its state (source_states.judge), and what was read
    of it since the daemon started."""
    held = seen.writes.state().get("writable") is False
    out = []
    for observed in (o for s in seen.sources for o in _observe(seen, s)):
        observed = replace(observed, crash_loop=seen.launches.crash_loop(observed.name))
        stream = seen.streams.get(observed.name)
        out.append({"name": observed.name, "kind": observed.kind,
                    **({"path": observed.path} if observed.path else {}),
                    **judge(observed, held, seen.writes.quarantined.get(observed.name)),
                    "generation": stream.generation if stream else None,
                    "next_line": stream.next_line if stream else 0,
                    "idle_s": None if observed.idle_s is None else round(observed.idle_s, 1),
                    "vllm_output": observed.name in seen.launches.recognised})
    return out


def daemon_status(seen: Seen) -> dict[str, Any]:
    """The `status` answer: the daemon, its database, sources, launches and relaunches."""
    sources = source_states(seen)
    followed = {source["name"] for source in sources}
    return {
        "version": __version__, "protocol": PROTOCOL_VERSION,
        "library": seen.library_reload.library.version,
        "reloading": seen.library_reload.running,
        "lines": seen.lines,
        "findings_recorded": seen.committed, "pending": len(seen.pending),
        "uptime_s": round(time.monotonic() - seen.started, 1),
        "database": seen.writes.state(),
        "sources": sources,
        # the launches of what this daemon follows (a history also holds scans' and
        # earlier configurations' sources, which are not its to judge)
        "launches": [launch for launch in seen.launches.status()
                     if launch["source"] in followed],
        "failed_launches": seen.launches.failed,
        "last_failure": seen.launches.last_failure,
        "events": seen.events[-10:],
        # slices a fault of logwatch's scan passed over, per source (none: {})
        "scan_failures": dict(seen.scan_failures),
        **({"relaunch": seen.relaunches.status()} if seen.relaunches is not None else {}),
    }


def signature_states(library: Library, matcher: Matcher) -> dict[str, Any]:
    """The library loaded now, one entry per signature (the `signatures` request)."""
    disabled = matcher.disabled
    return {"library": library.version,
            "signatures": [{"id": s.id, "version": s.version, "status": s.status,
                            "severity": s.severity, "fatal": s.fatal,
                            "category": s.category, "title": s.title, "path": s.path,
                            "disabled": disabled.get(s.id)}
                           for s in library.signatures]}
