"""Loads the signature library from disk: files, a bounded check in a child process, the
cache of checked files."""
