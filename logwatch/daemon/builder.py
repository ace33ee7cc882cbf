"""The daemon's sources, built from its flags and configured targets, each starting where
the stream it reads was committed.

Positions are looked up by stream (a path, a journal), not by the name the source was given,
so a source renamed, or moved from the command line into a configured target, goes on where
it stopped. A position an older version stored under the source's name is used when its
stream has none yet; the next commit stores it by stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from logwatch.core.settings.config import TargetConfig, is_glob
from logwatch.daemon.config_file import source_for
from logwatch.sources.base import Source, source_name
from logwatch.sources.files import FilePosition, FileSource
from logwatch.sources.globbed import GlobSource
from logwatch.sources.journald import JournalSource
from logwatch.sources.stdin import StdinSource
from logwatch.store.live import Checkpoint


@dataclass(frozen=True, slots=True)
class SourceFlags:
    """The sources named on the command line."""

    files: Sequence[str] = ()  # paths or globs
    journals: Sequence[Sequence[str]] = ()  # journalctl selectors, e.g. ["-u", "vllm.service"]
    stdin: bool = False
    poll_interval: float = 1.0
    use_inotify: bool = True
    start_at: str = "start"  # "end": a first run skips what is there now; "oldest": it
    # reads a file's rotated predecessors first


def build_sources(flags: SourceFlags, targets: Sequence[TargetConfig],
                  points: Mapping[str, Checkpoint]) -> list[Source]:
    """Every source the daemon follows, flags first, then configured targets, each given its
    stream's committed position."""
    sources: list[Source] = []
    for path in flags.files:
        if is_glob(path):
            sources.append(GlobSource(path, poll_interval=flags.poll_interval,
                                      use_inotify=flags.use_inotify, start_at=flags.start_at))
        else:
            sources.append(FileSource(path, name=source_name(f"file:{Path(path).resolve()}"),
                                      poll_interval=flags.poll_interval,
                                      use_inotify=flags.use_inotify, start_at=flags.start_at))
    sources += [JournalSource(list(selector), start_at=flags.start_at)
                for selector in flags.journals]
    if flags.stdin:
        sources.append(StdinSource())
    sources += [source_for(target) for target in targets]
    resume_sources(sources, points)
    return sources


def resume_sources(sources: Sequence[Source], points: Mapping[str, Checkpoint]) -> None:
    """Give every file, glob and journal source its stream's committed position. A pipe or
    a child is a new stream on every run: nothing to resume."""
    file_points = {key: FilePosition(p.generation, p.offset, p.line)
                   for key, p in points.items() if p.cursor is None}
    for source in sources:
        if isinstance(source, GlobSource):
            source.resume = file_points  # looked up per file as it is matched
        elif isinstance(source, FileSource):
            position = file_points.get(source.stream) or file_points.get(source.name)
            if position is not None:
                source.resume = position
        elif isinstance(source, JournalSource):
            point = points.get(source.stream) or points.get(source.name)
            if point is not None and point.cursor is not None:
                source.cursor, source.offset = point.cursor, point.offset
