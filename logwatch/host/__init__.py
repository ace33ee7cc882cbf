"""Reads the machine: /proc, systemd units, model directories, nvidia-smi; hands the facts
to the core's snapshot model."""
