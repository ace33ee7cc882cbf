"""Secret masking, form by form: each secret gone, its context kept, every form reached
through the fast path, and ordinary vLLM lines left alone."""

from __future__ import annotations

import random
import string
import threading
from dataclasses import dataclass
from datetime import datetime

import pytest

from logwatch.core.lines.assemble import assemble
from logwatch.core.lines.vllm_format import parse_line
from logwatch.core.safe_text import redact as redact_module
from logwatch.core.safe_text.redact import (
    MASK,
    RULES,
    find_secrets,
    mask_spans,
    might_hold_secret,
    redact,
    redact_head,
    redact_slice,
    secret_spans,
    spans_for_parts,
)
from logwatch.core.signatures.matcher import Matcher
from logwatch.core.signatures.signature import Example, Pattern, Signature
from tests.conftest import SAMPLES


@dataclass(frozen=True)
class Form:
    name: str
    text: str
    secrets: tuple[str, ...]  # none of these may survive
    kept: tuple[str, ...]  # context that must survive


_rng = random.Random(8)
LONG = "".join(_rng.choices(string.ascii_letters + string.digits, k=600))
LONG_WORDS = " ".join("".join(_rng.choices(string.ascii_lowercase, k=7)) for _ in range(90))
GH = "ghp_R8b2Kq4Zt6Wm1Xv3Yc5Nd7Pf9Hg0Js2La4Me6"
HF = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm0123456789"
AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
AWS_DIGITS = "Zk3pQ9rT2vW8xY1aB4cD6eF0gH5jK7mN2pQ4rS6t"  # no `/` or `+`
AWS_PLUS = "je7MtGbClwBF+2Zp9Utk/h3yCo8nvbEXAMPLEKEY"

FORMS: tuple[Form, ...] = (
    Form("basic_header", "Authorization: Basic dXNlcjpodW50ZXIy",
         ("dXNlcjpodW50ZXIy",), ("Authorization: Basic",)),
    Form("basic_curl_header",
         "curl -H 'Authorization: Basic YWxpY2U6czNjcjN0LXBhc3M=' https://api.example.com/v1",
         ("YWxpY2U6czNjcjN0LXBhc3M",), ("curl -H 'Authorization: Basic", "api.example.com/v1")),
    Form("basic_without_header", "upstream auth Basic Ym9iOnRvcC1zZWNyZXQ= rejected",
         ("Ym9iOnRvcC1zZWNyZXQ",), ("upstream auth Basic", "rejected")),
    Form("proxy_authorization_json",
         '{"Proxy-Authorization": "Basic cHJveHk6cHJveHlwYXNz", "Host": "proxy.example.com"}',
         ("cHJveHk6cHJveHlwYXNz",), ('"Host": "proxy.example.com"',)),
    Form("bearer_header",
         "-H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ2bGxtIn0.c2lnbmF0dXJl'",
         ("eyJhbGciOiJIUzI1NiJ9", "eyJzdWIiOiJ2bGxtIn0", "c2lnbmF0dXJl"),
         ("Authorization: Bearer",)),
    Form("bearer_json", '{"headers": {"authorization": "Bearer tok_0a1b2c3d4e5f6g7h"}}',
         ("tok_0a1b2c3d4e5f6g7h",), ('"headers"',)),
    Form("url_password", "fetch https://bob:hunter2pass@example.org/x failed",
         ("hunter2pass",), ("https://bob:", "@example.org/x failed")),
    Form("url_password_with_at", "proxy https://user:p@ss@word@proxy.example.com:3128/ down",
         ("p@ss@word", "p@ss", "ss@word", "@word@"), ("https://user:", "@proxy.example.com:3128/")),
    Form("url_token_user_github", f"clone https://{GH}@github.com/acme/model.git",
         (GH, GH[4:]), ("https://", "@github.com/acme/model.git")),
    Form("url_token_user_any", "clone https://Zq8xK2mN4pR7tV1wY3bC5dF9@gitlab.example.com/g/p",
         ("Zq8xK2mN4pR7tV1wY3bC5dF9",), ("@gitlab.example.com/g/p",)),
    Form("url_token_user_with_password",
         "https://0f3c9a1b7e2d4c6a8b0e1f3a5c7d9e1b3f5a7c90:x-oauth-basic@github.com/acme/x",
         ("0f3c9a1b7e2d4c6a8b0e1f3a5c7d9e1b3f5a7c90", "x-oauth-basic"),
         ("@github.com/acme/x",)),
    Form("value_over_512", f"PASSWORD={LONG} next", (LONG[:40], LONG[512:], LONG[-40:]),
         ("PASSWORD=", " next")),
    Form("quoted_value_over_512", f'"api_key": "{LONG_WORDS}", "model": "m"',
         (LONG_WORDS[:40], LONG_WORDS[520:], LONG_WORDS[-30:]), ('"model": "m"',)),
    Form("double_quoted_words", 'login password="correct horse battery" for admin',
         ("correct", "horse", "battery"), ('login password="', '" for admin')),
    Form("single_quoted_words", "retry with password='staple tongue pliers' now",
         ("staple", "tongue", "pliers"), ("retry with password='", "' now")),
    Form("quoted_with_escapes", '{"password": "say \\"open sesame\\" twice", "user": "u"}',
         # "open" alone is a word of paths (pytest-xdist's `popen-gw1`): the phrase is it
         ("open sesame", "sesame", "twice"), ('"user": "u"',)),
    Form("json_log_escaped_quotes",
         '{"message": "login password=\\"lunar orbit velvet\\" failed", "level": "ERROR"}',
         ("lunar", "orbit", "velvet"), ('failed", "level": "ERROR"}',)),
    Form("json_log_escaped_key", '{"message": "body {\\"api_key\\": \\"amber quartz\\"} sent"}',
         ("amber", "quartz"), ("sent",)),
    Form("json_log_escaped_header",
         '{"message": "{\\"Authorization\\": \\"Bearer Zm9vYmFyYmF6cXV4\\"}"}',
         ("Zm9vYmFyYmF6cXV4",), ('{"message": "{',)),
    Form("aws_secret_bare", f"using key {AWS} for s3", (AWS, AWS[:20], AWS[20:]),
         ("using key", "for s3")),
    Form("aws_secret_digits_only", f"creds {AWS_DIGITS} loaded", (AWS_DIGITS,),
         ("creds", "loaded")),
    Form("aws_secret_named", f"aws_secret_access_key = {AWS_PLUS}", (AWS_PLUS,),
         ("aws_secret_access_key = ",)),
    Form("aws_env", f"AWS_SECRET_ACCESS_KEY={AWS} AWS_REGION=us-east-1", (AWS,),
         ("AWS_REGION=us-east-1",)),
    Form("json_api_key", '{"api_key": "sk-live-0123456789abcdefghij", "model": "qwen"}',
         ("sk-live-0123456789",), ('"model": "qwen"',)),
    Form("python_dict", "{'api_key': 'k3y-with-dashes', 'port': 8000}",
         ("k3y-with-dashes",), ("'api_key': '", "'port': 8000")),
    Form("python_list_value", "{'api_key': ['first-k3y', 'second-k3y'], 'port': 8000}",
         ("first-k3y", "second-k3y"), ("'port': 8000",)),
    Form("hf_token_env", f"HF_TOKEN={HF} HF_HOME=/cache", (HF, HF[3:]), ("HF_HOME=/cache",)),
    Form("hub_token_env", "HUGGING_FACE_HUB_TOKEN=abcdef0123456789", ("abcdef0123456789",),
         ("HUGGING_FACE_HUB_TOKEN=",)),
    Form("openai_env", "export OPENAI_API_KEY=proj-5a4b3c2d1e", ("proj-5a4b3c2d1e",),
         ("export OPENAI_API_KEY=",)),
    Form("flag_space", "--api-key s3cr3t-flag-value --port 8000", ("s3cr3t-flag-value",),
         ("--api-key", "--port 8000")),
    Form("flag_equals", "--hf-token=tok-abc-0123456789 --port 8000", ("tok-abc-0123456789",),
         ("--hf-token=", "--port 8000")),
    Form("flag_quoted", '--api-key "two word-key" --port 8000', ("two word-key", "word-key"),
         ("--port 8000",)),
    Form("argv_list", "['vllm', 'serve', '--api-key', 'argv-s3cret', '--port', '8000']",
         ("argv-s3cret",), ("'--port', '8000'",)),
    Form("bare_github_token", f"token {GH} leaked", (GH[4:],), ("leaked",)),
    Form("bare_openai_key", "key sk-proj-abcdefghijklmnopqrstuvwx used",
         ("abcdefghijklmnopqrstuvwx",), ("used",)),
    Form("bare_fine_grained_pat", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
         ("11ABCDEFG0123456789",), ()),
    Form("bare_gitlab_token", "glpat-Ab1Cd2Ef3Gh4Ij5Kl6Mn rejected", ("Ab1Cd2Ef3Gh4Ij5Kl6Mn",),
         ("rejected",)),
    Form("bare_slack_token", "xoxb-1234567890-abcdefghij posted", ("1234567890-abcdefghij",),
         ("posted",)),
    Form("bare_aws_key_id", "key id AKIAIOSFODNN7EXAMPLE", ("AKIAIOSFODNN7EXAMPLE",),
         ("key id",)),
    # found by an adversarial review
    Form("list_item_holding_a_bracket",
         "non-default args: {'api_key': ['Zq8]LEAK1-api-key-tail'], 'port': 8000}",
         ("Zq8", "LEAK1-api-key-tail"), ("'port': 8000",)),
    Form("bytes_literal_value", "{'api_key': b'bytes-s3cret-value', 'port': 8000}",
         ("bytes-s3cret-value",), ("'port': 8000",)),
    Form("url_password_with_slash", "connect redis://:LEAK3pw/x9@cache.internal:6379/0 failed",
         ("LEAK3pw", "x9@"), ("redis://:", "@cache.internal:6379/0 failed")),
    Form("cdn_signed_url",
         "GET https://cdn-lfs.hf.co/repos/ab/cd?Expires=1764000000&Policy=eyJTdGF0&"
         "Signature=Qm9ndXNTaWduYXR1cmU~abc-_&Key-Pair-Id=K3RPWS32NSSJCE 403",
         ("Qm9ndXNTaWduYXR1cmU",), ("Key-Pair-Id=K3RPWS32NSSJCE 403", "Expires=1764000000")),
    Form("s3_presigned_url",
         "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIDEXAMPLE%2F20261130&"
         "X-Amz-Signature=9f86d081884c7d659a2feaa0c55ad015&X-Amz-Expires=60",
         # a value after a key word runs to the next space: a password may hold an `&`
         ("9f86d081884c7d659a2feaa0c55ad015", "AKIDEXAMPLE"), ("amazonaws.com/k?",)),
    Form("connection_string_pwd", "connect Server=db;Uid=app;Pwd=hunter4-PW;Encrypt=yes",
         ("hunter4-PW",), ("Server=db;Uid=app;Pwd=",)),
    Form("azure_sas_url", "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig=LEAK4%2Bab"
         "%3D&se=2026", ("LEAK4",), ("sv=2022-11-02", "&se=2026")),
    # issue 30's structures: credentials by the key that names them, by the flag that
    # carries them, by a header, and by the known prefixes of high-entropy tokens
    Form("curl_user", "curl -u alice:Wonderland-42 https://api.example.com/v1/models",
         ("Wonderland-42",), ("curl -u alice:", "api.example.com")),
    Form("curl_long_user", "curl --user admin:s3cr3t-pa55 -X POST http://h/x",
         ("s3cr3t-pa55",), ("--user admin:", "-X POST")),
    Form("prose_using_token", "using token 7f3a9c1e5b2d4f6a8c0e for the hub",
         ("7f3a9c1e5b2d4f6a8c0e",), ("using token", "for the hub")),
    Form("prose_password_is", "the password is Tr0ub4dor&3 for root",
         ("Tr0ub4dor&3",), ("the password is", "for root")),
    Form("toml_api_key", 'api_key = "toml-s3cret-value"', ("toml-s3cret-value",),
         ("api_key = ",)),
    Form("yaml_password", "  password: yaml-pa55word", ("yaml-pa55word",), ("password:",)),
    Form("cookie_header", "Cookie: sessionid=abc123def456ghi; csrftoken=Zx9Yw8Vu7",
         ("abc123def456ghi", "Zx9Yw8Vu7"), ("Cookie:",)),
    Form("set_cookie", "Set-Cookie: auth=eyJhbGciOiJIUzI1NiJ9x; Path=/; HttpOnly",
         ("eyJhbGciOiJIUzI1NiJ9x",), ("Set-Cookie:",)),
    Form("bare_jwt", "token rejected: eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3"
         "ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U expired",
         ("dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "eyJzdWIiOiIxMjM0NTY3ODkwIn0"),
         ("token rejected:", "expired")),
    Form("google_api_key", "maps key AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q in use",
         ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",), ("in use",)),
    Form("stripe_key", "charge via sk_live_51H8abcdefghijklmnopqrstu failed",
         ("sk_live_51H8abcdefghijklmnopqrstu",), ("charge via", "failed")),
    Form("npm_token", "npm_abcdefghijklmnopqrstuvwxyz0123456789 published",
         ("npm_abcdefghijklmnopqrstuvwxyz0123456789",), ("published",)),
    Form("pypi_token", "upload with pypi-AgEIcHlwaS5vcmcCJDEyMzQ1Njc4OTAx done",
         ("pypi-AgEIcHlwaS5vcmcCJDEyMzQ1Njc4OTAx",), ("upload with", "done")),
    Form("google_oauth", "access ya29.a0AfH6SMBx1234567890abcdefGHIJ granted",
         ("ya29.a0AfH6SMBx1234567890abcdefGHIJ",), ("granted",)),
    Form("azure_account_key", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
         "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;EndpointSuffix=core.windows.net",
         ("Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==",), ("AccountName=acct", "EndpointSuffix")),
    Form("db_pass", "db_pass=hunter5-db db_host=pg.internal", ("hunter5-db",),
         ("db_host=pg.internal",)),
    Form("passphrase", "ssh passphrase: correct-staple-42", ("correct-staple-42",),
         ("ssh passphrase:",)),
    Form("userinfo_without_scheme", "proxy alice:Pr0xyPass@10.0.0.1:3128 refused",
         ("Pr0xyPass",), ("10.0.0.1:3128 refused",)),
    Form("mongodb_srv", "mongodb+srv://app:M0ngoPass@cluster0.example.net/db",
         ("M0ngoPass",), ("cluster0.example.net/db",)),
    Form("x_api_key_header", "-H 'X-API-Key: 0123abcdef4567ghij'", ("0123abcdef4567ghij",),
         ("X-API-Key:",)),
    Form("private_key_field", '"private_key": "-----BEGIN PRIVATE KEY-----MIIEvQIBADAN"',
         ("MIIEvQIBADAN",), ('"private_key":',)),
    Form("password_next_line", "the password is\n  hunter6-NEXT", ("hunter6-NEXT",),
         ("the password is",)),
)

# Lines that look a little like secrets and are not: they must come out unchanged.
NOT_SECRETS = (
    "GET http://localhost:8000/v1/users/@alice 404",  # a port and a path with an @
    "see https://example.com/@vllm-project for details",
    "commit 1f3a9c0d2b4e6f8a0c1e3f5a7b9d1e3f5a7c9e1b checked out",  # a git sha: 40 hex
    "SHA1 1F3A9C0D2B4E6F8A0C1E3F5A7B9D1E3F5A7C9E1B",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmn ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMN",
    "max_num_batched_tokens=8192 tokenizer='/m' Accepted: 5 tokens",
    "Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s",
    "http://localhost:8000/v1/models ssh://git@github.com/acme/repo.git",
    "Basic usage: vllm serve MODEL; bearer token missing",
    "non-default args: {'quantization': 'fp8', 'kv_cache_dtype': 'fp8'}",
    "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py",
    "Using 'FLASHINFER_CUTLASS' NvFp4 MoE backend out of ['FLASHINFER_CUTLASS', 'MARLIN']",
)


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
def test_every_form_is_masked_and_its_context_kept(form: Form) -> None:
    out = redact(form.text)
    assert MASK in out
    for secret in form.secrets:
        assert secret not in out, out
    for context in form.kept:
        assert context in out, out
    assert redact(out) == out  # masking twice changes nothing


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
def test_every_form_trips_the_fast_path(form: Form) -> None:
    assert might_hold_secret(form.text)


def test_every_rule_is_exercised_by_a_form() -> None:
    for pattern, accept in RULES:
        assert any(accept is None or accept(m.group(m.lastgroup or 0))
                   for form in FORMS for m in pattern.finditer(form.text)), pattern.pattern


def _variants(text: str) -> list[str]:
    """The text cut at every place, in other cases, and inside other text."""
    step = 1 if len(text) < 200 else 7
    cut = [text[:i] for i in range(0, len(text), step)] + [text[i:] for i in range(0, len(text),
                                                                                  step)]
    return [*cut, text.upper(), text.lower(), text.swapcase(), f"é\u00a0x={text}\u2028",
            f"(APIServer pid=1) ERROR 11-29 22:38:00 [core.py:1] {text}\nnext line"]


def test_the_fast_path_never_skips_a_secret() -> None:
    """Whatever any rule would mask, the fast path lets through to the rules."""
    texts = [v for f in FORMS for v in _variants(f.text)]
    texts += [v for t in NOT_SECRETS for v in _variants(t)]
    for text in texts:
        if find_secrets(text):
            assert might_hold_secret(text), text
        assert redact(text) == mask_spans(text, find_secrets(text)), text


def test_the_native_trigger_answers_as_the_expressions_do() -> None:
    """`might_hold_secret` asks Hyperscan for ASCII text: on every form of every secret,
    every look-alike, their cuts and every line of the samples, it answers as `_TRIGGER` and
    `_TRIGGER_RUN` do with `re`."""
    native = redact_module._native_trigger()
    if native is None:
        pytest.skip("hyperscan not installed: `re` answers alone")
    texts = [v for f in FORMS for v in _variants(f.text)]
    texts += [v for t in NOT_SECRETS for v in _variants(t)]
    for path in sorted(SAMPLES.glob("*.log")):
        texts += path.read_text(encoding="utf-8", errors="replace").splitlines()
    rng = random.Random(4)
    texts += ["".join(rng.choice("ke=:y/@+ \t\n'\"ABz0") for _ in range(rng.randint(0, 60)))
              for _ in range(3000)]
    answered = 0
    for text in texts:
        if not text.isascii():
            continue
        expected = redact_module._TRIGGER.search(text.lower()) is not None or (
            len(text) >= 40 and redact_module._TRIGGER_RUN.search(text) is not None)
        assert native.search(text.lower().encode("ascii")) == expected, text
        answered += expected
    assert 100 < answered < len(texts) - 100  # both answers met


def test_the_native_trigger_serves_threads_at_once() -> None:
    """The daemon redacts on its database thread while its loop thread matches: Hyperscan's
    scratch space serves one scan at a time, so each thread has its own."""
    if redact_module._native_trigger() is None:
        pytest.skip("hyperscan not installed")
    errors: list[BaseException] = []
    text = "x " * 3000 + "password=hunter2"

    def run() -> None:
        try:
            for _ in range(300):
                assert might_hold_secret(text)
                assert not might_hold_secret("Avg prompt throughput: 1.0 tokens/s " * 50)
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:1]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_lookalikes_are_left_alone(text: str) -> None:
    assert redact(text) == text


def test_vllm_s_engine_config_line_does_not_wake_the_rules() -> None:
    """Every vLLM start logs its engine config, kilobytes long, with `quantization=` in it:
    the fast path must not send it through every rule (which costs ~250 us a time)."""
    line = ("Initializing a V1 LLM engine (v0.11.0) with config: model='m', "
            "quantization=modelopt_fp4, enforce_eager=False, " + "x=1, " * 500)
    assert not might_hold_secret(line)
    assert might_hold_secret("Proxy-Authorization: Basic dXNlcjpwYXNz")


def test_ordinary_vllm_logs_are_left_alone() -> None:
    for path in sorted(SAMPLES.glob("*.log")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            assert redact(line) == line, f"{path.name}: {line}"


def test_a_capture_is_masked_by_the_secrets_of_its_whole_text() -> None:
    text = 'login password="correct horse battery" for admin'
    start = text.index("horse")
    assert redact("horse") == "horse"  # on its own, nothing says secret
    spans = spans_for_parts(text)
    assert spans == secret_spans(text)
    assert redact_slice(text, start, start + 5, spans) == MASK
    assert redact_slice(text, 0, 5, spans) == "login"
    tail = text.index("battery")
    assert redact_slice(text, tail, len(text), spans) == f'{MASK}" for admin'
    assert spans_for_parts("Accepted: 5 tokens") is None


def test_no_part_of_a_text_the_fast_path_passes_holds_a_secret() -> None:
    """What `spans_for_parts` relies on to skip the captures of ordinary lines."""
    lines = (SAMPLES / "demo_marlin_and_mtp.log").read_text(encoding="utf-8").splitlines()
    texts = [t for t in [*NOT_SECRETS, *lines[:60]] if not might_hold_secret(t)]
    assert len(texts) > 50
    for text in texts:
        for i in range(0, len(text), 3):
            for j in range(i + 1, len(text) + 1, 3):
                assert not might_hold_secret(text[i:j]), (text, text[i:j])


def test_the_matcher_masks_a_capture_holding_part_of_a_secret() -> None:
    signature = Signature(
        id="site.login", version=1, status="experimental", severity="error", fatal=False,
        category="auth", title="login failed",
        patterns=(Pattern(r'login failed: password="\w+ (?P<word>\w+)', ("login failed",)),),
        explanation="{word}", remedy="investigate", examples=(Example("x"),),
        counter_examples=())
    line = parse_line("t", 1, '(APIServer pid=1) ERROR 11-29 22:38:00 [auth.py:1] login '
                      'failed: password="correct horse battery"', datetime(2026, 11, 29))
    (record,) = assemble([line])
    (finding,) = Matcher([signature], engine="python").match_record(record)
    assert finding.captures == {"word": MASK}
    assert "horse" not in str(finding.evidence)


def test_subscriber_text_is_cut_after_masking() -> None:
    limit = 1 << 16
    long_line = b"x" * (limit - 20) + b" https://user:" + b"p4ss" * 100 + b"@host\n"
    text = redact_head(long_line + b"next\n", limit)  # not masked (seconds for a long one)
    assert text == f"[a line of {len(long_line):,} bytes, longer than 65,536: not shown]\n"
    first = b"y" * (limit - 100) + b"\n"
    text = redact_head(first + b"PASSWORD=" + b"z" * 500 + b"\n", limit)
    assert text == first.decode()  # whole lines only
    short = b"HF_TOKEN=abc\n"
    assert redact_head(short, limit) == "HF_TOKEN=***\n"


def test_the_probe_has_fifty_forms_and_more() -> None:
    """Issue 30: a probe of at least 50 forms (the end-to-end test sends each through the
    scan's output, the history and the daemon's events)."""
    assert len(FORMS) >= 50
    assert len({form.name for form in FORMS}) == len(FORMS)


def test_a_value_carried_to_the_next_logged_line_is_masked_in_raw_text() -> None:
    """Raw text (the daemon's `lines` events): the value on the next line comes after that
    line's own logger header."""
    raw = ("(EngineCore_DP0 pid=8) ERROR 11-29 22:38:02 [core.py:1099] login failed, the "
           "password is\n(EngineCore_DP0 pid=8) ERROR 11-29 22:38:02 [core.py:1099]   "
           "hunter7-RAW was refused\n")
    out = redact(raw)
    assert "hunter7-RAW" not in out and "was refused" in out and "[core.py:1099]" in out
    # a word that is no secret stays
    plain = "the token is\nINFO 11-29 22:38:02 [x.py:1] invalid for this model\n"
    assert redact(plain) == plain
