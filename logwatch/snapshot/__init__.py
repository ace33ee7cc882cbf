"""Shells that gather configuration facts from the host: model dirs, /proc, systemd, GPUs."""
