"""Carrying a plan out on the host: executors that start a plan's launch and put the previous
one back (a systemd unit's drop-in, a supervised child, a site's own command), the runner that
moves an action through its states, the planned configuration read back, and verification."""
