"""What each configured source is doing, in the operator's words (`logwatch status`): a pure
judgement over what the daemon observed of it, so every state is testable without a clock.

- following   everything written has been read (a line still being written aside);
- catching up reading a backlog, with how far along it is (at the pace of the writes, when
              they hold reading back);
- lagging     behind its writer and not reading;
- missing     nothing at the path yet (a file, or a glob matching nothing);
- unreadable  something is there that is not read (a directory, a FIFO, no permission);
- held        the history cannot be written: reading waits for room (a record the history
              refuses for what it holds does not hold a source: it is quarantined, counted
              and said in the detail, and reading goes on);
- crash_loop  read and up to date or not, the program behind it keeps failing: so many of
              its launches failed within a few minutes, none serving since;
- running / exited   the child of `logwatch run`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RECENT_SECONDS = 2.0  # data read this recently: the reader is moving
PARTIAL_LINE_BYTES = 1 << 16  # this little behind and still: a line still being written


@dataclass(frozen=True, slots=True)
class Observed:
    """One source as the daemon sees it now (None: does not apply, or not known yet)."""

    name: str
    kind: str  # file | glob | journal | run | stdin
    path: str | None = None  # file: the path followed; glob: the pattern
    exists: bool | None = None  # file: a file at the path; glob: any match
    refused: str | None = None  # file: why what is at the path is not read
    size: int | None = None  # file: bytes at the path now
    read_to: int | None = None  # file: bytes read of it (this run, else the checkpoint)
    idle_s: float | None = None  # seconds since data was last read (None: none this run)
    matched: int | None = None  # glob: files followed
    returncode: int | None = None  # run: the child's status once it ended
    running: bool | None = None  # run: a child is running
    writes_behind: bool = False  # reading waits for the history's writes to make room
    crash_loop: dict[str, Any] | None = None  # its launches' loop: {"failed", "minutes"}


def _size(n: int) -> str:
    if n < 1024:
        return f"{n:,} bytes"
    scaled = n / 1024
    for unit in ("KiB", "MiB"):
        if scaled < 1024:
            return f"{scaled:.1f} {unit}"
        scaled /= 1024
    return f"{scaled:.1f} GiB"


def judge(o: Observed, held: bool, quarantined: tuple[int, int] | None = None
          ) -> dict[str, Any]:
    """`state`, `detail` (a phrase for the operator), for a file `behind_bytes` (bytes at
    the path not read yet) and, catching up, `progress` (0..1 of the file read). `held`: the
    history is not writable now, so readers wait. `quarantined`: (how many, the last line)
    of the records the history refused for their content, which reading went on past: said
    in `quarantined` and at the end of the detail, whatever the state."""
    state = _state(o, held)
    if quarantined:
        count, line = quarantined
        said = (f"{count} record{'s' if count != 1 else ''} quarantined, "
                f"{'the last ' if count != 1 else ''}at line {line}")
        state["quarantined"] = {"records": count, "last_line": line, "detail": said}
        state["detail"] = f"{state['detail']}; {said}"
    return state


def _state(o: Observed, held: bool) -> dict[str, Any]:
    moving = o.idle_s is not None and o.idle_s < RECENT_SECONDS
    if o.kind == "run":
        if o.running:
            return {"state": "running", "detail": "the child is running"}
        if o.returncode is not None:
            return {"state": "exited", "detail": f"the child exited with {o.returncode}"}
        return {"state": "starting", "detail": "the child is starting"}
    if o.kind == "glob":
        if not o.matched:
            return {"state": "missing", "detail": f"no file matches {o.path} yet"}
        return {"state": "following", "detail": f"{o.matched} file(s) match"}
    if o.kind == "file":
        if o.refused:
            return {"state": "unreadable", "detail": o.refused}
        if not o.exists:
            return {"state": "missing", "detail": f"waiting for {o.path} to appear"}
    if held:
        return {"state": "held", "detail": "the history is not writable: reading waits "
                                           "until a commit succeeds"}
    if o.crash_loop:  # the program's state first; how far it is read stays said
        reading = _reading(o, moving)
        return {**reading, "state": "crash_loop", "reading": reading["state"],
                "detail": f"{o.crash_loop['failed']} launches failed in the last "
                          f"{o.crash_loop['minutes']:g} min, none serving since; "
                          f"{reading['detail']}"}
    return _reading(o, moving)


def _reading(o: Observed, moving: bool) -> dict[str, Any]:
    """How far a source that can be read is read: catching up, lagging or following."""
    if o.kind == "file" and o.size is not None:
        if o.read_to is not None and o.read_to > o.size and moving:  # not this file's offset
            return {"state": "catching_up", "detail": "reading an earlier (rotated) "
                                                      f"generation, then {_size(o.size)} here"}
        behind = max(0, o.size - (o.read_to or 0))
        if behind and (moving or o.writes_behind) and o.read_to is not None:
            progress = o.read_to / o.size if o.size else 1.0
            pace = ", waiting for the history's writes" if o.writes_behind else ""
            return {"state": "catching_up", "behind_bytes": behind,
                    "progress": round(progress, 4),
                    "detail": f"{progress:.0%} of {_size(o.size)} read, "
                              f"{_size(behind)} to go{pace}"}
        if behind > PARTIAL_LINE_BYTES or (behind and o.read_to is None):
            return {"state": "lagging", "behind_bytes": behind,
                    "detail": f"{_size(behind)} behind its writer, not reading"}
        return {"state": "following", "detail": "up to date", "behind_bytes": behind}
    return {"state": "following", "detail": "up to date"}
