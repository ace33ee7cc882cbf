"""vLLM's request-lifecycle lines, known whole from their raw bytes: no finding can come of them.

A serving vLLM prints a line for every request it receives, answers or aborts, and a user's
prompt printed there holds any word (`error`, `failed`, a quoted traceback). Those lines share
literals with signatures (`Aborted`, `error`), and on real traffic they are almost every
prefilter hit: 99.8% on the shared yardstick's gigabyte. Each hit would otherwise cost the
whole per-hit path (the line parsed, its record assembled, the patterns tried) for nothing.

`is_benign(buf, start)` says, from the bytes at a line's start, that the line is one of these
families, printed by vLLM's own logger and complete (its newline is there):

- `Received request ID: ...`, `Generated response ID...` (the request logger, any level), and
  at DEBUG `Request ID details: prompt: ` / `JSON body: `: the matcher drops a record whose
  message starts so (what a user typed is not vLLM's state), and such a line starts its
  record: a logger's record goes on only with indented or traceback lines.
- `Aborted request ID.`, `Aborted request(s) ID,ID.`, `Added request ID.` at INFO: an INFO
  record of one line whose text matches no signature, and INFO is not an error the fallback
  reads. The ids are one word each (no space), so no pattern finds its words in them.

The header is the modern one, `(Name pid=N) LEVEL MM-DD HH:MM:SS [file:line] `, or the same
without the process prefix; a line in any other form (a container's prefix, colour codes)
is not vouched for and takes the full path, as before. tests/test_benign_lines.py checks that
no signature example and no sample line that gives a finding is one of these, and that the
shared generator's serving log gives what the per-line pipeline gives; the dense log of
tests/test_fast_path_equivalence.py mixes them in with their look-alikes.
"""

from __future__ import annotations

import re


def logger_header(levels: bytes, writer: bool = False) -> bytes:
    """The modern logger header as a bytes regex: `(Name pid=N) LEVEL MM-DD HH:MM:SS
    [file:line] `, the process prefix optional; `writer`: that prefix is group `writer`."""
    return (rb"(?" + (rb"P<writer>" if writer else rb":") + rb"\([A-Za-z_][\w.-]* pid=\d+\) )?(?:"
            + levels + rb") \d\d-\d\d \d\d:\d\d:\d\d \[[\w.-]+:\d+\] ")


# No bounded repeats and no lookaround: matched at a line's start, it gives up after a line.
BENIGN = re.compile(
    rb"(?:" + logger_header(rb"DEBUG|INFO|WARNING|ERROR")
    + rb"(?:Received request |Generated response |Request [^\s]+ "
    rb"(?:details: prompt: |JSON body: ))[^\n]*"
    rb"|" + logger_header(rb"INFO") + rb"(?:Aborted request(?:\(s\))? |Added request )"
    + rb"[^\s,]+(?:,[^\s,]+)*\.)\r?\n")


def is_benign(buf: bytes, start: int) -> bool:
    """Whether the line starting at `start` in `buf` is a complete request-lifecycle line."""
    return BENIGN.match(buf, start) is not None
