"""Mask secrets (tokens, API keys, passwords, URL credentials) in text read from logs."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

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


SECRET_NAME_WORDS = frozenset({"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL",
                               "CREDENTIALS", "APIKEY", "PASS"})
SECRET_FLAGS = ("--api-key", "--hf-token", "--token")


def is_secret_name(name: str) -> bool:
    """HF_TOKEN, OPENAI_API_KEY, --api-key: a whole word of the name says secret
    (max_num_batched_tokens does not)."""
    return any(word in SECRET_NAME_WORDS for word in re.split(r"[^A-Z0-9]+", name.upper()))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Environment with values of secret-named variables masked, and secrets in others too."""
    return {k: MASK if is_secret_name(k) else redact(v) for k, v in env.items()}


def redact_argv(argv: Sequence[str]) -> list[str]:
    """argv with values of secret flags (`--api-key X`, `--api-key=X`) and inline secrets masked."""
    out: list[str] = []
    mask_next = False
    for token in argv:
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        flag, eq, _ = token.partition("=")
        if flag.startswith("--") and (flag in SECRET_FLAGS or is_secret_name(flag.strip("-"))):
            if eq:
                out.append(f"{flag}={MASK}")
            else:
                out.append(token)
                mask_next = True
            continue
        out.append(redact(token))
    return out
