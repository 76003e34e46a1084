"""The verdict of a fault run: every expected occurrence, and every execution, classified.

Pure: it takes what was expected (from the job definitions), what ran (from the ledger), the
faults injected and the store's final states, and returns a ``Report``. The pass rule for every
fault: nothing lost, no unexplained duplicate, nothing early, nothing unexpected, and explained
duplicates at most the executions in flight on the faulted processes.

Consecutive executions of one occurrence are judged in pairs (earlier, later):

- a **retry** (G5): the earlier one failed and the later one has a higher attempt number;
- an **explained duplicate** (G4): the earlier one ran on a process that was then faulted, and
  the later one has a higher attempt number -- or the same one, when the fault released its
  attempts uncharged (SIGTERM, G10) and the earlier execution never ended. A fault of every
  process (the database went down) explains only executions in flight during it: started
  before it ended, not ended before it began;
- anything else is an **unexplained duplicate**.

An occurrence with no execution that ended is **lost** unless the store gave it a state that
says why it did not run (G3: missed, skipped_overlap, dead, crashed, cancelled).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

NOT_RUN_STATES = frozenset({"missed", "skipped_overlap", "dead", "crashed", "cancelled"})
EARLY_TOLERANCE = 0.01  # seconds: the precision of comparing two processes' readings of one clock
IN_FLIGHT_SLACK = 0.5  # an execution that ended this shortly before a kill may be unrecorded


@dataclass(frozen=True, slots=True)
class Execution:
    occurrence: str  # "job-name@2030-01-01T00:00:00Z"
    attempt: int
    pid: int
    worker: str
    started: float  # epoch seconds, real time
    ended: float | None
    outcome: str | None  # ok | failed | None: cut short (or still running)
    scheduled_at: float
    key: str = ""  # the idempotency key it received


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str  # "kill -9", "failpoint after_execute", "SIGTERM", "SIGSTOP 6s", ...
    pid: int
    at: float  # epoch seconds
    target: str = ""  # the process's name
    releases: bool = False  # graceful: unfinished attempts given back without charging them
    # A fault of no one process that cuts off every process's work (a database restart); pid 0.
    every_process: bool = False
    until: float | None = None  # when a fault that lasts (an outage) ended

    def covers(self, e: Execution) -> bool:
        """Whether ``e`` was in flight on what this fault hit: on its process, started before the
        fault (before its end, for an outage of every process: a claim made just before it may
        start during it) and not (long) ended before it began."""
        if self.every_process:
            started_by = self.at if self.until is None else self.until
        elif e.pid == self.pid:
            started_by = self.at
        else:
            return False
        return e.started <= started_by and (e.ended is None
                                            or e.ended >= self.at - IN_FLIGHT_SLACK)


@dataclass(frozen=True, slots=True)
class Recovery:
    fault: Fault
    seconds: float | None
    how: str
    # The largest start lateness of the occurrences due at or after the fault (each one's
    # first execution); None if none of them ran.
    lateness: float | None = None


@dataclass
class Report:
    expected: int
    seed: int | None = None
    name: str = ""
    ok: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)
    accounted: dict[str, list[str]] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)
    explained: list[str] = field(default_factory=list)  # one entry per extra execution
    unexplained: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    early: list[str] = field(default_factory=list)
    in_flight: int = 0
    explained_budget: int = 0
    recoveries: list[Recovery] = field(default_factory=list)

    def problems(self) -> list[str]:
        out = [f"{what}: {len(keys)} ({', '.join(keys[:5])}{', ...' if len(keys) > 5 else ''})"
               for what, keys in (("lost", self.lost), ("unexplained duplicates",
                                  self.unexplained), ("unexpected", self.unexpected),
                                  ("early", self.early)) if keys]
        if len(self.explained) > self.explained_budget:
            out.append(f"explained duplicates: {len(self.explained)}, more than the "
                       f"{self.explained_budget} in flight on the faulted processes")
        return out

    @property
    def passed(self) -> bool:
        return not self.problems()

    def render(self) -> str:
        accounted = ", ".join(f"{s} {len(k)}" for s, k in sorted(self.accounted.items()))
        lines = [
            f"fault run {self.name!r} seed={self.seed}: {self.expected} expected occurrences: "
            f"{len(self.ok)} ok, {len(self.retried)} retried, {len(self.explained)} explained "
            f"duplicates (budget {self.explained_budget}), {len(self.lost)} lost, "
            f"{len(self.unexplained)} unexplained duplicates, {len(self.unexpected)} "
            f"unexpected, {len(self.early)} early; accounted: {accounted or 'none'}"]
        for r in self.recoveries:
            took = "none seen" if r.seconds is None else f"{r.seconds:.2f}s"
            who = ("every process" if r.fault.every_process
                   else f"{r.fault.target or '?'} (pid {r.fault.pid})")
            lines.append(f"  fault {r.fault.kind} of {who}: recovery {took} ({r.how})")
        lines += [f"  FAIL {p}" for p in self.problems()]
        if self.problems():
            lines.append(f"  (reproduce with TICKWORK_FAULTS_SEED={self.seed})")
        return "\n".join(lines)


def _fault_after(e: Execution, faults: Sequence[Fault]) -> Fault | None:
    """The first fault of ``e``'s process after ``e`` started: the one that cut it off (for a
    fault of every process, only if ``e`` was in flight during it)."""
    hits = [f for f in faults if (f.covers(e) if f.every_process else
                                  f.pid == e.pid and f.at >= e.started - EARLY_TOLERANCE)]
    return min(hits, key=lambda f: f.at, default=None)


def _pair(prev: Execution, nxt: Execution, faults: Sequence[Fault]) -> str:
    """retry | explained | unexplained"""
    if prev.outcome == "failed" and nxt.attempt > prev.attempt:
        return "retry"
    fault = _fault_after(prev, faults)
    if fault is None:
        return "unexplained"
    if nxt.attempt > prev.attempt:
        return "explained"
    if nxt.attempt == prev.attempt and fault.releases and prev.outcome is None:
        return "explained"
    return "unexplained"


def in_flight(executions: Sequence[Execution], fault: Fault) -> list[Execution]:
    """Executions on the faulted process that had started and not (long) ended at the fault."""
    return [e for e in executions if fault.covers(e)]


def _recovery(fault: Fault, executions: Sequence[Execution]) -> Recovery:
    """From the fault (from its end, for one that lasts) to the re-run of what it interrupted,
    or else to the first execution after it."""
    by_occ: dict[str, list[Execution]] = {}
    for e in executions:
        by_occ.setdefault(e.occurrence, []).append(e)
    since = fault.at if fault.until is None else fault.until
    reruns = []
    for e in in_flight(executions, fault):
        later = [x.started for x in by_occ[e.occurrence] if x.started > e.started]
        if later:
            reruns.append(min(later) - since)
    late = max((min(e.started for e in runs) - runs[0].scheduled_at
                for runs in by_occ.values() if runs[0].scheduled_at >= fault.at), default=None)
    how = f"max lateness after it {0.0 if late is None else late:.2f}s"
    if fault.until is not None:
        how += f"; {_caught_up(fault, fault.until, by_occ)}"
    if reruns:
        return Recovery(fault, max(reruns), f"re-run of {len(reruns)} interrupted; {how}", late)
    after = [e.started - since for e in executions if e.started > since]
    return Recovery(fault, min(after, default=None), f"first execution after it; {how}", late)


def _caught_up(fault: Fault, until: float, by_occ: Mapping[str, list[Execution]]) -> str:
    """When everything due during an outage had started, counted from its end."""
    firsts = [min(e.started for e in runs) for runs in by_occ.values()
              if fault.at <= runs[0].scheduled_at < until]
    if not firsts:
        return "nothing was due during it"
    return (f"the {len(firsts)} due during its {until - fault.at:.1f}s all started "
            f"{max(firsts) - until:.2f}s after it ended")


def classify(
    expected: Mapping[str, float],
    executions: Sequence[Execution],
    *,
    faults: Sequence[Fault] = (),
    final_states: Mapping[str, str] | None = None,
    explained_budget: int | None = None,
    seed: int | None = None,
    name: str = "",
) -> Report:
    """``expected``: occurrence -> scheduled_at (epoch). ``explained_budget``: default, the
    executions in flight on the faulted processes when they were faulted."""
    states = final_states or {}
    report = Report(expected=len(expected), seed=seed, name=name)
    by_occ: dict[str, list[Execution]] = {}
    for e in executions:
        by_occ.setdefault(e.occurrence, []).append(e)
        if e.started < e.scheduled_at - EARLY_TOLERANCE:
            report.early.append(f"{e.occurrence}#{e.attempt} "
                                f"({e.scheduled_at - e.started:.3f}s early)")
    report.unexpected = sorted(k for k in by_occ if k not in expected)
    for occ in expected:
        runs = sorted(by_occ.get(occ, []), key=lambda e: e.started)
        state = states.get(occ)
        if state in NOT_RUN_STATES:
            report.accounted.setdefault(state, []).append(occ)
        if not any(e.outcome is not None for e in runs) and state not in NOT_RUN_STATES:
            report.lost.append(occ if state is None else f"{occ} (state {state})")
            continue
        verdicts = [_pair(a, b, faults) for a, b in itertools.pairwise(runs)]
        if "unexplained" in verdicts:
            report.unexplained.append(occ)
        elif "explained" in verdicts:
            report.explained += [occ] * verdicts.count("explained")
        elif "retry" in verdicts:
            report.retried.append(occ)
        elif runs:
            report.ok.append(occ)
    report.in_flight = len({(e.occurrence, e.started) for f in faults
                            for e in in_flight(executions, f)})
    report.explained_budget = report.in_flight if explained_budget is None else explained_budget
    report.recoveries = [_recovery(f, executions) for f in faults]
    return report
