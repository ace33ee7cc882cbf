"""The command line: argument parsing, and one module per command group."""

from logwatch.cli.main import main

__all__ = ["main"]
