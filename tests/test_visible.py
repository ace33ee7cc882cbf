"""Control characters from logs are shown, never obeyed by the terminal."""

from __future__ import annotations

import pytest

from logwatch.core.visible import visible

HOSTILE = [
    ("\x1b]52;c;cm0gLXJmIH4K\x07", "^[]52;c;cm0gLXJmIH4K^G"),  # OSC 52: clipboard write
    ("\x1b]0;pwned\x1b\\", "^[]0;pwned^[\\"),  # OSC 0: window title
    ("\x1b]8;;http://evil/\x1b\\click\x1b]8;;\x1b\\", "^[]8;;http://evil/^[\\click^[]8;;^[\\"),
    ("\x1bP$q\"p\x1b\\", "^[P$q\"p^[\\"),  # DCS: a terminal query
    ("\x9b6n", "\\x9b6n"),  # C1 CSI: a cursor position report request
    ("\x1b[6n", "^[[6n"),
    ("a\rb", "a^Mb"),  # carriage return hides what came before
    ("del\x7f", "del^?"),
    ("\u202eexe.txt", "\\u202eexe.txt"),  # right-to-left override
    ("nul\x00", "nul^@"),
]


@pytest.mark.parametrize(("raw", "shown"), HOSTILE)
def test_every_control_character_is_shown(raw: str, shown: str) -> None:
    assert visible(raw) == shown
    assert visible(raw, lines=True) == shown


def test_cells_show_newlines_and_tabs_multiline_text_keeps_them() -> None:
    assert visible("a\tb\nc") == "a^Ib^Jc"
    assert visible("a\tb\nc", lines=True) == "a\tb\nc"


def test_plain_and_non_ascii_text_is_untouched() -> None:
    text = "size_n = 40 is not divisible by tile_n_size = 64 — µs ✓ 日本"
    assert visible(text) is text
