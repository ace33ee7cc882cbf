"""Mask secrets (tokens, API keys, passwords, URL credentials) in text read from logs."""

from __future__ import annotations

import re

MASK = "***"
_PATTERNS = (
    # key=value, key: value, 'key': 'value' where the key names a secret
    re.compile(
        r"""(?ix)
        (?P<key>['"]?[\w.-]*(?:token|(?:api|secret|access|private)[_-]?key|secret|password
           |passwd|credentials?)['"]?
           \s*[:=]\s*)
        (?P<quote>['"]?)(?P<value>(?!\*\*\*)[^\s'",}]{1,512})"""
    ),
    re.compile(r"(?i)(?P<key>--(?:api-key|hf-token|token)[ =])(?P<quote>['\"]?)(?P<value>\S+)"),
    re.compile(r"(?i)(?P<key>\bbearer\s+)(?P<quote>)(?P<value>[\w.~+/=-]{8,})"),
    re.compile(r"(?P<key>://[^/\s:@]{1,128}:)(?P<quote>)(?P<value>[^@\s/]{1,256})(?=@)"),
)
_BARE = re.compile(r"\b(?:hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}"
                   r"|xox[abp]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b")


# Every pattern above needs one of these; most text (numbers, log lines) has none.
_TRIGGER = re.compile(
    r"(?i)(?:token|key|secret|passw\w*|credentials?)['\"]?\s*[:=]|--(?:api-key|hf-token|token)"
    r"|bearer\s|://[^/\s:@]+:[^@\s/]+@|hf_[A-Za-z0-9]{30}|sk-[\w-]{20}|gh[pousr]_|xox[abp]-|AKIA"
)


def redact(text: str) -> str:
    """`text` with every recognisable secret value replaced by `***`."""
    if not _TRIGGER.search(text):
        return text
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: f"{m.group('key')}{m.group('quote')}{MASK}", text)
    return _BARE.sub(MASK, text)
