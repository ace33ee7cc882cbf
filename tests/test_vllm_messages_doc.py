"""docs/vllm-messages.md and the signatures' `references` stay in step: every signature has an
entry, every `docs/vllm-messages.md#anchor` names a heading that exists, nobody cites the
shared `vllm-logs.md` (it is not part of the project). When vLLM sources are at hand, the
doc's "Source checks" table is checked against them.

The files are read directly (tomllib, the Markdown text), not through logwatch's loader."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.vllm_sources import SOURCES, read_sources

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "vllm-messages.md"
DOC_REF = "docs/vllm-messages.md#"

def _signatures() -> dict[str, dict]:
    found: dict[str, dict] = {}
    for path in sorted((ROOT / "signatures").rglob("*.toml")):
        if path.name == "library.toml":
            continue
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        found[data["id"]] = data
    return found


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: link text kept, lower case, punctuation other than
    `-` and `_` dropped, spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _headings(markdown: str) -> list[tuple[int, str, int]]:
    """(level, anchor, line index) of every heading outside fenced code blocks; repeated
    anchors get GitHub's -1, -2 suffixes."""
    result: list[tuple[int, str, int]] = []
    seen: dict[str, int] = {}
    fenced = False
    for index, line in enumerate(markdown.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
            continue
        match = re.match(r"(#{1,6}) (.+)$", line)
        if fenced or not match:
            continue
        anchor = github_anchor(match.group(2))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        result.append((len(match.group(1)), anchor if count == 0 else f"{anchor}-{count}", index))
    return result


def _entry_anchor(signature_id: str) -> str:
    return signature_id.replace(".", "-").replace("_", "-")


SIGNATURES = _signatures()
TEXT = DOC.read_text(encoding="utf-8")
HEADINGS = _headings(TEXT)
ANCHORS = {anchor for _, anchor, _ in HEADINGS}


def _section(anchor: str) -> str:
    """The lines under a heading, up to the next heading of the same or a higher level."""
    lines = TEXT.splitlines()
    for position, (level, found, start) in enumerate(HEADINGS):
        if found == anchor:
            end = next((i for lvl, _, i in HEADINGS[position + 1:] if lvl <= level), len(lines))
            return "\n".join(lines[start + 1:end])
    raise AssertionError(f"no heading with anchor #{anchor}")


def test_anchors_follow_github() -> None:
    assert github_anchor("marlin-repack-tile-n") == "marlin-repack-tile-n"
    assert github_anchor("Where the shared reference is wrong or out of date") == (
        "where-the-shared-reference-is-wrong-or-out-of-date")
    assert github_anchor("`marlin.repack_tile_n` (see [x](#y))") == "marlinrepack_tile_n-see-x"
    assert _headings("# A\n```\n# not a heading\n```\n## A\n")[1][1] == "a-1"


def test_library_is_found() -> None:
    assert len(SIGNATURES) >= 50
    assert "marlin.repack_tile_n" in SIGNATURES


def test_every_doc_reference_names_an_existing_anchor() -> None:
    broken = [(sid, ref) for sid, data in SIGNATURES.items() for ref in data.get("references", [])
              if ref.startswith(DOC_REF) and ref.removeprefix(DOC_REF) not in ANCHORS]
    assert broken == []


def test_no_signature_cites_the_shared_vllm_logs() -> None:
    citing = [(sid, ref) for sid, data in SIGNATURES.items() for ref in data.get("references", [])
              if "vllm-logs.md" in ref]
    assert citing == []


def test_every_signature_has_its_entry_and_cites_it_first() -> None:
    for sid, data in SIGNATURES.items():
        anchor = _entry_anchor(sid)
        assert anchor in ANCHORS, f"{sid}: no heading '### {anchor}' in {DOC.name}"
        assert f"`{sid}`" in _section(anchor), f"{sid}: its entry does not name it"
        references = data.get("references", [])
        assert references[:1] == [DOC_REF + anchor], f"{sid}: references {references}"


def test_every_entry_is_a_signature() -> None:
    entries = {anchor for level, anchor, _ in HEADINGS if level == 3}
    # and one entry for the placed signatures, derived from the generic rules
    # (logwatch/core/signatures/placed.py), which have no file of their own
    assert entries == {_entry_anchor(sid) for sid in SIGNATURES} | {"placed-errors"}


def test_links_inside_the_doc_resolve() -> None:
    targets = re.findall(r"\]\(#([^)]+)\)", TEXT)
    assert targets, "expected at least one link between entries"
    assert [t for t in targets if t not in ANCHORS] == []


# --- optional: the "Source checks" table against real vLLM sources ---

_ADJACENT_LITERALS = re.compile(
    r"""(["'])[ \t]*\\?\n[ \t]*(?:#[^\n]*\n[ \t]*)*[rRbBfFuU]{0,2}(["'])""")


def joined(source: str) -> str:
    """Source text with implicitly concatenated string literals that span lines joined, so a
    message split over several lines can be searched as printed."""
    return _ADJACENT_LITERALS.sub(
        lambda m: "" if m.group(1) == m.group(2) else m.group(0), source)


def test_joined_strings() -> None:
    python = 'raise ValueError(\n    "Engine core "\n    f"initialization failed {x}"\n)'
    assert "Engine core initialization failed {x}" in joined(python)
    cpp = 'TORCH_CHECK(ok, "size_n = ", size_n,\n            " is not divisible by")'
    assert '"size_n = ", size_n,\n' in joined(cpp)


def _source_checks() -> list[tuple[str, str, str]]:
    rows = []
    for line in _section("source-checks").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"\d+\.\d+\.\d+", cells[0]):
            rows.append((cells[0], cells[1], cells[2]))
    return rows


def test_source_checks_table_is_well_formed() -> None:
    rows = _source_checks()
    assert len(rows) >= 40
    for release, path, fragment in rows:
        assert path.startswith(("vllm/", "csrc/")) and fragment, (release, path, fragment)


def test_source_fragments_are_in_vllm_sources() -> None:
    by_release: dict[str, list[tuple[str, str]]] = {}
    for release, path, fragment in _source_checks():
        by_release.setdefault(release, []).append((path, fragment))
    checked, problems = 0, []
    for release, rows in sorted(by_release.items()):
        files = read_sources(release, {path for path, _ in rows})
        if files is None:
            continue
        for path, fragment in rows:
            checked += 1
            if path not in files:
                problems.append(f"{release} {path}: file missing")
            elif fragment not in joined(files[path]) and fragment not in files[path]:
                problems.append(f"{release} {path}: no {fragment!r}")
    if not checked:
        pytest.skip(f"no vLLM sources for {sorted(by_release)} under {SOURCES} "
                    "(set LOGWATCH_VLLM_SOURCES; see docs/vllm-messages.md#source-checks)")
    assert problems == []
