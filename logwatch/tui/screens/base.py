"""What every screen of the app has: the connection bar on top, the footer with its keys,
and a way to be drawn again from the app's state when shown or told it changed."""

from __future__ import annotations

from typing import cast

from textual.screen import Screen

from logwatch.tui.messages import ConnectionChanged
from logwatch.tui.state import AppView
from logwatch.tui.widgets.connection_bar import ConnectionBar


class AppScreen(Screen[None]):
    @property
    def lw(self) -> AppView:
        """The app as a screen sees it (its state and two requests), never the app itself."""
        return cast(AppView, self.app)

    def draw(self) -> None:
        """Draw everything from the app's state (override)."""

    def on_screen_resume(self) -> None:
        self.draw_connection()
        self.draw()

    def on_connection_changed(self, _: ConnectionChanged) -> None:
        self.draw_connection()
        self.refresh_bindings()

    def draw_connection(self) -> None:
        for bar in self.query(ConnectionBar):
            bar.show(self.lw.connection, self.lw.clock())
