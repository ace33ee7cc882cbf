"""Each curated message rendered as real log text, run through logwatch's offline scan, and
classified: a specific signature names it, only a generic one does, or it looks healthy."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logwatch.core.signatures.frame_areas import area_of_path
from logwatch.core.signatures.library import Library
from logwatch.core.signatures.matcher import Matcher
from logwatch.core.signatures.vocabulary import Vocabulary
from logwatch.library.files import VocabularyFile, load_signature_dirs
from logwatch.scan.offline import ScanInput, scan_inputs
from tools.vllm_vocab.areas import AREAS
from tools.vllm_vocab.curated import Curated
from tools.vllm_vocab.render import forms, headline, render

GENERIC = frozenset({"engine.core_failed_to_start", "engine.init_failed",
                     "engine.worker_failed", "engine.dead"})
OUTCOMES = ("specific", "area", "generic", "healthy")
# A message no signature knows is still placed when the traceback's frames name its part of
# vLLM (logwatch/core/signatures/frame_areas.py): which of those areas fit each vocabulary area.
AREA_FITS: dict[str, frozenset[str]] = {
    "marlin": frozenset({"marlin"}),
    "quantization configs": frozenset({"quantization", "marlin", "moe"}),
    "nvfp4/mxfp4 backends": frozenset({"quantization", "marlin", "moe"}),
    "speculative decoding/MTP": frozenset({"speculative"}),
    "model loading": frozenset({"weight_loading", "model", "config"}),
    "worker/engine/memory": frozenset({"engine", "kv_cache", "attention", "compilation"}),
    "distributed": frozenset({"distributed"}),
    "config validation": frozenset({"config"}),
}


def is_generic(signature_id: str) -> bool:
    """The signatures that say only that something failed, not what."""
    return signature_id in GENERIC or signature_id.startswith("generic.")


def is_placed(signature_id: str) -> bool:
    """The fallback put in an area, the wording unknown (core.signatures.placed)."""
    return signature_id.endswith(("unrecognised_error", "unrecognised_error_line"))


@dataclass(frozen=True, slots=True)
class Outcome:
    entry: Curated
    outcome: str  # specific, generic, healthy
    signatures: tuple[str, ...]  # the specific ones, or the generic ones when none is

    @property
    def unexpected(self) -> bool:
        """A specific signature named it, but not the one the curated entry expects."""
        return (self.outcome == "specific" and self.entry.signature is not None
                and self.entry.signature not in self.signatures)


def load_signatures(directories: Sequence[Path]) -> Library:
    """The repository's library, or the given directories layered in order (the first is the
    base with its library.toml; a later one overrides an earlier one signature by signature)."""
    if not directories:
        return load_signature_dirs()
    return load_signature_dirs(list(directories[1:]), base=directories[0])


def classify(report: dict[str, Any], area: str | None = None, path: str | None = None
             ) -> tuple[str, tuple[str, ...]]:
    """specific: a signature names it, or vLLM's vocabulary does (`<area>.known_error`);
    area: only the fallback does, with the area of vLLM the frames (or an ERROR line's logger
    tag) name (`<area>.unrecognised_error`, or the area capture of a cut traceback), and that
    area fits the message's (`area`, when given) or is the one of the file that raises it
    (`path`); generic: only the fallback or a wrapper names it; healthy: nothing fatal and
    no error."""
    fits = set(AREA_FITS.get(area, ())) if area is not None else None
    own = area_of_path(path) if path is not None else None
    if fits is not None and own is not None:
        fits.add(own.id)
    incidents = report["incidents"]
    specific = sorted({i["signature"] for i in incidents if not is_generic(i["signature"])
                       and not is_placed(i["signature"]) and i["severity"] != "info"})
    if specific:
        return "specific", tuple(specific)
    fatal = sorted({i["signature"] for i in incidents
                    if i["fatal"] or i["severity"] in ("error", "critical")})
    placed = sorted({f"{i['signature']}@{i['captures']['area']}" for i in incidents
                     if i["signature"] in fatal and i["captures"].get("area")
                     and (fits is None or i["captures"]["area"] in fits)})
    if placed:
        return "area", tuple(placed)
    return ("generic", tuple(fatal)) if fatal else ("healthy", ())


def measure(entries: Sequence[Curated], library: Library, every_form: bool = False,
            vocabulary: Vocabulary | None = None) -> list[Outcome]:
    """Scan each entry's rendered log in this process (one matcher for all; it never gives up
    on a signature, however often a pattern runs over). `every_form`: each form vLLM prints
    the message in (render.forms), the entry's outcome its worst form's. `vocabulary`: the
    wordings known to the matcher (the library's by default)."""
    matcher = Matcher(library.signatures, disable_after=None,
                      vocabulary=vocabulary if vocabulary is not None else library.vocabulary)
    outcomes = []
    for entry in entries:
        worst: tuple[str, tuple[str, ...]] | None = None
        for text in (forms(entry) if every_form else {"": render(entry)}).values():
            report = scan_inputs([ScanInput(f"<{entry.id}>", None, stream=True)], library,
                                 stdin=io.BytesIO(text.encode("utf-8")), matcher=matcher)
            found = classify(report, entry.area, entry.file)
            if worst is None or OUTCOMES.index(found[0]) > OUTCOMES.index(worst[0]):
                worst = found
        assert worst is not None
        outcomes.append(Outcome(entry, *worst))
    return outcomes


def table(outcomes: Sequence[Outcome]) -> list[tuple[str, dict[str, int]]]:
    """Counts per area (areas in their fixed order, empty ones left out) and a total row."""
    rows = []
    for area in AREAS:
        counts = {name: sum(1 for o in outcomes if o.entry.area == area and o.outcome == name)
                  for name in OUTCOMES}
        if sum(counts.values()):
            rows.append((area, counts))
    rows.append(("all", {name: sum(1 for o in outcomes if o.outcome == name)
                         for name in OUTCOMES}))
    return rows


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def markdown(outcomes: Sequence[Outcome]) -> str:
    """The coverage table as Markdown (what the README shows)."""
    fatal = [o for o in outcomes if o.entry.fatal]
    lines = ["| area | messages | specific | area only | generic only | healthy |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for area, counts in table(outcomes):
        total = sum(counts.values())
        name = f"**{area}**" if area == "all" else area
        lines.append(f"| {name} | {total} | " + " | ".join(
            f"{counts[o]} ({_percent(counts[o], total)})" for o in OUTCOMES) + " |")
    healthy_fatal = sum(1 for o in fatal if o.outcome == "healthy")
    lines.append("")
    lines.append(f"{len(outcomes)} curated messages ({len(fatal)} fatal); fatal messages "
                 f"reported healthy: {healthy_fatal}.")
    return "\n".join(lines)


def misses(outcomes: Sequence[Outcome], detail: bool = False) -> str:
    """Every message not named by a specific signature (or named by another than expected),
    by area; with detail, each one's template, releases and source file."""
    out: list[str] = []
    for area in AREAS:
        missed = [o for o in outcomes if o.entry.area == area
                  and (o.outcome != "specific" or o.unexpected)]
        if not missed:
            continue
        out.append(f"## {area} ({len(missed)})")
        out.append("")
        for o in missed:
            entry = o.entry
            said = ", ".join(o.signatures) or "nothing"
            fatal = "fatal" if entry.fatal else "not fatal"
            note = (f"expected {entry.signature}, got {said}" if o.unexpected
                    else f"{o.outcome} ({said})")
            out.append(f"- `{entry.id}` [{fatal}; {note}]")
            if detail:
                releases = (f"{entry.releases[0]}–{entry.releases[-1]}"
                            f" ({len(entry.releases)} releases)")
                out.append(f"  - {entry.kind} {entry.label} in `{entry.file}` "
                           f"{entry.function}; {releases}")
                out.append(f"  - template: `` {entry.template} ``")
                out.append(f"  - rendered: `` {headline(entry)} ``")
        out.append("")
    return "\n".join(out)


def halves_markdown(tuning: Sequence[Outcome], held_out: Sequence[Outcome]) -> str:
    """The generated vocabulary's table: each area's tuning and held-out halves side by side,
    as messages, named by a signature or placed in their area ("placed"), and reported
    healthy."""
    lines = ["| area | tuning: messages | specific | placed | healthy | held-out: messages "
             "| specific | placed | healthy |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows_t, rows_h = dict(table(tuning)), dict(table(held_out))
    for area in [*AREAS, "all"]:
        if area not in rows_t and area not in rows_h:
            continue
        cells = []
        for rows in (rows_t, rows_h):
            counts = rows.get(area, dict.fromkeys(OUTCOMES, 0))
            total = sum(counts.values())
            placed = counts["specific"] + counts["area"]
            cells += [str(total), f"{counts['specific']} ({_percent(counts['specific'], total)})",
                      f"{placed} ({_percent(placed, total)})",
                      f"{counts['healthy']} ({_percent(counts['healthy'], total)})"]
        name = f"**{area}**" if area == "all" else area
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    for name, outcomes in (("tuning", tuning), ("held-out", held_out)):
        fatal = [o for o in outcomes if o.entry.fatal]
        lines.append(f"- {name}: {len(outcomes)} messages ({len(fatal)} fatal); fatal reported "
                     f"healthy: {sum(1 for o in fatal if o.outcome == 'healthy')}.")
    return "\n".join(lines)


GENERATED_INTRO = (
    "The generated vocabulary (`signatures/vocabulary.json.gz`: every failure message of "
    "these areas in the sources of every release, split by a fixed hash of its wording; "
    "signatures are written looking at the tuning half only), each message in every form vLLM "
    "prints it (a log line; the API server's traceback; the engine core's and, from 0.10.2, a "
    "worker's own), counted by its worst form. Each half is measured with the other half's "
    "wordings alone in logwatch's copy of the vocabulary, so no message is recognised "
    "because it is in the list: *specific* is a signature or another wording of vLLM's "
    "naming it, *placed* adds those the traceback's frames (or an ERROR line's logger tag) "
    "put in their area of vLLM (`<area>.unrecognised_error`). As shipped, with both halves "
    "in the vocabulary, every message of the releases in the matrix is named by its own "
    "wording (tests/test_vocabulary.py).")


def coverage_body(curated: Sequence[Curated], library: Library, generated: bool = True
                  ) -> tuple[str, list[Outcome]]:
    """The README's coverage section (the curated table, then the generated vocabulary's two
    halves) and the curated outcomes (for the misses page)."""
    outcomes = measure(curated, library)
    body = markdown(outcomes)
    if generated:
        from tools.vllm_vocab.generated import GENERATED, load

        halves = []
        for half in ("tuning", "held_out"):
            entries = load(GENERATED, half)
            known = library.vocabulary or VocabularyFile(GENERATED)
            halves.append(measure(entries, library, every_form=True,
                                  vocabulary=known.without(e.id for e in entries)))
        body += "\n\n" + GENERATED_INTRO + "\n\n" + halves_markdown(*halves)
    return body, outcomes
