"""The store's error type, importable without loading DuckDB (the CLI catches it everywhere)."""


class DatabaseError(Exception):
    """The database cannot be used; the message says why and what to do."""


class DatabaseInUse(DatabaseError):
    """Another process (a running daemon) holds the database file."""
