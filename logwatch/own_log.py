"""Configure structlog once, at the entry point: JSON to journald under systemd (detected by
JOURNAL_STREAM naming our stderr), each line after its syslog priority (`<3>` for an error),
readable console lines on a terminal, JSON otherwise (`auto`); or text or JSON as asked
(`--log-format`). In text, an event that carries `said` (a relaunch action's move, in words)
is that one line.

On a terminal every value (file names, log text, exception messages) is shown with its control
characters visible; JSON escapes them itself and keeps the values as they were."""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

from logwatch.core.safe_text.visible import visible, visible_data


def under_journald(stream: TextIO, env: dict[str, str] | None = None) -> bool:
    """systemd sets JOURNAL_STREAM=dev:inode of the journal stream it connected us to."""
    value = (env if env is not None else os.environ).get("JOURNAL_STREAM", "")
    dev, _, ino = value.partition(":")
    if not (dev.isdigit() and ino.isdigit()):
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError):
        return False
    return st.st_dev == int(dev) and st.st_ino == int(ino)


def _visible_values(_logger: Any, _method: str,
                    event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Console only: every key and value with its control characters shown."""
    return {visible(k): v if k == "exc_info" else visible_data(v) for k, v in event.items()}


def _visible_traceback(stream: TextIO, exc_info: Any) -> None:
    """A plain traceback (its messages quote file names and log text), shown visibly."""
    text = io.StringIO()
    structlog.dev.plain_traceback(text, exc_info)
    stream.write(visible(text.getvalue(), lines=True))


LOG_FORMATS = ("auto", "text", "json")


class _Said:
    """Text: an event that carries `said` is that line alone; any other as the console
    renderer writes it."""

    def __init__(self, console: Any, prefix: str) -> None:
        self.console = console
        self.prefix = prefix

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> str:
        said = event.get("said")
        if isinstance(said, str) and said:
            return self.prefix + said
        return str(self.console(logger, method, event))


# syslog priorities (sd-daemon(3)): a `<N>` before a line tells journald its priority, so
# `journalctl -p err -u logwatch` finds the errors among the JSON lines
PRIORITY = {"critical": 2, "error": 3, "warning": 4, "info": 6, "debug": 7}


class _JournalLine:
    """JSON, after `<N>`, the syslog priority of its level."""

    def __init__(self) -> None:
        self.json = structlog.processors.JSONRenderer()

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> str:
        priority = PRIORITY.get(str(event.get("level", "")), 6)
        line = self.json(logger, method, event)
        return f"<{priority}>" + (line.decode() if isinstance(line, bytes) else line)


def configure(stream: TextIO | None = None, level: int = logging.INFO, fmt: str = "auto",
              prefix: str = "logwatch: ") -> str:
    """Set up structlog for this process; returns the renderer chosen ("journal", "console",
    "json"). `fmt`: "auto" (above), "text" (console lines, `said` events as `prefix` and
    their words) or "json" (journald's when under it)."""
    stream = stream or sys.stderr
    if fmt != "text" and under_journald(stream):
        renderers: list[Any] = [_JournalLine()]
        kind = "journal"
    elif fmt == "text" or (fmt == "auto" and stream.isatty()):
        from logwatch.cli.output import colour  # --color, NO_COLOR: one decision

        renderers = [_visible_values, _Said(structlog.dev.ConsoleRenderer(
            colors=colour(stream), exception_formatter=_visible_traceback), prefix)]
        kind = "console"
    else:
        renderers = [structlog.processors.JSONRenderer()]
        kind = "json"
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars,
                    structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso", utc=True),
                    *renderers],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=True)
    return kind


def get(name: str = "logwatch", **context: Any) -> Any:
    """A logger bound to context (target, source, ...)."""
    return structlog.get_logger(name).bind(**context)


def bind(**context: Any) -> None:
    """Context every later event of this process carries (target, ...)."""
    structlog.contextvars.bind_contextvars(**context)
