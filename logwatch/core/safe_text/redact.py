"""Mask secrets (tokens, API keys, passwords, URL credentials) in text read from logs.

Every rule finds the character spans of secret values in the text as it is; the spans of
all rules are merged and each becomes `***`, so one rule never has to recognise another's
output, and a piece of a text (a regex capture) can be masked by the spans of its whole.
A value is masked whole however long it is, quoted values up to their closing quote.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

MASK = "***"
Span = tuple[int, int]

# A rule names the groups holding secret values `v...`; only those are masked, so the key,
# the scheme and the host stay readable. Every rule is ASCII-only (IGNORECASE folds A-Z
# alone, \s and \w are ASCII), so the lowered text `_TRIGGER` searches keeps every
# character a rule depends on.
_FLAGS = re.ASCII | re.IGNORECASE | re.MULTILINE
_KEYWORD = (r"(?:token|(?:api|secret|access|private|account)[_-]?key|secret|password|passwd"
            r"|passphrase|pwd|credentials?|(?<![a-z0-9])pass)")
# A quoted value, masked to its closing quote (or the end of the line when cut there);
# `\"...\"` is a quoted value inside a JSON string (a JSON-formatted log line as written).
_QUOTED = (r"""(?:"(?P<v_dq>(?:[^"\\\n]|\\.)*)(?:"|$)|'(?P<v_sq>(?:[^'\\\n]|\\.)*)(?:'|$)"""
           r"""|\\"(?P<v_jq>(?:[^"\\\n]|\\[^"\n])*)(?:\\"|$))""")
_CLOSE_NAME = r"""(?:\\?['"])?"""  # the quote closing a quoted key, JSON-escaped or not
# A list's items up to its `]`: quoted ones may hold a `]` of their own ('api_key': ['a]b'])
_LIST_ITEMS = r"""(?:"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?|[^\]'"\n])*"""

_KEY_VALUE = re.compile(
    # HF_TOKEN=..., api_key: ..., 'password': '...', "aws_secret_access_key": "...". Only
    # at the start of a word, so a long word costs one attempt, not one per character.
    r"""(?<![\w.-])['"]?[\w.-]*?""" + _KEYWORD + _CLOSE_NAME + r"\s*[:=]\s*"
    # a bare value ends at a `;` that starts the next `key=` (a connection string's)
    + r"(?:b?" + _QUOTED + r"|\[(?P<v_list>" + _LIST_ITEMS
    + r""")|(?P<v_bare>(?:[^\s'",};]|;(?!\w+=))+))""",
    _FLAGS)
# In prose: "using token 7f3a9c...", "the password is Tr0ub4dor&3", or the value on the next
# line ("the password is" at a line's end). Only a value that looks like one (a letter and a
# digit or a symbol, 6+ characters, not a flag): "the token is invalid" keeps its word.
# The header vLLM's logger puts on the next line, when a value is carried there in raw text
# (a process prefix, then `LEVEL MM-DD HH:MM:SS [file.py:N] `)
_LINE_HEADER = (r"(?:\([\w.-]+(?: [\w.-]+)? pid=\d+\)[ \t]+)?"
                r"(?:[a-z]+[ \t]+\d\d-\d\d[ \t]+[\d:.]+[ \t]+\[[^\]\n]{0,200}\][ \t]+)?")
_PROSE = re.compile(
    r"(?<![\w-])(?:token|api[ _-]?key|secret|password|passwd|passphrase)"
    r"(?:[ \t]+(?:is|was))?(?:[ \t]+|[ \t]*\r?\n" + _LINE_HEADER + r"[ \t]*)"
    r"""(?P<v>(?!-)(?=[^\s'",;]*[a-z])(?=[^\s'",;]*[\d@#$%&*!?+/=_-])[^\s'",;]{6,})""",
    _FLAGS)
# curl -u user:password, --user, --proxy-user: the password after the user's `:`
_USER_FLAG = re.compile(
    r"""(?<![\w-])(?:-u|--user|--proxy-user)(?:[ \t]+|=)['"]?[^\s:'"@/]+:(?P<v>[^\s'"]+)""",
    _FLAGS)
# Cookie and Set-Cookie headers: the header's value, every `name=value; ...` of it
_COOKIE = re.compile(
    r"(?<![\w-])(?:set-)?cookie\s*:\s*(?P<v>[^\s;]+(?:;[ \t]*[^\s;]+)*)", _FLAGS)
# user:password@host without a scheme (a proxy setting, a DSN written short)
_USERINFO = re.compile(
    r"""(?<![\w/:@.-])[\w.-]{1,64}:(?P<v>[^\s@/:'"]{3,})@(?=\d{1,3}\.\d|[\w-]+\.[\w.-]+)""",
    _FLAGS)
_FLAG = re.compile(
    # --api-key X, --hf-token=X, '--api-key', 'X' (a Python list of argv)
    r"(?<![\w-])--(?:[a-z0-9]+[-_])*(?:api[-_]?key|token|secret|password|passwd|credentials?)"
    r"(?:=|" + _CLOSE_NAME + r",?[ \t]+)(?:" + _QUOTED + r"""|(?P<v_bare>[^\s'"]+))""", _FLAGS)
_AUTHORIZATION = re.compile(
    # Authorization: Basic dXNlcjpwYXNz, -H 'Proxy-Authorization: Bearer ...', JSON headers:
    # the scheme stays readable, the credentials after it go
    r"authorization" + _CLOSE_NAME + r"\s*[:=]\s*" + _CLOSE_NAME
    + r"(?:(?:basic|bearer|token|digest|negotiate|ntlm|api-?key|key|hmac|aws4-hmac-sha256"
    r"""|dpop|mac|oauth)[ \t]+)?(?P<v>[^\s'",}]+)""", _FLAGS)
_BEARER = re.compile(r"(?<![\w-])bearer\s+(?P<v>[\w.~+/=-]{8,})", _FLAGS)
# Basic credentials outside a header line: only base64 that decodes to "user:password"
_BASIC = re.compile(r"(?<![\w-])basic\s+(?P<v>[A-Za-z0-9+/]{4,}={0,2})(?![\w+/=-])", _FLAGS)
_URL_CREDENTIALS = re.compile(
    # scheme://user:password@host: the password runs to the authority's LAST `@` (a raw `@`
    # in a password is common enough); a userinfo of 16+ characters is a token used as the
    # user (https://ghp_...@github.com, https://TOKEN:x-oauth-basic@host) and goes too
    r"://(?:(?P<v_user>[^\s/?#:]{16,})|[^\s/?#:@]{0,15})(?::(?P<v_pw>[^\s/?#]*))?@", _FLAGS)
_URL_PASSWORD_SLASH = re.compile(
    # redis://:pa/ss@host: a `/` in the password (not allowed there, but written all the
    # same); digits and a `/` after the `:` are a port and a path (http://host:8000/a@b)
    r"://[^\s/?#:@]{0,15}:(?!\d+(?:/|$))(?P<v>[^\s@/?#]*/[^\s@]*)@(?=[\w.-])", _FLAGS)
_URL_SIGNATURE = re.compile(
    # signed URLs: S3/GCS presigned (X-Amz-Signature, X-Amz-Credential, X-Goog-Signature),
    # CloudFront and the Hugging Face CDN (Signature=), Azure SAS (sig=)
    r"[?&](?:x-(?:amz|goog)-)?(?:signature|sig|credential)=(?P<v>[^&\s#'\"]+)", _FLAGS)
_BARE_TOKEN = re.compile(
    # the known prefixes of high-entropy tokens: Hugging Face, OpenAI/Anthropic, GitHub,
    # GitLab, Slack, AWS key ids, Stripe, Google API keys and OAuth tokens, npm, PyPI, JWTs
    r"\b(?P<v>hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,}|xox[abpre]-[A-Za-z0-9-]{10,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}\b|[sr]k_(?:live|test)_[0-9A-Za-z]{16,}"
    r"|AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_-]{20,}|npm_[A-Za-z0-9]{36}"
    r"|pypi-AgE[A-Za-z0-9_-]{16,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})", re.ASCII)
# An AWS secret access key on its own: exactly 40 characters of base64's alphabet.
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])(?P<v>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
                         re.ASCII)


def _is_basic_credentials(value: str) -> bool:
    try:
        decoded = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    return ":" in decoded and decoded.isprintable()


def _is_aws_secret(value: str) -> bool:
    """A random 40-character key has both cases and a digit, `/` or `+`: all but about one
    in 4,000 do (asking for `/` or `+` alone would miss one key in four). What else in
    vLLM's logs has 40 such characters does not: a git sha or SHA-1 is hex of one case, and
    longer base64 or hashes are not exactly 40 long. A mixed-case path of exactly 40
    characters (`/`, letters and digits, no `.`, `_` or `-`) would be masked: a path
    fragment lost from evidence costs less than a key kept."""
    return (any(c.isupper() for c in value) and any(c.islower() for c in value)
            and any(c.isdigit() or c in "/+" for c in value))


Rule = tuple[re.Pattern[str], Callable[[str], bool] | None]
RULES: tuple[Rule, ...] = (  # (pattern, test of a value it found)
    (_KEY_VALUE, None), (_PROSE, None), (_FLAG, None), (_USER_FLAG, None), (_COOKIE, None),
    (_USERINFO, None), (_AUTHORIZATION, None), (_BEARER, None),
    (_BASIC, _is_basic_credentials), (_URL_CREDENTIALS, None), (_URL_PASSWORD_SLASH, None),
    (_URL_SIGNATURE, None), (_BARE_TOKEN, None),
    (_AWS_SECRET, _is_aws_secret),
)

# A match of any rule implies a match here, on the lowered text: each branch is a piece
# every match of some rule contains (lowered; every rule is ASCII-only). Ordinary lines match
# nothing. Why it looks odd: a case-sensitive search of lowered text is ~5x faster than a
# case-blind one, and each branch starts with a literal, the rarest letters of the word
# where that keeps it a piece of every match (`ken` of token, `word`/`wd` of password), so
# the search skips the positions no branch can start at; `horization` of authorization, as
# `zation` alone is quantization's too (vLLM's engine config line, kilobytes long, holds
# `quantization=` at every start).
_AFTER_NAME = _CLOSE_NAME + r"(?:\s*[:=]|,?[ \t])"  # key-value `=`/`:`, or a flag's argument
_TRIGGER = re.compile(
    r"ken" + _AFTER_NAME + r"|key" + _AFTER_NAME + r"|w(?:or)?d" + _AFTER_NAME
    + r"|cret" + _AFTER_NAME + r"|credential|horization" + _CLOSE_NAME
    + r"\s*[:=]|bearer\s|basic\s"
    r"|://[^\s]*@|gnature=|sig=|f_[a-z0-9]{30}|k-[a-z0-9_-]{20}|gh[pousr]_|github_pat_|glpat-"
    r"|xox[abpre]-|kia[0-9a-z]{16}|sia[0-9a-z]{16}|phrase" + _AFTER_NAME + r"|pass\s*[:=]"
    r"|word[ \t]*\r?\n|ken[ \t]*\r?\n|-u[ \t=]|--user|--proxy-user|cookie\s*:"
    r"|:[^\s@/:'\"]{3,}@|k_live_|k_test_|aiza|ya29\.|npm_|pypi-age|eyj[a-z0-9_-]{8,}\.",
    re.ASCII)
# The 40 characters of an AWS key are searched apart: a branch starting with a repeat
# would disable that skip for all the others.
_TRIGGER_RUN = re.compile(r"[A-Za-z0-9/+=]{40}", re.ASCII)


def might_hold_secret(text: str) -> bool:
    """False when no rule can match: the fast path for ordinary lines."""
    if text.isascii() and (native := _native_trigger()) is not None:
        return native.search(text.lower().encode("ascii"))
    return _TRIGGER.search(text.lower()) is not None or (
        len(text) >= 40 and _TRIGGER_RUN.search(text) is not None)


class _NativeTrigger:
    """`_TRIGGER` and `_TRIGGER_RUN` in one Hyperscan database, for ASCII text lowered: the
    same expressions (ASCII classes, `\\s` the same six characters), the run's
    `[A-Za-z0-9/+=]` lowered with its text. `re` tries each branch at almost every
    position (8 us for a stats line); this is one pass (0.3 us). Each thread scans with
    its own scratch space (a shared one refuses a second thread)."""

    def __init__(self, hs: Any) -> None:
        self._hs = hs
        self._db = hs.Database(mode=hs.HS_MODE_BLOCK)
        expressions = [_TRIGGER.pattern.encode("ascii"), rb"[a-z0-9/+=]{40}"]
        self._db.compile(expressions=expressions, ids=[0, 1], elements=2,
                         flags=[hs.HS_FLAG_SINGLEMATCH] * 2)
        self._local = threading.local()

    def search(self, lowered: bytes) -> bool:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._hs.Scratch(self._db)
        try:
            self._db.scan(lowered, match_event_handler=_stop, scratch=scratch)
        except self._hs.ScanTerminated:
            return True
        return False


def _stop(*_: object) -> bool:
    return True  # the first match answers


@functools.cache
def _native_trigger() -> _NativeTrigger | None:
    try:  # the native engine is optional (logwatch.core.signatures.prefilter)
        import hyperscan
    except ImportError:  # pragma: no cover - depends on the platform
        return None
    return _NativeTrigger(hyperscan)


def warm() -> None:
    """Build the secret trigger's Hyperscan database now (about 25 ms), not on the first
    text a caller asks about (a daemon's first finding)."""
    _native_trigger()


def find_secrets(text: str) -> list[Span]:
    """Every rule's spans, merged, without the fast path (tests compare both)."""
    spans: list[Span] = []
    for pattern, accept in RULES:
        for match in pattern.finditer(text):
            for name, value in match.groupdict().items():
                if name.startswith("v") and value and (accept is None or accept(value)):
                    spans.append(match.span(name))
    return _merge(spans)


def secret_spans(text: str) -> list[Span]:
    """The (start, end) spans of secret values in `text`, sorted and disjoint."""
    return find_secrets(text) if might_hold_secret(text) else []


def _merge(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def mask_spans(text: str, spans: Sequence[Span]) -> str:
    """`text` with each of the sorted, disjoint `spans` replaced by `***`."""
    if not spans:
        return text
    parts: list[str] = []
    pos = 0
    for start, end in spans:
        parts += (text[pos:start], MASK)
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def redact(text: str) -> str:
    """`text` with every recognisable secret value replaced by `***`."""
    return mask_spans(text, secret_spans(text))


def spans_for_parts(text: str) -> list[Span] | None:
    """The secrets of a text whose parts (captures) `redact_slice` will mask; None when no
    part can hold one. The fast path's patterns have no anchors or lookarounds, so what
    they find in a part they find in the whole: a whole they pass proves every part clean."""
    return find_secrets(text) if might_hold_secret(text) else None


def redact_slice(text: str, start: int, end: int, spans: Sequence[Span] | None) -> str:
    """`text[start:end]` (a capture) masked by `spans`, the secrets of the whole `text` from
    `spans_for_parts`, and by its own: a capture holding only the second word of a quoted
    password, or a password without its `password=`, is masked all the same."""
    piece = text[start:end]
    if spans is None:
        return piece
    inside = [(max(s, start) - start, min(e, end) - start) for s, e in spans
              if s < end and e > start]
    return mask_spans(piece, _merge(inside + secret_spans(piece)))


def redact_head(data: bytes, limit: int) -> str:
    """The start of `data` decoded and masked: the whole lines that fit in `limit` bytes.
    A first line longer than that is not shown at all, only its length: masking it whole
    costs seconds for a line of tens of MB, and cutting it first could split a secret."""
    if len(data) > limit:
        end = data.rfind(b"\n", 0, limit) + 1
        if end == 0:
            first = data.find(b"\n", limit) + 1 or len(data)
            return f"[a line of {first:,} bytes, longer than {limit:,}: not shown]\n"
        data = data[:end]
    return redact(data.decode("utf-8", errors="replace"))


SECRET_NAME_WORDS = frozenset({"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL",
                               "CREDENTIALS", "APIKEY", "PASS"})
SECRET_FLAGS = ("--api-key", "--hf-token", "--token")


# Parts of a word that say secret wherever they stand (PGPASSWORD, DB_SECRETS); TOKEN and KEY
# only as whole words (max_num_batched_tokens, KEYBOARD are not secrets).
SECRET_NAME_PARTS = ("PASSWORD", "PASSWD", "SECRET", "CREDENTIAL")


def is_secret_name(name: str) -> bool:
    """HF_TOKEN, OPENAI_API_KEY, --api-key, PGPASSWORD, MYSQL_PWD: a word of the name says
    secret (max_num_batched_tokens and the shell's PWD do not)."""
    words = [w for w in re.split(r"[^A-Z0-9]+", name.upper()) if w]
    return any(word in SECRET_NAME_WORDS or any(p in word for p in SECRET_NAME_PARTS)
               or (word == "PWD" and len(words) > 1) for word in words)


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
