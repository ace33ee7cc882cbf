"""`logwatch tui`: the Textual app over the daemon's control socket (or, with no daemon, the
history read-only)."""
