"""The commit-failure state: backoff doubling to its ceiling, the outage reported once."""

from __future__ import annotations

from logwatch.core.write_health import WriteHealth


def test_retries_back_off_to_a_ceiling_and_a_landed_commit_ends_the_outage() -> None:
    health = WriteHealth(max_delay=4.0)
    assert health.writable and health.landed(1.0) is None and health.state(1.0) == {
        "writable": True}
    delays = [health.failed("OSError: No space left on device", 10.0 + i) for i in range(6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert health.waiting(15.0) and not health.waiting(19.0)  # the sixth try: at 15 + 4
    assert health.state(20.0) == {"writable": False, "failed_tries": 6, "since_s": 10.0,
                                  "error": "OSError: No space left on device"}
    assert health.landed(20.0) == (10.0, 6)
    assert health.writable and health.landed(21.0) is None
    assert health.failed("again", 30.0) == 0.5  # a new outage starts over
