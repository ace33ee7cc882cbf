"""The TUI's screens, one per module."""
