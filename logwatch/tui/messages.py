"""Messages the app posts to its screens (attributes down, messages up: screens read the
app's state when told it changed)."""

from __future__ import annotations

from textual.message import Message


class BoardChanged(Message):
    """The dashboard's data was read again (`app.board`)."""


class ConnectionChanged(Message):
    """Connected, disconnected, or reading the history without a daemon (`app.connection`)."""


class LinesChanged(Message):
    """Lines were added to the ring, or dropped (`app.ring`, `app.dropped`)."""


class SignaturesChanged(Message):
    """The library was read again or reloaded (`app.signature_states`)."""
