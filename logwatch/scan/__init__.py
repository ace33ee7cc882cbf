"""The offline scan: inputs (files, gzip, pipes), the triage of what they hold, progress."""
