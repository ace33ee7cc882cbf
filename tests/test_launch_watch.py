"""The daemon's watch over a relaunch: which launches are the relaunch's, and that a relaunch
which did not stand is known as answered when its end is read after its action closed (seen
with a journal read late: the relaunch's port failure was proposed as a new action)."""

from __future__ import annotations

from typing import cast

from logwatch.core.signatures.findings import Finding
from logwatch.daemon.launch_watch import LaunchWatch

SOURCE = "vllm:journal:--user-unit vllm.service"
FOUND = cast(Finding, object())  # the watch keeps findings, never looks into them


def _placed(watch: LaunchWatch, *launches: str) -> None:
    watch.observe(SOURCE, [(FOUND, launch) for launch in launches])


def test_the_first_launch_after_a_relaunch_that_did_not_stand_is_answered() -> None:
    watch = LaunchWatch()
    _placed(watch, "L1")
    watch.begin(SOURCE)
    watch.end(SOURCE, stood=False)  # verify failed, rolled back: the action closed
    _placed(watch, "L2", "L3")  # the relaunch's end and the rollback's launch, read late
    assert watch.answered(SOURCE, "L2")
    assert not watch.answered(SOURCE, "L3")  # the operator's launch again: a failure as any
    assert not watch.answered(SOURCE, "L1")


def test_a_relaunch_that_stood_answers_nothing_later() -> None:
    watch = LaunchWatch()
    _placed(watch, "L1")
    watch.begin(SOURCE)
    _placed(watch, "L2")
    assert watch.seen(SOURCE) == [FOUND]
    watch.end(SOURCE, stood=True)
    assert not watch.answered(SOURCE, "L2")  # verified serving: a later crash is new


def test_the_next_relaunch_forgets_the_answered_one() -> None:
    watch = LaunchWatch()
    _placed(watch, "L1")
    watch.begin(SOURCE)
    watch.end(SOURCE, stood=False)
    _placed(watch, "L2", "L3")
    watch.begin(SOURCE)
    assert not watch.answered(SOURCE, "L2")
    assert not watch.answered("another source", "L2")
