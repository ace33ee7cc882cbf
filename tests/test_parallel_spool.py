"""The spool between the two processes of `scan --jobs 2` (scan/parallel.py): the parent
takes in the child's findings while the child still scans, frame by frame, and a child that
ends without its last frame is an error, never a short report."""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from typing import IO, Any

import pytest

from logwatch.scan import parallel


def _child(spool: IO[bytes], go_on: Any, cut_frame: bool, last: bool) -> None:
    parallel._frame(spool, ("cut", 2))
    parallel._frame(spool, ("findings", [("one",)]))
    go_on.wait(30)  # the parent must read the two frames before this one goes on
    if cut_frame:  # a frame half written, as a child killed in the middle of a write leaves
        spool.write(parallel._LENGTH.pack(1000) + b"\x80")
        spool.flush()
    if last:
        parallel._frame(spool, ("stats", None, {}, {}))
    os._exit(0 if last else 3)


@pytest.mark.parametrize(("cut_frame", "last"), [(False, True), (False, False), (True, False)])
def test_frames_are_read_as_written_and_a_missing_end_is_an_error(cut_frame: bool,
                                                                   last: bool) -> None:
    context = multiprocessing.get_context("fork")
    go_on = context.Event()
    with tempfile.TemporaryFile() as spool:
        child = context.Process(target=_child, args=(spool, go_on, cut_frame, last))
        child.start()
        try:
            frames = parallel._frames(spool, child)  # type: ignore[arg-type]
            assert next(frames) == ("cut", 2)
            assert next(frames) == ("findings", [("one",)])
            assert child.is_alive()  # read while the child still works
            go_on.set()
            if last:
                assert next(frames) == ("stats", None, {}, {})
                assert list(frames) == []
            else:
                with pytest.raises(OSError, match="second half failed"):
                    next(frames)
        finally:
            go_on.set()
            child.join(30)
