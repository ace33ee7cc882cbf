"""Launches: one start of vLLM each, with its incidents and how it ended.

A launch begins where vLLM prints its start lines (version, non-default args, engine config):
a start line already seen in the current launch, or one after the current launch failed,
stopped or started serving, begins the next. A new child of `logwatch run` or a new `--stdin`
run begins one too (the caller says so). Findings read before any start line belong to a
launch whose start was not seen yet: start lines that follow while it has not failed or
served make it theirs (vLLM warns about its environment before it prints its version);
otherwise it began before the log did.

Each launch keeps its own incidents, so the same Marlin error in two starts is two incidents
(one *problem*, recurring): counts, snapshots and root causes stay per start.

A launch's outcome is one state machine (`TRANSITIONS`; `move` refuses any other step):

    starting --startup complete--> serving --shutdown line, exit 0--> stopped
    starting | serving | stopped --fatal finding, non-zero exit--> failed
    starting --shutdown line, exit 0--> stopped
    serving --a new start of its source--> crashed
    starting --a new start of its source--> replaced

A new start of the same source (its start lines, a new child or stdin run, a unit started
again) closes the launch before it with the last line it had: one that served and never said
it stopped died without a word (an OOM kill, `kill -9`, a node reboot) and is `crashed`; one
still starting, with no fatal finding, was `replaced` (restarted before it came up: by its
manager, an operator or a relaunch). Failed, stopped, crashed and replaced are final (a
fatal finding in a teardown after the shutdown line still fails a stopped launch; an
unrecognised one, like one request's error while serving, changes nothing; and after vLLM's
own shutdown line, `torn_down` reports of the engine core gone, which the shutdown causes,
count as context: not fatal, severity info).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime

from logwatch.core.launches.incidents import Incident, IncidentBook, incident_key
from logwatch.core.signatures.findings import Finding
from logwatch.core.signatures.signature import FALLBACK_CATEGORY, Signature

LAUNCH_SIGNATURES = ("lifecycle.version", "lifecycle.non_default_args",
                     "lifecycle.engine_config")
# uvicorn's readiness line: the server accepts requests (what a relaunch's verification waits for)
READY_SIGNATURES = frozenset({"lifecycle.startup_complete"})
# every reading of the draft's acceptance, whichever side of the target it falls
ACCEPTANCE_READINGS = frozenset({"spec_decode.acceptance", "spec_decode.acceptance_below_target",
                                 "spec_decode.low_acceptance"})
# what says a launch came up: uvicorn ready, vLLM's periodic stats, a draft-acceptance reading
SERVING_SIGNATURES = READY_SIGNATURES | {"lifecycle.serving"} | ACCEPTANCE_READINGS
STOPPED_SIGNATURES = frozenset({"lifecycle.shutdown"})

STARTING, SERVING, FAILED, STOPPED = "starting", "serving", "failed", "stopped"
CRASHED, REPLACED = "crashed", "replaced"
OUTCOMES = (STARTING, SERVING, FAILED, STOPPED, CRASHED, REPLACED)
ENDED = frozenset({FAILED, STOPPED, CRASHED, REPLACED})
# outcome -> the outcomes it may move to
TRANSITIONS: dict[str, frozenset[str]] = {
    STARTING: frozenset({SERVING, STOPPED, FAILED, REPLACED}),
    SERVING: frozenset({STOPPED, FAILED, CRASHED}),
    STOPPED: frozenset({FAILED}),
    FAILED: frozenset(), CRASHED: frozenset(), REPLACED: frozenset()}
# Launches of a source kept in memory by a book that is told to forget (the daemon's): the
# current one and the one before it (an `engine dead` after a restart still finds it).
KEPT_LAUNCHES = 2


# What vLLM's own shutdown line says (lifecycle.shutdown's `[shutdown] API server: shutdown
# triggered`); uvicorn's lines, which another service behind the same log prefix prints too,
# stop a launch but open no teardown.
VLLM_STOP = "shutdown triggered"
# Reports of the engine core gone that a shutdown causes: vLLM 0.32 logs them at ERROR during
# a clean Ctrl-C (its engine core is stopped under the API server's output handler). A worker
# that died is not one of them: vLLM says so only when its executor is not shutting down.
TEARDOWN_SIGNATURES = frozenset({"engine.dead", "engine.output_handler_failed"})


def says_vllm_stop(finding: Finding) -> bool:
    """Whether a finding is vLLM's own shutdown line (not uvicorn's)."""
    return (finding.signature.id in STOPPED_SIGNATURES
            and finding.captures.get("what") == VLLM_STOP)


def as_context(sig: Signature) -> Signature:
    """A signature shown as context: not fatal, severity info."""
    return replace(sig, fatal=False, severity="info")


def torn_down(launch: Launch, finding: Finding) -> bool:
    """Whether a finding is the teardown's of a launch vLLM was told to stop: after vLLM's own
    shutdown line, a report of the engine core gone or an unrecognised fatal error."""
    sig = finding.signature
    return (launch.outcome == STOPPED and launch.stop_line is not None and sig.fatal
            and finding.record_lineno >= launch.stop_line
            and (sig.id in TEARDOWN_SIGNATURES or sig.category == FALLBACK_CATEGORY))


@dataclass(slots=True)
class Launch:
    source: str
    start_line: int
    number: int  # 1, 2, ... in the order the source started them
    generation: str = ""  # the source generation it began in (live; "" for a scan)
    seen_start: bool = True  # False: findings came before any start line
    captures: dict[str, dict[str, str]] = field(default_factory=dict)  # start lines' captures
    book: IncidentBook = field(default_factory=IncidentBook)
    outcome: str = STARTING
    started: datetime | None = None  # the time on its first line, when the log has one
    last_line: int = 0
    exit_code: int | None = None
    key: str = ""  # the history's id for it, once a store has named it
    stop_line: int | None = None  # where vLLM said it was told to stop (VLLM_STOP)
    served: bool = False  # it came up: serving at some point (a stopped one may have)

    @property
    def fatal_incidents(self) -> list[Incident]:
        return [i for i in self.book.incidents.values() if i.signature.fatal]

    @property
    def ended(self) -> bool:
        return self.outcome in ENDED

    def move(self, outcome: str) -> bool:
        """Move to `outcome` if the state machine allows it; whether it moved."""
        if outcome not in TRANSITIONS[self.outcome]:
            return False
        self.outcome = outcome
        self.served = self.served or outcome == SERVING
        return True

    def superseded(self) -> bool:
        """A new start of its source began: close it (crashed if it served, replaced if it
        was still starting); whether it moved."""
        return self.move(CRASHED if self.outcome == SERVING else REPLACED)

    def frozen(self) -> Launch:
        """A copy that later findings do not change (analysed on another thread)."""
        return replace(self, captures={k: dict(v) for k, v in self.captures.items()},
                       book=self.book.copy())


@dataclass(frozen=True, slots=True)
class Change:
    """What observing one finding changed."""

    launch: Launch
    incident: Incident
    new_launch: bool
    new_incident: bool
    outcome_changed: bool
    copy: bool  # the same report printed again by another channel: not counted
    finding: Finding  # as it counts: a teardown's report is context (`torn_down`)


class LaunchBook:
    """Observes findings in line order per source and sorts them into launches."""

    def __init__(self) -> None:
        self.by_source: dict[str, list[Launch]] = {}
        self._numbers: dict[str, int] = {}
        # lines where a source's program was started again (a new unit invocation), not yet
        # reached by a finding: (line, generation)
        self._restarts: dict[str, list[tuple[int, str]]] = {}
        # journald: (line, status, clean) of exits its manager said, not yet given out
        self._exits: dict[str, list[tuple[int, int, bool]]] = {}
        # a source whose findings belong to another's launches (the stderr of a run whose
        # stdout is that other source: `scan --one-run`); a finding keeps its own source
        self.aliases: dict[str, str] = {}

    def restarted(self, source: str, line: int, generation: str = "") -> None:
        """The program behind `source` was started again at `line`: a finding from there on
        belongs to a new launch, even one that crashed before printing its start lines."""
        self._restarts.setdefault(source, []).append((line, generation))

    def current(self, source: str) -> Launch | None:
        launches = self.by_source.get(source)
        return launches[-1] if launches else None

    def begin(self, source: str, line: int, generation: str = "",
              seen_start: bool = True) -> Launch:
        """A new launch of `source` from `line` on (a new child, a new stdin run); the launch
        before it is closed (`Launch.superseded`)."""
        number = self._numbers.get(source, 0) + 1
        self._numbers[source] = number
        launch = Launch(source, line, number, generation, seen_start, last_line=line)
        launches = self.by_source.setdefault(source, [])
        if launches:
            launches[-1].superseded()
        launches.append(launch)
        return launch

    def previous(self, launch: Launch) -> Launch | None:
        """The launch of its source just before `launch`, while kept in memory."""
        launches = self.by_source.get(launch.source, [])
        index = next((n for n, known in enumerate(launches) if known is launch), 0)
        return launches[index - 1] if index > 0 else None

    def renumber(self, launch: Launch, number: int) -> None:
        """Give a launch the number it had (a restarted daemon going on with it)."""
        launch.number = number
        self._numbers[launch.source] = max(self._numbers.get(launch.source, 0), number)

    def restore(self, launch: Launch, finding: Finding) -> Incident:
        """Add a finding the history kept back into a launch (no launch boundaries are
        inferred: the stored launch is the one it belonged to)."""
        if finding.signature.id in LAUNCH_SIGNATURES:
            launch.captures.setdefault(finding.signature.id, dict(finding.captures))
        if launch.started is None and finding.time is not None:
            launch.started = finding.time
        launch.last_line = max(launch.last_line, finding.lineno)
        if says_vllm_stop(finding):
            launch.stop_line = min(launch.stop_line or finding.record_lineno,
                                   finding.record_lineno)
        return launch.book.add(finding)

    @staticmethod
    def settle_restored(launch: Launch) -> None:
        """After `restore` and the stored outcome: the teardown's reports as context again,
        as they were when first read (the history keeps the library's signature)."""
        for incident in launch.book.incidents.values():
            if torn_down(launch, incident.first):
                incident.signature = as_context(incident.signature)

    def observe(self, finding: Finding, generation: str = "") -> Change:
        source, sig = self.aliases.get(finding.source, finding.source), finding.signature
        launch = self.current(source)
        new_launch = False
        restarts = self._restarts.get(source)
        if restarts and restarts[0][0] <= finding.record_lineno:
            passed = [r for r in restarts if r[0] <= finding.record_lineno]
            self._restarts[source] = restarts[len(passed):]
            line, began_in = passed[-1]  # restarts with no finding since began nothing seen
            if launch is None or launch.start_line < line:
                launch = self.begin(source, line, began_in or generation, seen_start=False)
                new_launch = True
        if sig.id in LAUNCH_SIGNATURES and (
                launch is None or not launch.seen_start or sig.id in launch.captures
                or launch.outcome != STARTING):
            if launch is not None and not launch.seen_start and launch.outcome == STARTING:
                # what came before the start lines was this start's preamble (warnings about
                # the environment print before the version), or the caller began it
                launch.seen_start = True
            else:
                launch = self.begin(source, finding.record_lineno, generation)
                new_launch = True
        elif launch is None:
            launch = self.begin(source, finding.record_lineno, generation, seen_start=False)
            new_launch = True
        if sig.id in LAUNCH_SIGNATURES:
            launch.captures.setdefault(sig.id, dict(finding.captures))
        if launch.started is None and finding.time is not None:
            launch.started = finding.time
        launch.last_line = max(launch.last_line, finding.lineno)
        if torn_down(launch, finding):
            finding = replace(finding, signature=as_context(sig))
            sig = finding.signature
        before = len(launch.book.incidents)
        key = incident_key(finding)
        copies = launch.book.incidents.get((sig.id, key))
        copies_before = copies.copies if copies is not None else 0
        incident = launch.book.add(finding, key)
        outcome = launch.outcome
        if sig.fatal and not (outcome in (SERVING, STOPPED)
                              and sig.category == FALLBACK_CATEGORY):
            # an unrecognised exception while serving (one request's) or in the teardown
            # does not end a launch
            launch.move(FAILED)
        elif sig.id in SERVING_SIGNATURES:
            launch.move(SERVING)
        elif sig.id in STOPPED_SIGNATURES:
            launch.move(STOPPED)
            if launch.outcome == STOPPED and launch.stop_line is None \
                    and says_vllm_stop(finding):
                launch.stop_line = finding.record_lineno
        return Change(launch, incident, new_launch, len(launch.book.incidents) > before,
                      launch.outcome != outcome, incident.copies > copies_before, finding)

    def exited(self, source: str, code: int | None) -> Launch | None:
        """The process of the current launch ended: non-zero is a failure."""
        launch = self.current(source)
        if launch is None:
            return None
        launch.exit_code = code
        launch.move(FAILED if code not in (0, None) else STOPPED)
        return launch

    def exited_at(self, source: str, line: int, status: int, clean: bool) -> None:
        """The manager said (journald, at `line`) that the main process of the launch in
        force there ended with `status` (minus a signal). Kept until the findings before
        `line` are placed: `settle_exits` gives it to that launch."""
        self._exits.setdefault(source, []).append((line, status, clean))

    def settle_exits(self, source: str, through: int | None = None) -> list[Launch]:
        """The exits said at or before line `through` (all with None), each given to the
        launch in force at its line: the status kept, and an end the manager does not count
        as clean fails it. When the unit was started again between that launch's start and
        the exit, the exit is of an invocation nothing was read of: dropped. The launches
        they ended."""
        queued = self._exits.get(source)
        if not queued:
            return []
        due = [e for e in queued if through is None or e[0] <= through]
        self._exits[source] = [e for e in queued if e not in due]
        ended = []
        for line, status, clean in due:
            launch = self.launch_at(source, line)
            if launch is None or any(launch.start_line < at <= line
                                     for at, _ in self._restarts.get(source, ())):
                continue
            launch.exit_code = status
            launch.move(STOPPED if clean else FAILED)
            ended.append(launch)
        return ended

    def launch_at(self, source: str, lineno: int) -> Launch | None:
        """The launch in force at a line: the last one that started at or before it."""
        found = None
        for launch in self.by_source.get(source, []):
            if launch.start_line <= lineno:
                found = launch
        return found

    def launches(self) -> Iterator[Launch]:
        """Every launch, source by source in the order they were first seen, then in order."""
        for launches in self.by_source.values():
            yield from launches

    def take_ended(self, source: str) -> list[Launch]:
        """A source's launches before its current one, no longer kept: a scan's (each
        finding goes to its source's current launch, so nothing changes them after)."""
        launches = self.by_source.get(source, [])
        ended = launches[:-1]
        del launches[:-1]
        return ended

    def forget(self, source: str, keep: int = KEPT_LAUNCHES) -> None:
        """Drop a source's older launches from memory (the daemon's: they are stored)."""
        launches = self.by_source.get(source)
        if launches and len(launches) > keep:
            del launches[:-keep]
