"""Where each source starts: the committed position of the stream it reads.

Positions are looked up by stream (a path, a journal), not by the name the source was given,
so a source renamed, or moved from the command line into a configured target, goes on where
it stopped. A position an older version stored under the source's name is used when its
stream has none yet; the next commit stores it by stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from logwatch.sources.base import Source
from logwatch.sources.files import FilePosition, FileSource
from logwatch.sources.globbed import GlobSource
from logwatch.sources.journald import JournalSource
from logwatch.store.live import Checkpoint


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
