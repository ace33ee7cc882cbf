"""Message templates: unrecognised error lines grouped by what stays when variables are masked.

Drain-style, but as one masking pass: quoted names, paths, addresses, hex, sizes and numbers
become typed placeholders (`<str>`, `<path>`, `<addr>`, `<hex>`, `<size>`, `<num>`), so ten
thousand lines of one new failure that differ only in a layer index, an address or a file are
one group with a count.
Groups are bounded; a draft signature is built from a group (core.signatures.draft).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from logwatch.core.safe_text.redact import redact
from logwatch.core.signatures.findings import Finding, evidence_text

MAX_GROUPS = 200  # distinct templates kept; later new ones are counted as `others`
MAX_MESSAGE_CHARS = 500
# Order matters: a quoted path is a name, a path's digits belong to the path.
MASKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("str", re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"|`[^`\n]{0,200}`")),
    ("path", re.compile(r"(?<![\w.])(?:[A-Za-z]:)?(?:/[\w.@+-]+){2,}/?")),
    ("addr", re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?(?![\w.])")),
    ("hex", re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{12,}\b")),
    ("size", re.compile(r"(?<![\w.])\d+(?:\.\d+)? ?(?:[KMGTP]i?B|bytes)\b")),
    ("num", re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w])")),
)
_PLACEHOLDER = re.compile(r"<(str|path|addr|hex|size|num)>")


def template_of(message: str, keep: frozenset[str] = frozenset()) -> str:
    """The message with its variable parts masked (except the kinds in `keep`)."""
    text = message.strip()[:MAX_MESSAGE_CHARS]
    for name, pattern in MASKS:
        if name not in keep:
            text = pattern.sub(f"<{name}>", text)
    return text


def split_template(template: str) -> list[tuple[str, str]]:
    """The template as ("lit", text) and ("var", kind) parts, in order."""
    parts: list[tuple[str, str]] = []
    at = 0
    for match in _PLACEHOLDER.finditer(template):
        if match.start() > at:
            parts.append(("lit", template[at:match.start()]))
        parts.append(("var", match.group(1)))
        at = match.end()
    if at < len(template):
        parts.append(("lit", template[at:]))
    return parts


@dataclass(slots=True)
class TemplateGroup:
    template: str
    signature: str  # the generic signature the lines fell to
    count: int
    message: str  # the first line's message, secrets masked
    example: str  # the first line as logged, secrets masked
    source: str
    line: int
    fatal: bool

    def to_dict(self) -> dict[str, object]:
        return {"template": self.template, "signature": self.signature, "count": self.count,
                "message": self.message, "example": self.example, "source": self.source,
                "line": self.line, "fatal": self.fatal}


class TemplateGroups:
    """Unrecognised lines by template, most frequent first; bounded memory."""

    def __init__(self, limit: int = MAX_GROUPS) -> None:
        self.limit = limit
        self.groups: dict[str, TemplateGroup] = {}
        self.others = 0  # lines of templates beyond the limit

    def add_line(self, message: str, example: str, signature: str, source: str, line: int,
                 fatal: bool, count: int = 1) -> None:
        message = redact(message.strip())
        template = template_of(message)
        group = self.groups.get(template)
        if group is not None:
            group.count += count
        elif len(self.groups) < self.limit:
            self.groups[template] = TemplateGroup(template, signature, count, message,
                                                  example, source, line, fatal)
        else:
            self.others += count

    def add(self, finding: Finding) -> None:
        """A generic finding's matched line."""
        self.add_line(finding.matched.message, evidence_text(finding.matched),
                      finding.signature.id, finding.source, finding.lineno,
                      finding.signature.fatal)

    def add_all(self, findings: Iterable[Finding]) -> None:
        for finding in findings:
            self.add(finding)

    def ordered(self) -> list[TemplateGroup]:
        """Most lines first; ties in the order they were first seen."""
        return sorted(self.groups.values(), key=lambda g: -g.count)
