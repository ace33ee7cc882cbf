"""The strict loader: every kind of mistake is reported with file, line and a hint."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pytest
import regex

from logwatch.core.lines.assemble import assemble
from logwatch.core.lines.vllm_format import parse_line
from logwatch.core.signatures.library import _GROUP_NAME, LibraryError, load_library
from logwatch.core.signatures.matcher import Matcher, compile_pattern
from logwatch.library.files import load_signature_dirs, read_library

HEADER = ("signatures/library.toml", 'version = "1.2.3"\n[[changelog]]\nversion = "1.2.3"\n'
          'date = "2026-11-29"\nchanges = ["x"]\n')

GOOD = """\
id = "site.example"
version = 1
status = "stable"
severity = "error"
fatal = true
category = "cuda_error"
title = "Example"
remedy = "investigate"
explanation = "got {n}"

[[patterns]]
regex = '''^boom (?P<n>\\d+)'''
literals = ["boom "]

[[examples]]
text = '''boom 7'''
captures = { n = "7" }

[[counter_examples]]
text = '''no boom here'''
"""


def load(text: str, header: tuple[str, str] = HEADER) -> None:
    load_library(header, [[("site/example.toml", text)]])


def problems(text: str) -> list[str]:
    with pytest.raises(LibraryError) as info:
        load(text)
    return [str(p) for p in info.value.problems]


def test_a_good_signature_loads() -> None:
    library = load_library(HEADER, [[("site/example.toml", GOOD)]])
    assert library.version == "1.2.3"
    assert library.get("site.example") is not None


def test_invalid_toml_names_the_line() -> None:
    (msg,) = problems(GOOD.replace('version = 1', 'version = = 1'))
    assert msg.startswith("site/example.toml:2: invalid TOML")


def test_unknown_key_with_hint_and_line() -> None:
    msgs = problems(GOOD.replace('severity = "error"', 'severty = "error"'))
    assert msgs == ["site/example.toml:4: unknown key 'severty' in the signature "
                    "(did you mean 'severity'?)",
                    "site/example.toml: missing required key 'severity' in the signature"]
    msgs = problems(GOOD.replace('title = "Example"', 'title = "Example"\ntitel = "x"'))
    assert msgs == ["site/example.toml:8: unknown key 'titel' in the signature "
                    "(did you mean 'title'?)"]


def test_bad_vocabulary_values_get_hints() -> None:
    msgs = problems(GOOD.replace('category = "cuda_error"', 'category = "cuda_erorr"'))
    assert len(msgs) == 1 and "did you mean 'cuda_error'?" in msgs[0] and ":6:" in msgs[0]
    msgs = problems(GOOD.replace('status = "stable"', 'status = "beta"'))
    assert "status 'beta' is not one of experimental, stable, deprecated" in msgs[0]


def test_bad_regex_is_reported_with_its_line() -> None:
    msgs = problems(GOOD.replace("^boom (?P<n>\\d+)", "^boom (?P<n>\\d+"))
    assert any("pattern 1 is not a valid regex" in m and ":12:" in m for m in msgs)


def test_missing_examples_are_an_error() -> None:
    text = GOOD.split("[[examples]]")[0] + "[[counter_examples]]\ntext = '''x'''\n"
    msgs = problems(text)
    assert any("at least one [[examples]] entry is required" in m for m in msgs)


def test_failing_example_and_counter_example() -> None:
    msgs = problems(GOOD.replace("text = '''boom 7'''", "text = '''bang 7'''"))
    assert any("example 1 does not match" in m for m in msgs)
    msgs = problems(GOOD.replace("text = '''no boom here'''", "text = '''boom 9'''"))
    assert any("counter-example 1 matches but must not" in m for m in msgs)


def test_wrong_expected_capture() -> None:
    msgs = problems(GOOD.replace('captures = { n = "7" }', 'captures = { n = "8" }'))
    assert any("capture 'n' is '7', expected '8'" in m for m in msgs)


def test_example_expecting_an_unknown_capture() -> None:
    msgs = problems(GOOD.replace('captures = { n = "7" }', 'captures = { nn = "7" }'))
    assert any("expects capture 'nn', which no pattern defines (did you mean 'n'?)" in m
               for m in msgs)


def test_literal_that_the_match_does_not_contain() -> None:
    msgs = problems(GOOD.replace('literals = ["boom "]', 'literals = ["bang"]'))
    assert any("contains none of the pattern's literals" in m for m in msgs)


def test_condition_on_unknown_capture() -> None:
    text = GOOD + "\n[[conditions]]\ncapture = \"m\"\nop = \"<\"\nvalue = 3\n"
    msgs = problems(text)
    assert any("names capture 'm', which no pattern defines" in m for m in msgs)


def test_duplicate_ids_in_one_layer_but_overrides_across_layers() -> None:
    with pytest.raises(LibraryError) as info:
        load_library(HEADER, [[("a/x.toml", GOOD), ("a/y.toml", GOOD)]])
    assert "duplicate id 'site.example'" in str(info.value)
    override = GOOD.replace("title = \"Example\"", "title = \"Site override\"")
    library = load_library(HEADER, [[("a/x.toml", GOOD)], [("site/x.toml", override)]])
    sig = library.get("site.example")
    assert sig is not None and sig.title == "Site override"


def test_library_header_problems() -> None:
    with pytest.raises(LibraryError) as info:
        load_library(("library.toml", 'version = "1.2"\n'), [[("a/x.toml", GOOD)]])
    text = str(info.value)
    assert "not semver" in text and "changelog must list" in text


def test_all_problems_are_collected_before_refusing() -> None:
    bad = GOOD.replace('status = "stable"', 'status = "x"').replace('fatal = true', 'fatal = 1')
    assert len(problems(bad)) == 2


def test_the_whole_library_loads_or_nothing(tmp_path: Path) -> None:
    base = tmp_path / "signatures"
    (base / "site").mkdir(parents=True)
    (base / "library.toml").write_text(HEADER[1])
    (base / "site" / "good.toml").write_text(GOOD)
    (base / "site" / "bad.toml").write_text(GOOD.replace("site.example", "site.other")
                                            .replace("(?P<n>", "(?P<n"))
    with pytest.raises(LibraryError):
        load_signature_dirs(base=base)
    (base / "site" / "bad.toml").unlink()
    assert len(load_signature_dirs(base=base).signatures) == 1


def test_missing_or_binary_signature_files(tmp_path: Path) -> None:
    with pytest.raises(LibraryError, match=r"library\.toml not found"):
        load_signature_dirs(base=tmp_path)
    (tmp_path / "library.toml").write_text(HEADER[1])
    (tmp_path / "junk.toml").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(LibraryError, match="not UTF-8"):
        load_signature_dirs(base=tmp_path)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('id = "site.example"', 'id = "Site Example"', "must be dotted lowercase words"),
        ("version = 1", "version = 0", "version must be 1 or more"),
        ("version = 1", 'version = "1"', "'version' must be a int, got str"),
        ("fatal = true", 'fatal = "yes"', "'fatal' must be a bool, got str"),
        ('remedy = "investigate"', 'remedy = "reboot"', "remedy 'reboot' is not one of"),
        ('severity = "error"', 'severity = "fatal"', "severity 'fatal' is not one of"),
        ('title = "Example"', 'title = "Example"\nkey_captures = ["m"]',
         "key_captures names 'm', which no pattern captures"),
        ('title = "Example"', 'title = "Example"\nkey_captures = "n"',
         "key_captures must be a list of capture names"),
        ('title = "Example"', 'title = "Example"\nreferences = "PR 1"',
         "references must be a list of strings"),
        ('title = "Example"', 'title = "Example"\nvllm_versions = 33',
         "vllm_versions must be a string"),
        ('literals = ["boom "]', "literals = []", "needs a non-empty list of one-line literal"),
        ("[[counter_examples]]\ntext = '''no boom here'''", "",
         "at least one [[counter_examples]] entry is required"),
        ("[[patterns]]", "[[pattern]]", "unknown key 'pattern' in the signature"),
    ],
)
def test_every_field_is_checked(old: str, new: str, message: str) -> None:
    assert old in GOOD
    msgs = problems(GOOD.replace(old, new))
    assert any(message in m for m in msgs), msgs


def test_a_condition_rejecting_the_first_match_lets_a_later_one_through() -> None:
    from datetime import datetime

    from logwatch.core.lines.assemble import assemble
    from logwatch.core.lines.vllm_format import parse_line
    from logwatch.core.signatures.matcher import Matcher

    text = GOOD.replace("^boom (?P<n>\\d+)", "boom (?P<n>\\d+)") + (
        "\n[[conditions]]\ncapture = \"n\"\nop = \">\"\nvalue = 5\n")
    assert text != GOOD + text[len(GOOD):]  # the anchor really was removed
    library = load_library(HEADER, [[("site/example.toml", text)]])
    matcher = Matcher(library.signatures, engine="python")
    (record,) = assemble([parse_line("t", 1, "boom 3 then boom 9", datetime(2026, 1, 1))])
    (finding,) = matcher.match_record(record)
    assert finding.captures == {"n": "9"}


def test_an_anchored_pattern_continues_on_the_next_line_of_a_record() -> None:
    from datetime import datetime

    from logwatch.core.lines.records import Record
    from logwatch.core.lines.vllm_format import parse_line
    from logwatch.core.signatures.matcher import Matcher

    text = GOOD + "\n[[conditions]]\ncapture = \"n\"\nop = \">\"\nvalue = 5\n"
    library = load_library(HEADER, [[("site/example.toml", text)]])
    matcher = Matcher(library.signatures, engine="python")
    reference = datetime(2026, 1, 1)
    one_line = Record([parse_line("t", 1, "boom 3 and boom 9", reference)])
    assert matcher.match_record(one_line) == []  # `^` anchors: "boom 9" mid-line is no match
    two_lines = Record([parse_line("t", 1, "boom 3", reference),
                        parse_line("t", 2, "boom 9", reference)])
    (finding,) = matcher.match_record(two_lines)
    assert (finding.captures, finding.lineno) == ({"n": "9"}, 2)


def test_a_vetted_library_loads_the_same_without_compiling_and_compiles_on_use() -> None:
    """A library whose texts passed the check before loads without compiling any pattern
    (a millisecond each), reads the same capture names from the pattern texts, and the
    matcher compiles only the patterns an input's literals ask for."""
    texts = read_library()
    checked = load_library(*texts)
    regex.purge()
    vetted = load_library(*texts, check=False, vetted=True)
    assert vetted.signatures == checked.signatures
    for signature in checked.signatures:
        for pattern in signature.patterns:
            named = set(regex.compile(pattern.regex).groupindex)
            assert set(_GROUP_NAME.findall(pattern.regex)) == named, signature.id
    matcher = Matcher(vetted.signatures)
    assert not any(p._compiled for bucket in matcher._by_literal for p in bucket)
    (record,) = assemble([parse_line("t", 1, "RuntimeError: size_n = 40 is not divisible by "
                                     "tile_n_size = 64", datetime(2026, 11, 29))])
    assert [f.signature.id for f in matcher.match_record(record)] == ["marlin.repack_tile_n"]
    compiled = {p.signature.id for bucket in matcher._by_literal for p in bucket if p._compiled}
    assert "marlin.repack_tile_n" in compiled and len(compiled) < 10


def test_compiling_on_first_use_never_spends_a_records_match_budget() -> None:
    """The first record that asks for many patterns compiles them all (about a millisecond
    each, some far more): that must not eat the budget its patterns then share, or the
    patterns tried last are skipped and their findings lost."""
    vetted = load_library(*read_library(), check=False, vetted=True)
    literals = " ".join(p.literals[0] for s in vetted.signatures for p in s.patterns)
    text = f"size_n = 40 is not divisible by tile_n_size = 64 {literals}"
    (record,) = assemble([parse_line("t", 1, text, datetime(2026, 11, 29))])

    def fresh(timeout: float) -> Matcher:
        regex.purge()  # nothing compiled already in regex's own cache
        return Matcher(vetted.signatures, timeout=timeout, disable_after=None)

    matcher = fresh(10.0)
    sources = [p.source for p in matcher.candidates(record.message)]
    assert len(sources) > 100
    regex.purge()
    began = time.thread_time()
    for source in sources:
        compile_pattern(source)
    compiling = time.thread_time() - began
    began = time.thread_time()
    matcher.match_record(record)
    searching = time.thread_time() - began
    if compiling < 4 * searching:
        pytest.skip(f"compiling ({compiling:.3f} s) is not much slower than searching here")
    matcher = fresh(compiling / 2)  # enough for the searches, not for compiling as well
    found = matcher.match_record(record)
    assert not matcher.skipped and not matcher.timeouts
    assert "marlin.repack_tile_n" in [f.signature.id for f in found]
