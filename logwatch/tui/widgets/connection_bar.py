"""The line at the top of every screen: where the data comes from (a live daemon, the
history read-only, or a daemon that went away and since when)."""

from __future__ import annotations

from datetime import datetime

from textual.widgets import Static

from logwatch.tui.render import cell
from logwatch.tui.state import DOWN, LIVE, Connection


class ConnectionBar(Static):
    DEFAULT_CSS = """
    ConnectionBar { height: 1; padding: 0 1; background: $boost; }
    ConnectionBar.live { color: $success; }
    ConnectionBar.down { color: $error; text-style: bold; }
    ConnectionBar.history { color: $warning; }
    """

    def show(self, connection: Connection, now: datetime, extra: str = "") -> None:
        self.set_class(connection.kind == LIVE, "live")
        self.set_class(connection.kind == DOWN, "down")
        self.set_class(connection.kind not in (LIVE, DOWN), "history")
        self.update(cell(connection.describe(now) + (f" · {extra}" if extra else "")))
