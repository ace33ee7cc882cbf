"""Plans in words: each move of a relaunch action is one sentence an operator reads
(`relaunch refused: diagnosis confidence 0.70 is not above 0.80`), printed as that line by
`logwatch run` among vLLM's output and by the daemon on a terminal; JSON only when asked
for (`--log-format json`, or journald)."""

from __future__ import annotations

import io
from datetime import datetime, timedelta

import structlog

from logwatch import own_log
from logwatch.core.remedy.actions import (
    APPLYING,
    APPROVED,
    ESCALATED,
    EXECUTOR,
    POLICY,
    REJECTED,
    RESTARTING,
    ROLLED_BACK,
    ROLLING_BACK,
    VERIFY_FAILED,
    VERIFYING,
    propose,
    transition,
)
from logwatch.core.remedy.said import move_line

T0 = datetime(2026, 5, 1, 12, 0, 0)


def _proposed() -> object:
    return propose("vllm-1-2c1f09aa", "vllm", "p" * 16, "c" * 16, "f" * 16,
                   "quant.mtp_ignore_gap", "fp", T0, "launch #1 failed (MTP draft ...)")


def test_a_refusal_is_said_in_words_without_its_code() -> None:
    refused = transition(_proposed(), REJECTED, T0, POLICY,  # type: ignore[arg-type]
                         "low_confidence: diagnosis confidence 0.70 is not above 0.80")
    assert move_line(refused) == \
        "relaunch refused: diagnosis confidence 0.70 is not above 0.80"
    by_hand = transition(_proposed(), REJECTED, T0, "operator:ana",  # type: ignore[arg-type]
                         "not now")
    assert move_line(by_hand) == "relaunch vllm-1-2c1f09aa rejected by operator:ana: not now"


def test_every_move_of_a_failed_relaunch_is_one_line() -> None:
    action = _proposed()
    lines = [move_line(action)]  # type: ignore[arg-type]
    for i, (to, actor, why) in enumerate([
            (APPROVED, POLICY, "policy auto: every guardrail passed"),
            (APPLYING, EXECUTOR, "putting the plan's launch in place"),
            (RESTARTING, EXECUTOR, "the corrected launch is starting"),
            (VERIFYING, EXECUTOR, "checking more than /health"),
            (VERIFY_FAILED, EXECUTOR, "health: /health: connection refused;\nport\x1b[2J"),
            (ROLLING_BACK, EXECUTOR, "putting the previous launch back"),
            (ROLLED_BACK, EXECUTOR, "the previous launch is back"),
            (ESCALATED, POLICY, "stopped after a rollback: a person must look")]):
        action = transition(action, to, T0 + timedelta(seconds=i),  # type: ignore[arg-type]
                            actor, why)
        lines.append(move_line(action))  # type: ignore[arg-type]
    assert lines[0] == ("relaunch vllm-1-2c1f09aa proposed for vllm: launch #1 failed "
                        "(MTP draft ...)")
    assert lines[1] == ("relaunch vllm-1-2c1f09aa approved by the policy: policy auto: "
                        "every guardrail passed")
    assert lines[5].startswith("relaunch vllm-1-2c1f09aa failed verification: health:")
    assert lines[-1] == ("relaunch vllm-1-2c1f09aa escalated to a person: stopped after a "
                         "rollback: a person must look")
    assert all("\n" not in line for line in lines)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_daemon_on_a_terminal_says_a_move_as_its_sentence(monkeypatch: object) -> None:
    """The action event's `said` is the whole line on a terminal (shown visibly); the JSON
    log keeps every field, `said` among them."""
    monkeypatch.setenv("NO_COLOR", "1")  # type: ignore[attr-defined]
    said = "relaunch refused: diagnosis confidence 0.70 is not above 0.80 \x1b[2J"
    try:
        terminal = _Terminal()
        assert own_log.configure(terminal) == "console"
        own_log.get().info("action", id="vllm-1-2c1f09aa", state=REJECTED, said=said)
        own_log.get().info("started", sources=["a"])
        first, second = terminal.getvalue().splitlines()
        assert first.startswith("logwatch: relaunch refused: diagnosis confidence 0.70 is "
                                "not above 0.80 ")
        assert "\x1b" not in first  # shown, never obeyed
        assert "started" in second and not second.startswith("{")
        piped = io.StringIO()
        assert own_log.configure(piped) == "json"  # a pipe, not asked for text: JSON
        own_log.get().info("action", state=REJECTED, said=said)
        assert piped.getvalue().startswith("{") and '"said": ' in piped.getvalue()
    finally:
        structlog.reset_defaults()
