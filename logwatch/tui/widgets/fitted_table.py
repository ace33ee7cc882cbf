"""Filling a `DataTable` with columns as wide as their widest cell from the first frame.

Textual's DataTable (8.2) sizes an auto-width column on idle, after its rows went in, but a
frame drawn in between caches its cells under a key that the resize does not change: the
column then stays cut to its header's width (`1f602e7…`) until the table changes again.
Here every column is given its width before any row is added, so no frame can draw it
narrower than its cells."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable

Cell = Text | str


def width(value: Cell) -> int:
    """Cells on the screen that a value takes: its widest line (a `str` is drawn as text,
    never markup, by the `cell` helper that made it)."""
    text = value.plain if isinstance(value, Text) else value
    return max((cell_len(line) for line in text.split("\n")), default=0)


def column_widths(labels: Sequence[Cell], rows: Sequence[Sequence[Cell]]) -> list[int]:
    """Each column's width: its label's or its widest cell's."""
    widths = [width(label) for label in labels]
    for row in rows:
        for index, value in enumerate(row[:len(widths)]):
            widths[index] = max(widths[index], width(value))
    return widths


def fill(table: DataTable[Any], labels: Sequence[Cell], rows: Sequence[Sequence[Cell]],
         keys: Sequence[str] | None = None) -> None:
    """Replace the table's columns and rows; a row's key from `keys` when given."""
    table.clear(columns=True)
    for label, size in zip(labels, column_widths(labels, rows), strict=True):
        table.add_column(label, width=size)
    for index, row in enumerate(rows):
        table.add_row(*row, key=None if keys is None else keys[index])
