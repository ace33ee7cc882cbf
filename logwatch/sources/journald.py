"""Follow journald through `journalctl <selector> -f -o json --all --no-pager`.

MESSAGE arrives as text, as an array of byte values (ESC, invalid UTF-8, or binary), or null
(over the field size limit); each entry's __CURSOR is kept so the daemon checkpoints whole
entries. A cursor journalctl rejects falls back to the time inside the cursor (t=...) and is
reported; a journalctl that dies is restarted with backoff, after the last cursor seen.

The stream is what the selector reads, not what the source is called: the units (named as
systemd names them, `vllm` being `vllm.service`) with their scope (system, or the user whose
`--user-unit`), on this machine (its machine id); or the journal file or directory (resolved).
It is also the generation in finding ids, so following the same journal under another name
neither reads it again nor records anything twice.

The unit's manager writes into the same selection when the unit's main process ends (systemd's
"Main process exited, code=exited, status=1/FAILURE", with the fields EXIT_CODE and
EXIT_STATUS): each such entry is handed on as an `Exit` after its line, so the launch in force
there gets its exit status. Those fields can be set by any process that logs, so only an entry
with the manager's message id, about the unit vLLM's lines come from, and not written from
inside that unit (journald's own `_SYSTEMD_UNIT`/`_SYSTEMD_USER_UNIT` say where an entry came
from) is an exit; a journal file's other units' exits are not vLLM's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from logwatch.sources.base import Chunk, Exit

MAX_ENTRIES_PER_CHUNK = 2000
BACKOFF_S = (1.0, 2.0, 5.0, 15.0, 30.0)
_CURSOR_TIME = re.compile(r"(?:^|;)t=([0-9a-f]+)(?:;|$)")
UNIT_SUFFIXES = (".service", ".socket", ".target", ".device", ".mount", ".automount", ".swap",
                 ".timer", ".path", ".slice", ".scope")
# systemd's SD_MESSAGE_UNIT_PROCESS_EXIT: "Main process exited, code=..., status=..."
PROCESS_EXIT_MESSAGE_ID = "98e322203f7a4ed290d09fe03c09fe15"
# how systemd judges a service's end: exit 0, or one of these signals (SuccessExitStatus=)
CLEAN_SIGNALS = frozenset({1, 2, 13, 15})  # SIGHUP, SIGINT, SIGPIPE, SIGTERM
MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
_SELECTOR_KEYS = {"-u": "unit", "--unit": "unit", "--user-unit": "user_unit",
                  "--file": "file", "-D": "directory", "--directory": "directory",
                  "--namespace": "namespace"}


def unit_name(name: str) -> str:
    """A unit as systemd names it: `vllm` is `vllm.service` (a pattern is left alone)."""
    if name.endswith(UNIT_SUFFIXES) or any(c in name for c in "*?["):
        return name
    return f"{name}.service"


def journal_stream(selector: Sequence[str], machine_id: str, uid: int) -> str:
    """The identity of what `selector` reads: `journal:machine=ID unit=vllm.service`,
    `journal:machine=ID user=1000 user_unit=vllm.service`, `journal:file=/abs/x.journal`.
    Paths are made absolute; the machine names the local journal (a file or directory is
    its own); arguments it does not know are kept as they are."""
    parts: set[str] = set()
    args = list(selector)
    i = 0
    while i < len(args):
        token = args[i]
        flag, eq, value = token.partition("=")
        key = _SELECTOR_KEYS.get(flag)
        if key is not None and not eq and i + 1 < len(args):  # `-u NAME`, not `-u=NAME`
            i += 1
            value = args[i]
        elif not eq:
            key = None
        i += 1
        if key is None:
            parts.add(token)
        elif key in ("unit", "user_unit"):
            parts.add(f"{key}={unit_name(value)}")
            if key == "user_unit":
                parts.add(f"user={uid}")
        elif key in ("file", "directory"):
            parts.add(f"{key}={os.path.abspath(value)}")
        else:
            parts.add(f"{key}={value}")
    if not any(p.startswith(("file=", "directory=")) for p in parts):
        parts.add(f"machine={machine_id}")
    return "journal:" + shlex.join(sorted(parts))


def machine_id() -> str:
    """This machine's id (what the local journal belongs to); "unknown" when none is set."""
    for path in MACHINE_ID_FILES:
        try:
            value = path.read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            continue
        if value:
            return value
    return "unknown"


def message_bytes(entry: dict[str, Any]) -> bytes | None:
    """MESSAGE as bytes: a string, a list of byte values, or None when journald omitted it."""
    message = entry.get("MESSAGE")
    if isinstance(message, str):
        return message.encode("utf-8", errors="surrogateescape")
    if isinstance(message, list) and all(isinstance(b, int) and 0 <= b < 256 for b in message):
        return bytes(message)
    return None


def unit_of(entry: dict[str, Any]) -> tuple[str, str] | None:
    """The unit a process's entry came from, as the manager's entries name it: ("UNIT",
    name) or ("USER_UNIT", name), from journald's own fields; None for an entry of no unit's
    process (the manager's own have no invocation id)."""
    if not isinstance(entry.get("_SYSTEMD_INVOCATION_ID"), str):
        return None
    for field in ("USER_UNIT", "UNIT"):
        name = entry.get(f"_SYSTEMD_{field}")
        if isinstance(name, str):
            return field, name
    return None


def main_process_exit(entry: dict[str, Any], unit: tuple[str, str] | None
                      ) -> tuple[int, bool] | None:
    """(status, clean) of the manager's entry saying the main process of `unit` (where
    vLLM's lines come from: `unit_of`) ended: the exit status, or minus the signal that
    killed it; None for any other entry, one about another unit, or one written from inside
    the unit itself."""
    if unit is None or entry.get("MESSAGE_ID") != PROCESS_EXIT_MESSAGE_ID:
        return None
    field, name = unit
    if entry.get(field) != name or entry.get(f"_SYSTEMD_{field}") == name:
        return None
    how, status = entry.get("EXIT_CODE"), entry.get("EXIT_STATUS")
    if not isinstance(how, str) or not isinstance(status, str) or not status.isdigit() \
            or len(status) > 3:
        return None
    number = int(status)
    if how == "exited":
        return number, number == 0
    if how in ("killed", "dumped"):
        return -number, how == "killed" and number in CLEAN_SIGNALS
    return None


def cursor_time_usec(cursor: str) -> int | None:
    m = _CURSOR_TIME.search(cursor)
    return int(m.group(1), 16) if m else None


class JournalSource:
    def __init__(self, selector: Sequence[str], name: str | None = None,
                 after_cursor: str | None = None, offset: int = 0,
                 journalctl: str = "journalctl", start_at: str = "start") -> None:
        """`selector`: journalctl arguments, e.g. ["-u", "vllm.service"] or ["--file", p].
        `start_at`: "end" makes a first run (no cursor) skip what the journal holds now;
        "start" and "oldest" read all of it (journalctl reads its archived files itself)."""
        self.selector = list(selector)
        self.name = name or "journal:" + " ".join(self.selector)
        self.stream = journal_stream(self.selector, machine_id(), os.getuid())
        self.cursor = after_cursor
        self.offset = offset  # bytes handed on so far in this generation
        self.journalctl = journalctl
        self.start_at = start_at
        self.events: list[str] = []
        self._invocation: str | None = None  # the unit invocation of the last entry read
        self._unit: tuple[str, str] | None = None  # the unit the last process entry came from
        self._process: asyncio.subprocess.Process | None = None
        self._since_usec: int | None = None

    @property
    def generation(self) -> str:
        return self.stream

    def command(self) -> list[str]:
        # --boot=all: -f alone keeps to this boot, refusing journals copied from another host
        # and hiding a failure logged before a reboot
        cmd = [self.journalctl, *self.selector, "-f", "-o", "json", "--all", "--no-pager",
               "--boot=all"]
        if self.cursor:
            cmd.append(f"--after-cursor={self.cursor}")
        elif self._since_usec is not None:
            cmd.append(f"--since=@{self._since_usec // 1_000_000}")
        # every entry from there: with -f alone journalctl shows only the last 10 of those
        # written since (a first run, or a restart after a busy while), then waits
        cmd.append("--no-tail")
        return cmd

    async def close(self) -> None:
        """Stop journalctl; the reading generator reaps it (one waiter per child)."""
        if self._process is not None and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.terminate()

    async def _last_cursor(self) -> str | None:
        """The cursor of the newest entry the selector matches now (None: no entry)."""
        process = await asyncio.create_subprocess_exec(
            self.journalctl, *self.selector, "-n", "1", "-o", "json", "--all", "--no-pager",
            "--boot=all", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        out, _ = await process.communicate()
        for raw in reversed(out.splitlines()):
            with contextlib.suppress(ValueError):
                entry = json.loads(raw)
                if isinstance(entry, dict) and isinstance(entry.get("__CURSOR"), str):
                    return str(entry["__CURSOR"])
        return None

    async def chunks(self) -> AsyncIterator[Chunk]:
        attempt = 0
        first = self.offset == 0
        if self.start_at == "end" and not self.cursor:
            self.cursor = await self._last_cursor()
            if self.cursor:  # nothing to match; a checkpoint after that entry anchors the start
                self.events.append("started at the end of the journal (after its newest entry)")
                yield Chunk(self.name, self.generation, b"", self.offset, True,
                            ((self.offset, self.cursor),), stream=self.stream)
                first = False
        while True:
            self._process = process = await asyncio.create_subprocess_exec(
                *self.command(), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, limit=16 << 20)
            assert process.stdout is not None
            got_any = False
            try:
                while True:
                    batch = await self._read_batch(process.stdout)
                    if batch is None:
                        break
                    data, marks, starts, exits = batch
                    got_any = True
                    yield Chunk(self.name, self.generation, data, self.offset, first,
                                tuple((self.offset + end, cursor) for end, cursor in marks),
                                launches=tuple(self.offset + at for at in starts),
                                stream=self.stream,
                                exits=tuple(Exit(self.offset + end, status, clean)
                                            for end, status, clean in exits))
                    self.offset += len(data)
                    first = False
            except BaseException:  # stopped or cancelled: end journalctl, reap it once
                if process.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        process.terminate()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(process.wait(), 5)
                raise
            stderr = (await process.stderr.read()).decode(errors="replace") \
                if process.stderr else ""
            await process.wait()  # journalctl ended by itself (end of output, or an error)
            if "cursor" in stderr.lower() and self.cursor:
                usec = cursor_time_usec(self.cursor)
                self.events.append(f"journalctl rejected the saved cursor ({stderr.strip()}); "
                                   "restarting from the time it names" if usec else
                                   f"journalctl rejected the saved cursor ({stderr.strip()}); "
                                   "restarting from the start of the journal")
                self.cursor, self._since_usec = None, usec
                continue
            attempt = 0 if got_any else attempt + 1
            delay = BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]
            self.events.append(f"journalctl exited {process.returncode}: "
                               f"{stderr.strip()[:200]}; restarting in {delay:.0f} s")
            await asyncio.sleep(delay)

    async def _read_batch(self, stream: asyncio.StreamReader
                          ) -> tuple[bytes, list[tuple[int, str]], list[int],
                                     list[tuple[int, int, bool]]] | None:
        """Entries available now (at least one, waiting for it), with each entry's end and
        cursor, where a new invocation of the unit began, and where its manager said its
        main process ended (end, status, clean); None at end of output."""
        parts: list[bytes] = []
        marks: list[tuple[int, str]] = []
        starts: list[int] = []
        exits: list[tuple[int, int, bool]] = []
        size = 0
        while len(marks) < MAX_ENTRIES_PER_CHUNK:
            if marks and not stream._buffer:  # type: ignore[attr-defined]
                break  # nothing more is waiting: hand on what we have
            try:
                raw = await stream.readline()
            except ValueError:  # an entry over the reader's limit: skip it, say so
                self.events.append("a journal entry over 16 MiB was skipped")
                continue
            if not raw:
                return (b"".join(parts), marks, starts, exits) if marks else None
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            cursor = entry.get("__CURSOR")
            invocation = entry.get("_SYSTEMD_INVOCATION_ID")
            if isinstance(invocation, str) and invocation != self._invocation:
                if self._invocation is not None:  # the unit was started again
                    starts.append(size)
                self._invocation = invocation
            message = message_bytes(entry)
            if message is None:
                message = b"[logwatch: journald omitted this MESSAGE]"
            text = message.rstrip(b"\n") + b"\n"
            parts.append(text)
            size += len(text)
            ended = main_process_exit(entry, self._unit)
            if ended is not None:
                exits.append((size, *ended))
            self._unit = unit_of(entry) or self._unit
            if isinstance(cursor, str):
                marks.append((size, cursor))
                self.cursor = cursor
        return b"".join(parts), marks, starts, exits
