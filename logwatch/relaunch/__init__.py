"""Executors that carry a plan out on the host: a systemd unit's drop-in, a supervised child,
or a site's own command (one interface: prepare, apply, undo)."""
