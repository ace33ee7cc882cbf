"""Draft a signature from a group of unrecognised lines: TOML ready to review, test and lint.

The template's fixed text becomes the pattern (escaped) and its literal; each masked part
becomes a named capture of a bounded class, so the pattern cannot backtrack badly. The group's
first line (secrets masked already) is the example; a near miss, the same line with the case
of one letter of the fixed text flipped, is the counter-example.
"""

from __future__ import annotations

import re

from logwatch.core.signatures.findings import CUT_MARKER
from logwatch.core.signatures.templates import TemplateGroup, split_template, template_of

# Bounded classes: no capture can run away, and none can swallow the fixed text after it.
CAPTURE_CLASSES = {
    "str": r"""['"`][^'"`\n]{0,200}['"`]""",
    "path": r"""[^\s'"]{1,300}""",
    "addr": r"\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?",
    "hex": r"(?:0x)?[0-9a-fA-F]{1,64}",
    "size": r"\d{1,12}(?:\.\d{1,6})? ?(?:[KMGTP]i?B|bytes)",
    "num": r"-?\d{1,20}(?:\.\d{1,12})?(?:e-?\d{1,4})?",
}
DRAFT_CATEGORY = "unclassified"
MIN_LITERAL = 4
# Fixed text beyond an exception's type shorter than this says too little ("KeyError: <str>"
# would claim every KeyError): the draft then keeps the quoted names and paths verbatim.
MIN_SPECIFIC = 12


def _toml_string(text: str) -> str:
    """A TOML literal string when the text allows one, else a basic string."""
    if "'''" not in text and "\n" not in text and not text.endswith("'"):
        return f"'''{text}'''"
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def draft_regex(template: str) -> tuple[str, list[str], str]:
    """The pattern, its capture names in order, and its longest fixed text (the literal)."""
    pieces: list[str] = []
    names: list[str] = []
    counts: dict[str, int] = {}
    longest = ""
    for kind, value in split_template(template):
        if kind == "lit":
            pieces.append(re.escape(value).replace(r"\ ", " "))
            if len(value.strip()) > len(longest):
                longest = value.strip()
            continue
        counts[value] = counts.get(value, 0) + 1
        name = f"{value}{counts[value]}"
        names.append(name)
        pieces.append(f"(?P<{name}>{CAPTURE_CLASSES[value]})")
    return "".join(pieces), names, longest


def signature_id(template: str) -> str:
    """`draft.<first words of the fixed text>`, a valid signature id."""
    words = re.findall(r"[a-z0-9]+", re.sub(r"<\w+>", " ", template).lower())
    slug = "_".join(words[:6]) or "unnamed"
    return f"draft.{slug[:60].strip('_')}"


def near_miss(example: str, literal: str) -> str:
    """The example with the first letter of its fixed text in the other case."""
    at = example.find(literal)
    for offset, char in enumerate(literal):
        if char.isalpha():
            i = at + offset
            return example[:i] + char.swapcase() + example[i + 1:]
    return example.replace(literal, literal[::-1], 1)


def shown_message(group: TemplateGroup) -> str:
    """The part of the group's message that its example shows. An evidence line longer than
    findings.MAX_EVIDENCE_CHARS is cut, and a pattern asking for more than its own example
    shows would fail its test."""
    if not group.example.endswith(CUT_MARKER):
        return group.message
    shown = group.example[:-len(CUT_MARKER)]
    for keep in range(min(len(group.message), len(shown)), 0, -1):
        if shown.endswith(group.message[:keep]):
            return group.message[:keep]
    return group.message


def pattern_template(group: TemplateGroup) -> str:
    """The template the pattern is drafted from: the group's (over what its example shows),
    unless too little of it is fixed, then one keeping names and paths."""
    message = shown_message(group)
    template = group.template if message == group.message else template_of(message)
    fixed = "".join(v for k, v in split_template(template) if k == "lit")
    exc, _, rest = fixed.partition(": ")
    if len((rest if exc.endswith(("Error", "Exception")) else fixed).strip()) < MIN_SPECIFIC:
        return template_of(message, keep=frozenset({"str", "path"}))
    return template


def draft_signature(group: TemplateGroup) -> str:
    """The group as a signature file (TOML text)."""
    template = pattern_template(group)
    regex, names, literal = draft_regex(template)
    if len(literal) < MIN_LITERAL:
        raise ValueError(f"the template {group.template!r} has no fixed text of "
                         f"{MIN_LITERAL}+ characters to anchor a pattern on")
    found = re.search(regex, shown_message(group))
    captures = dict(zip(names, found.groups(), strict=True)) if found else {}
    sig_id = signature_id(template)
    title = group.template[:120]
    explanation = (f"Drafted by logwatch signatures draft from {group.count} line(s) of "
                   f"{group.signature} (template: {group.template}). Review: name the cause, "
                   "say what fixes it, pick a category and remedy.")
    capture_toml = ", ".join(f"{k} = {_toml_string(v)}" for k, v in captures.items())
    lines = [
        f'id = "{sig_id}"',
        "version = 1",
        'status = "experimental"',
        'severity = "error"',
        f"fatal = {'true' if group.fatal else 'false'}",
        f'category = "{DRAFT_CATEGORY}"',
        f"title = {_toml_string('Drafted: ' + title)}",
        'remedy = "investigate"',
        "key_captures = []",
        f"explanation = {_toml_string(explanation)}",
        f"references = [{_toml_string(f'{group.source}:{group.line}')}]",
        "",
        "[[patterns]]",
        f"regex = {_toml_string(regex)}",
        f"literals = [{_toml_string(literal)}]",
        "",
        "[[examples]]",
        f"text = {_toml_string(group.example)}",
    ]
    if capture_toml:
        lines.append(f"captures = {{ {capture_toml} }}")
    miss = near_miss(group.example, literal)
    lines += ["", "[[counter_examples]]", f"text = {_toml_string(miss)}"]
    return "\n".join(lines) + "\n"
