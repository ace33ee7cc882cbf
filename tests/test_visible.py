"""Control characters from logs are shown, never obeyed by the terminal."""

from __future__ import annotations

import json
import os
import re

import pytest

from logwatch.core.safe_text.visible import json_escaped, visible, visible_data

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


def test_data_shows_every_string_and_key_and_prose_keeps_its_lines() -> None:
    data = {"title\x1b": "a\x1b]0;x\x07", "count": 3, "fatal": True, "none": None,
            "evidence": [{"text": "line\none\t\x9b"}], "explanation": "first\nsecond\x1b",
            "details": ["x\ny\u202e"], "pair": ("\x07", 1)}
    assert visible_data(data, prose={"explanation", "details"}) == {
        "title^[": "a^[]0;x^G", "count": 3, "fatal": True, "none": None,
        "evidence": [{"text": "line^Jone^I\\x9b"}], "explanation": "first\nsecond^[",
        "details": ["x\ny\\u202e"], "pair": ("^G", 1)}


@pytest.mark.parametrize(("raw", "shown"), HOSTILE)
def test_json_escaped_leaves_no_control_character_and_loads_back(raw: str, shown: str) -> None:
    value = {"k\x9b": [raw, "µs ✓ 日本", "\\\x7f"], "plain": 1}
    dumped = json_escaped(json.dumps(value, indent=2, ensure_ascii=False))
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                         "\u202a-\u202e\u2066-\u2069]", dumped)
    assert json.loads(dumped) == value
    assert "µs ✓ 日本" in dumped  # other non-ASCII text stays readable


def test_bytes_of_a_file_name_that_are_not_utf8_are_shown_as_bytes() -> None:
    """os.fsdecode carries them as lone surrogates; written out they are the raw bytes again
    (0x9b: an 8-bit CSI)."""
    name = os.fsdecode(b"evil\x9b\xff.log")
    assert visible(name) == "evil\\x9b\\xff.log"
    assert visible("\ud800") == "\\ud800"
    assert json.loads(json_escaped(json.dumps(name, ensure_ascii=False))) == name
    assert "\udc9b" not in json_escaped(json.dumps(name, ensure_ascii=False))
