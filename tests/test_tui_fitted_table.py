"""Column widths worked out before a DataTable draws (logwatch.tui.widgets.fitted_table)."""

from __future__ import annotations

from rich.text import Text

from logwatch.tui.widgets.fitted_table import column_widths, width


def test_a_column_is_as_wide_as_its_label_or_its_widest_cell() -> None:
    labels = ("snapshot", "n")
    rows: list[list[Text | str]] = [[Text("1f602e70a9c23b81"), "7"],
                                    [Text("short"), Text("12345")]]
    assert column_widths(labels, rows) == [16, 5]
    assert column_widths(labels, []) == [8, 1]


def test_width_counts_screen_cells_and_the_widest_line() -> None:
    assert width("日本語") == 6  # double-width characters take two cells each
    assert width(Text("ab\nabcd\n")) == 4
    assert width("") == 0


def test_a_short_row_leaves_the_other_columns_at_their_labels() -> None:
    assert column_widths(("a", "bb", "ccc"), [["xxxx"]]) == [4, 2, 3]
