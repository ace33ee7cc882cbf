"""The daemon's relaunches under concurrency and restarts, in process, on a real DuckDB history:
two operators (or an operator and a timer) never both move an action from one state; an
action is carried out at most once; what an earlier daemon left unfinished is expired or
escalated at the next start, and never holds the target's lock. The history's calls are
slowed a little so that each race's window is wide; nothing waits for a fixed time to decide
an outcome."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from logwatch.core.remedy.actions import (
    APPLYING,
    APPROVED,
    AWAITING_APPROVAL,
    BLOCKED,
    POLICY,
    Action,
    propose,
    transition,
)
from logwatch.core.remedy.dropin import HOLD_NAME, hold_dropin
from logwatch.core.remedy.plan import Change, Launch, Plan
from logwatch.core.remedy.policy import CurrentLaunch, Thresholds
from logwatch.core.settings.config import TargetConfig
from logwatch.core.snapshot.model import Snapshot
from logwatch.daemon.action_book import Open, RelaunchError
from logwatch.daemon.relaunch_settings import Settings
from logwatch.daemon.relaunches import Relaunches
from logwatch.relaunch.from_history import FailedLaunch
from logwatch.store.actions import load_action, load_history, record_action
from logwatch.store.db import Store, open_store

SLOW = 0.05  # seconds each call to the history takes here


class _Log:
    def info(self, *_: Any, **__: Any) -> None: ...

    error = exception = warning = info


@dataclass
class Told:
    events: list[str] = field(default_factory=list)
    published: list[dict[str, Any]] = field(default_factory=list)
    log: Any = field(default_factory=_Log)

    def publish(self, kind: str, **fields: Any) -> None:
        self.published.append({"kind": kind, **fields})


class Starts:
    """The executor's interface, counting the starts; each start fails at once (it is the
    deciding that is under test, not a relaunch)."""

    def __init__(self) -> None:
        self.count = 0

    def start(self, plan: Plan, overlay_dir: str | None) -> Launch:
        self.count += 1
        raise RuntimeError("not started here")

    def roll_back(self) -> None: ...

    def done(self) -> None: ...

    def alive(self) -> bool | None:
        return None


@dataclass
class World:
    relaunches: Relaunches
    store: Store
    held: Open
    starts: Starts
    told: Told
    in_store: Callable[[Callable[[Store], Any]], Any]

    def stored(self) -> Action:
        found = self.in_store(lambda s: load_action(s, self.held.action.id))
        assert found is not None
        return found


@pytest.fixture
def world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[World]:
    mode = getattr(request, "param", "auto")
    store = open_store(tmp_path / "h.duckdb")
    lock = threading.Lock()

    def in_store(fn: Callable[[Store], Any]) -> Any:
        time.sleep(SLOW)
        with lock:
            return fn(store)

    starts, told = Starts(), Told()
    target = TargetConfig("t", {"kind": "file"}, {}, relaunch={"policy": mode})
    relaunches = Relaunches(
        [target], Settings(tmp_path / "state", thresholds=Thresholds(
            approval_timeout=timedelta(seconds=0.3))), in_store, told,
        current=lambda _: CurrentLaunch("L1", None, "failed", frozenset({"fp"})),
        signature_status=lambda _: "stable", executor=lambda *_: starts)
    action = propose("t-1-abcdef12", "t", "p", "p", "snap", "sig.x", "fp", datetime.now(),
                     "launch #1 failed")
    plan = Plan(("x",), (Change("env", "FOO", "1", "why"),), target="t")
    found = FailedLaunch("L1", "t:src", 1, Snapshot(), [], plan)
    held = Open(action, plan, found, "t:src", "stable", 0.95)
    in_store(lambda s: record_action(s, action, "{}"))
    relaunches.open[action.id] = held
    try:
        yield World(relaunches, store, held, starts, told, in_store)
    finally:
        store.close()


async def _settled(world: World) -> None:
    """Until nothing more happens: no task of the relaunches left."""
    while world.relaunches._tasks or world.relaunches.running:
        await asyncio.sleep(0.01)
    await world.relaunches.close()


@pytest.mark.parametrize("world", ["ask"], indirect=True)
def test_two_approvals_at_once_carry_the_action_out_once(world: World) -> None:
    async def scenario() -> list[Any]:
        await world.relaunches._decide(world.held)
        assert world.held.action.state == AWAITING_APPROVAL
        answers = await asyncio.gather(
            world.relaunches.approve(world.held.action.id, "operator:alice"),
            world.relaunches.approve(world.held.action.id, "operator:bob"),
            return_exceptions=True)
        await _settled(world)
        return answers

    answers = asyncio.run(scenario())
    assert sum(isinstance(a, Action) for a in answers) == 1, answers
    (refused,) = [a for a in answers if isinstance(a, RelaunchError)]
    assert "only an action awaiting approval can be approved" in str(refused)
    assert world.starts.count == 1
    approvals = [t for t in world.stored().transitions if t.to_state == APPROVED]
    assert len(approvals) == 1 and approvals[0].actor in ("operator:alice", "operator:bob")


@pytest.mark.parametrize("world", ["ask"], indirect=True)
def test_an_approval_after_the_expiry_is_refused_and_nothing_runs(world: World) -> None:
    async def scenario() -> str:
        await world.relaunches._decide(world.held)
        while world.held.timer is not None:  # the expiry fired: its move is being written
            await asyncio.sleep(0.001)
        try:
            return (await world.relaunches.approve(world.held.action.id, "operator:a")).state
        except RelaunchError as exc:
            return str(exc)
        finally:
            await _settled(world)

    answer = asyncio.run(scenario())
    assert "is expired" in answer, answer
    assert world.starts.count == 0
    assert [t.to_state for t in world.stored().transitions] == [
        "proposed", "awaiting_approval", "expired"]


def test_a_reject_while_the_policy_approves_wins_or_is_refused_never_both(
        world: World) -> None:
    async def scenario() -> str:
        deciding = asyncio.create_task(world.relaunches._decide(world.held))
        await asyncio.sleep(SLOW * 1.5)  # the history read; the approval being written
        try:
            answer = (await world.relaunches.reject(world.held.action.id, "operator:a")).state
        except RelaunchError as exc:
            answer = str(exc)
        await deciding
        await _settled(world)
        return answer

    answer = asyncio.run(scenario())
    moves = [t.to_state for t in world.stored().transitions]
    if answer == "rejected":
        assert world.starts.count == 0 and moves[-1] == "rejected", moves
    else:  # it was being carried out already: the operator is told so
        assert "being carried out" in answer and world.starts.count == 1, (answer, moves)
    assert moves.count("rejected") + moves.count(APPLYING) == 1, moves


def test_two_breaker_resets_decide_a_blocked_action_once(world: World) -> None:
    now = datetime.now()
    world.held.action = transition(transition(world.held.action, APPROVED, now, POLICY,
                                              "auto"), BLOCKED, now, POLICY, "breaker open")
    world.in_store(lambda s: record_action(s, world.held.action))

    async def scenario() -> list[bool]:
        answers = [await world.relaunches.reset_breaker("t", who)
                   for who in ("operator:alice", "operator:bob")]
        await _settled(world)
        return answers

    asyncio.run(scenario())
    assert world.starts.count == 1
    assert [t.to_state for t in world.stored().transitions].count(APPLYING) == 1


def test_what_an_earlier_daemon_left_unfinished_is_expired_or_escalated(
        world: World) -> None:
    """One action waits (awaiting approval), one was being carried out (applying) when the
    daemon stopped: at the next start the first expires and the second is escalated, so the
    target's lock is free and its breaker is read."""
    now = datetime.now()
    waiting = transition(world.held.action, AWAITING_APPROVAL, now, POLICY, "ask")
    running = transition(transition(propose("t-2-99999999", "t", "q", "q", "snap2", "sig.x",
                                            "fp", now, "launch #2 failed"),
                                    APPROVED, now, POLICY, "auto"), APPLYING, now, "executor",
                         "applying")
    world.in_store(lambda s: (record_action(s, waiting), record_action(s, running, "{}")))
    world.relaunches.open.clear()  # a new daemon: nothing in memory

    async def scenario() -> None:
        await world.relaunches.recover()
        await world.relaunches.close()

    asyncio.run(scenario())
    states = {a.id: (a.state, a.transitions[-1].reason)
              for a in world.in_store(lambda s: load_history(s, "t")) if isinstance(a, Action)}
    assert states[waiting.id][0] == "expired" and "restarted" in states[waiting.id][1]
    assert states[running.id][0] == "escalated" and "stopped while" in states[running.id][1]
    assert [p["state"] for p in world.told.published] == ["expired", "escalated"]
    assert world.relaunches.breakers == {"t": False}


def test_a_units_restart_hold_left_by_a_stopped_daemon_is_taken_away(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon stopped while it relaunched a unit: the hold on the unit's own Restart=
    (logwatch's file under the runtime directory) goes at the next start, even where the
    manager cannot be asked to reload (then the operator is told)."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    world.relaunches.targets["t"] = TargetConfig("t", {"kind": "journald"},
                                                 {"unit": "v.service", "user": True},
                                                 relaunch={"policy": "auto"})
    hold = tmp_path / "run" / "systemd" / "user" / "v.service.d" / HOLD_NAME
    hold.parent.mkdir(parents=True)
    hold.write_text(hold_dropin("t-1-abcdef12"))
    now = datetime.now()
    world.held.action = transition(transition(world.held.action, APPROVED, now, POLICY, "auto"),
                                   APPLYING, now, "executor", "applying")
    world.in_store(lambda s: record_action(s, world.held.action))
    world.relaunches.open.clear()

    async def scenario() -> None:
        await world.relaunches.recover()
        await world.relaunches.close()

    asyncio.run(scenario())
    assert not hold.exists()
    assert world.stored().state == "escalated"


def test_a_failure_that_came_while_another_was_planned_is_proposed_after_it(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The target's first failure is being planned when a second one comes: the second is
    kept, and proposed once the first ends without a relaunch; one that was carried out
    supersedes it."""
    relaunches, planned = world.relaunches, []

    async def propose_(launch_id: str, *_: Any) -> None:
        planned.append(launch_id)
        relaunches._proposing.discard("t")

    monkeypatch.setattr(relaunches, "_propose", propose_)
    relaunches.open.clear()

    async def scenario() -> None:
        relaunches._proposing.add("t")  # launch 1 is being planned
        relaunches.launch_failed({"id": "L2", "source": "t:src"}, "fp2", "cfg")
        assert planned == []
        relaunches._proposing.discard("t")
        relaunches._close(world.held)  # launch 1's action ends, never carried out
        await _settled(world)

    asyncio.run(scenario())
    assert planned == ["L2"]

    # carried out: the relaunch supersedes a failure that came meanwhile
    now = datetime.now()
    world.held.action = transition(transition(world.held.action, APPROVED, now, POLICY,
                                              "auto"), APPLYING, now, "executor", "applying")
    relaunches.open[world.held.action.id] = world.held

    async def again() -> None:
        relaunches.launch_failed({"id": "L3", "source": "t:src"}, "fp3", "cfg")
        relaunches._close(world.held)
        await _settled(world)

    asyncio.run(again())
    assert planned == ["L2"]


def test_a_failure_told_after_the_relaunches_closed_is_noted_not_proposed(
        world: World) -> None:
    """A daemon that stops commits what it read last, and that commit may tell of a failed
    launch after the relaunches were closed (their threads shut down): it is noted, and
    nothing is started that could only fail ("cannot schedule new futures after shutdown",
    seen in test_relaunch_loop_systemd under load)."""
    relaunches = world.relaunches
    relaunches.open.clear()

    async def scenario() -> None:
        await relaunches.close()
        relaunches.launch_failed({"id": "L9", "source": "t:src"}, "fp9", "cfg")
        relaunches._spawn(relaunches._propose("L9", "t:src", relaunches.targets["t"], "fp9",
                                              "cfg"))
        assert not relaunches._tasks
        await asyncio.sleep(0.05)

    asyncio.run(scenario())
    assert any("L9" in e and "not proposed" in e for e in world.told.events), world.told.events
    assert not any("relaunch step failed" in e for e in world.told.events)
    assert world.starts.count == 0
