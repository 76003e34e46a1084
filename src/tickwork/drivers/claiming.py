"""Which due occurrences a claim takes: the catch-up window and the overlap policies (G8).

Pure: a driver loads the candidates (due, highest priority first, then earliest), the
occurrences already running for their jobs and the jobs with a started occurrence waiting to
run again (``retrying``, due or not), and applies the plan inside its claim transaction.

An occurrence that started (attempt >= 1, or ``retrying``: a run an operator retried may
never have started before it was cancelled) is never skipped: it is the earlier run. Until it
has run to its end, a newer occurrence of a job whose policy looks at what runs is the one the
policy holds back (skipped, buffered or left waiting), whatever their due times, so a run
interrupted by a crash and rescued as ``retrying`` runs again as its next attempt (G4, G5).

Each candidate is decided under its own policy (``Candidate.policy``): the job's, unless the
occurrence names one (a backfill with an explicit overlap choice). A run claimed under
``allow_all`` still counts as running for the job's other occurrences, whose policies look at it.

Claims by key (occurrences a dispatch delivered): a driver loads the rows of the delivered
keys, describes each as a ``KeyRow``, and ``triage`` splits them into claimable, not due
(re-arm at the due time) and gone (drop). The claimable ones then go through ``plan_claims``
exactly as an ``occurrence_claim`` batch does, and whatever the plan leaves waiting (an
overlap policy holding it back) is not due either.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tickwork.drivers.base import MAX_BATCH, LeaseRef
from tickwork.drivers.limits import Budget
from tickwork.frozen import fast_init
from tickwork.models import JobSpec, OccurrenceState, Overlap, Trigger


@fast_init
@dataclass(frozen=True, slots=True)
class Candidate:
    job_id: str
    scheduled_at: datetime
    state: OccurrenceState
    attempt: int
    trigger: Trigger
    spec: JobSpec
    overlap: Overlap | None = None  # the occurrence's own policy (a backfill's choice)
    queue: str = ""
    limited_at: datetime | None = None  # when a limit first held it back
    namespace: str = "default"  # its job's: the hourly quota that may hold it

    @property
    def policy(self) -> Overlap:
        """The overlap policy this occurrence is claimed under: its own, or its job's."""
        return self.overlap if self.overlap is not None else self.spec.overlap

    @property
    def started(self) -> bool:
        """It ran before, or waits to run again (``retrying``): never skipped nor missed."""
        return self.attempt > 0 or self.state is OccurrenceState.RETRYING


@dataclass(slots=True)
class ClaimPlan:
    claim: list[Candidate] = field(default_factory=list)
    missed: list[Candidate] = field(default_factory=list)
    skipped: list[Candidate] = field(default_factory=list)  # skipped_overlap
    superseded: list[Candidate] = field(default_factory=list)  # cancelled before they ran
    cancel_running: list[LeaseRef] = field(default_factory=list)
    held: list[Candidate] = field(default_factory=list)  # a limit holds them back: they wait
    waiting: int = 0  # read and left waiting by the overlap policy (the job's run goes first)


def candidates_for(limit: int, *, margin: bool = True) -> int:
    """How many due occurrences a claim of ``limit`` reads and locks. With ``margin``, a
    quarter more, so a batch gets past the few an overlap policy or a limit holds back (those
    it skips or misses are marked, and the pool claims again at once); without, the limit.
    Twice the limit read, locked and decoded as many rows again as a burst's claim takes: 6-9 %
    of the CPU per execution of a worker and of PostgreSQL; the quarter, 5 % of a worker's
    instructions (docs/benchmarks.md). ``Margins`` says when a queue needs it."""
    n = min(limit, MAX_BATCH)
    return n + n // 4 + 1 if margin else n


class Margins:
    """Per queue, whether its next claim reads a margin past its limit: only after a claim
    that left runs it read waiting (an overlap policy or a limit held them back), which would
    otherwise be read again at the head of every claim. A store's claims keep one."""

    def __init__(self) -> None:
        self._behind: set[str] = set()

    def candidates(self, queue: str, limit: int) -> int:
        return candidates_for(limit, margin=queue in self._behind)

    def note(self, queue: str, plan: ClaimPlan) -> None:
        """What the queue's last claim left behind."""
        if plan.waiting or plan.held:
            self._behind.add(queue)
        else:
            self._behind.discard(queue)


def fresh_share(limit: int) -> int:
    """How many of a claim's candidates come from the newest due work when a backlog fills
    the batch: half. Claims take the oldest due first, so without a share every run due after
    a burst's instant waited for the whole burst to drain (W1 with a steady stream of 2,000 a
    second: p99 1.8-2.1 s for those due while the burst drained; 57-69 ms with half, 0.5-0.6 s
    with a quarter, docs/benchmarks.md). The backlog still drains at half the rate or more.
    None for a claim of one: a worker taking one at a time takes the oldest, or a steady
    stream would keep a backlog waiting forever."""
    return min(limit, MAX_BATCH) // 2


def fresh_query(candidates: str, oldest_order: str, fresh_order: str) -> str:
    """The fresh-share read: a driver's candidates query with its ORDER BY (``oldest_order``,
    written exactly once in it) replaced by ``fresh_order``. Raises at import if the text no
    longer holds it once, so an edit of the query cannot turn the share into a second read of
    the oldest."""
    if candidates.count(oldest_order) != 1:
        raise ValueError(f"the candidates query must hold {oldest_order!r} exactly once")
    return candidates.replace(oldest_order, fresh_order)


def is_past_catchup(c: Candidate, now: datetime) -> bool:
    """A scheduled occurrence that never started and is older than its job's catch-up window.
    One a limit held back before then is not: it waits for its turn, however long."""
    if c.trigger is not Trigger.SCHEDULE or c.started or c.limited_at is not None:
        return False
    return (now - c.scheduled_at).total_seconds() > c.spec.catchup_window_seconds


def plan_claims(
    candidates: Sequence[Candidate],
    running: Mapping[str, Iterable[LeaseRef]],
    now: datetime,
    limit: int,
    retrying: Collection[str] = frozenset(),
    *,
    budget: Budget | None = None,
) -> ClaimPlan:
    """Decide each candidate's fate. ``running`` maps a job id to its running attempts;
    ``retrying`` holds the jobs with a started occurrence waiting for its next attempt;
    ``budget`` is what the queue, key and namespace limits let start (None: no limit
    applies). A job's ``max_concurrency`` counts its running attempts and the ones this plan
    takes."""
    plan = ClaimPlan()
    running_of = {job_id: list(refs) for job_id, refs in running.items()}  # read each once
    take = _Taker(plan, limit, budget, {j: len(refs) for j, refs in running_of.items()})
    busy = {job_id for job_id, refs in running_of.items() if refs}
    # A newer occurrence waits behind a started one even when it is due first.
    unfinished = set(retrying) | {c.job_id for c in candidates if c.started}
    waiting_kept: set[str] = set()  # buffer_one: the job already has its one buffered occurrence
    latest_cancel_previous = _latest_per_job(candidates, Overlap.CANCEL_PREVIOUS)

    for c in candidates:
        if is_past_catchup(c, now):
            plan.missed.append(c)
        elif c.policy is Overlap.CANCEL_PREVIOUS:
            _cancel_previous(c, latest_cancel_previous, take, busy, running_of)
        elif c.policy is Overlap.ALLOW_ALL or not _held_back(c, busy, unfinished):
            take(c, busy)
        elif c.started:
            plan.waiting += 1  # started: never skipped; it runs once the job's running one ends
        elif c.policy is Overlap.SKIP or (
                c.policy is Overlap.BUFFER_ONE and c.job_id in waiting_kept):
            plan.skipped.append(c)
        else:  # buffer_one's one kept run, or buffer_all's with the job busy: it waits its turn
            if c.policy is Overlap.BUFFER_ONE:
                waiting_kept.add(c.job_id)
            plan.waiting += 1
    return plan


def _cancel_previous(c: Candidate, latest: Mapping[str, Candidate], take: _Taker,
                     busy: set[str], running_of: Mapping[str, list[LeaseRef]]) -> None:
    if latest[c.job_id] is not c:
        take.plan.superseded.append(c)
    elif len(take.plan.claim) < take.limit and take.may(c):
        # With no room, or a limit holding it, the running one goes on and this one waits.
        if c.job_id in busy:
            take.plan.cancel_running.extend(running_of.get(c.job_id, ()))
        take(c, busy)


def _held_back(c: Candidate, busy: set[str], unfinished: set[str]) -> bool:
    """Something earlier of the job runs, or (for a run that never started) waits to retry."""
    return c.job_id in busy or (not c.started and c.job_id in unfinished)


class _Taker:
    """Claims a candidate if the batch has room and the limits allow it; left out, it stays
    waiting for the next claim (``plan.held`` when a limit is what held it)."""

    def __init__(self, plan: ClaimPlan, limit: int, budget: Budget | None,
                 running: dict[str, int]) -> None:
        self.plan, self.limit, self.budget, self.running = plan, limit, budget, running

    def may(self, c: Candidate) -> bool:
        """The limits let ``c`` start; if not, it is noted as held."""
        cap = c.spec.max_concurrency if c.policy is Overlap.ALLOW_ALL else None
        if (cap is not None and self.running.get(c.job_id, 0) >= cap) or (
                self.budget is not None
                and not self.budget.allows(c.queue, c.spec.limit_key, c.namespace)):
            self.plan.held.append(c)
            return False
        return True

    def __call__(self, c: Candidate, busy: set[str]) -> None:
        if len(self.plan.claim) >= self.limit or not self.may(c):
            return
        self.plan.claim.append(c)
        busy.add(c.job_id)
        self.running[c.job_id] = self.running.get(c.job_id, 0) + 1
        if self.budget is not None:
            self.budget.spend(c.queue, c.spec.limit_key, c.namespace)


def _latest_per_job(candidates: Sequence[Candidate], overlap: Overlap) -> dict[str, Candidate]:
    latest: dict[str, Candidate] = {}
    for c in candidates:
        if c.policy is overlap:
            best = latest.get(c.job_id)
            if best is None or c.scheduled_at > best.scheduled_at:
                latest[c.job_id] = c
    return latest


Key = tuple[str, datetime]

WAITING = frozenset({OccurrenceState.SCHEDULED, OccurrenceState.QUEUED,
                     OccurrenceState.RETRYING})


@fast_init
@dataclass(frozen=True, slots=True)
class KeyRow:
    state: OccurrenceState
    due_at: datetime
    priority: int
    held: bool  # its job or its queue is paused: waits, re-armed later
    deleted: bool  # its job is deleted
    due: bool  # due_at <= now by every clock that decides (the caller's, the server's)


@dataclass(slots=True)
class Triage:
    claimable: list[Key]  # highest priority first, then earliest due: a claim's order
    not_due: list[tuple[str, datetime, datetime]]
    gone: list[Key]


def unique(keys: Iterable[Key]) -> list[Key]:
    return list(dict.fromkeys(keys))


def triage(keys: Sequence[Key], rows: Mapping[Key, KeyRow]) -> Triage:
    result = Triage([], [], [])
    for key in unique(keys):
        row = rows.get(key)
        if row is None or row.deleted or row.state not in WAITING:
            result.gone.append(key)
        elif row.held or not row.due:
            result.not_due.append((*key, row.due_at))
        else:
            result.claimable.append(key)
    result.claimable.sort(key=lambda k: (-rows[k].priority, rows[k].due_at))
    return result


def left_waiting(claimable: Sequence[Key], plan: ClaimPlan,
                 rows: Mapping[Key, KeyRow]) -> list[tuple[str, datetime, datetime]]:
    """Claimable keys the plan neither claimed nor marked: an overlap policy keeps them
    waiting (buffer_one, buffer_all behind a running one), so they are re-armed."""
    decided = {(c.job_id, c.scheduled_at) for part in (plan.claim, plan.missed, plan.skipped,
                                                       plan.superseded, plan.held) for c in part}
    return [(*k, rows[k].due_at) for k in claimable if k not in decided]


def held_by_limits(plan: ClaimPlan, budget: Budget | None, now: datetime,
                   recheck_seconds: float = 0.25) -> list[tuple[str, datetime, datetime]]:
    """Runs a limit held back, with when to look at them again: when the bucket that held
    them has a token again, when the hour turns (a namespace's quota), or soon (a slot frees
    when a running attempt ends)."""
    out = []
    for c in plan.held:
        wait = recheck_seconds if budget is None else budget.retry_seconds(
            c.queue, c.spec.limit_key, recheck_seconds, c.namespace)
        out.append((c.job_id, c.scheduled_at, now + timedelta(seconds=wait)))
    return out


SLOT_RECHECK_SECONDS = 0.1  # a run held by a count (max_running, max_concurrency): look again


def recheck_at(plan: ClaimPlan, budget: Budget | None, now: datetime) -> datetime | None:
    """When a claimer of the queue should look again at the runs a limit held (None: none
    held): a worker sleeps until then rather than polling what it cannot start."""
    dues = [due for _, _, due in held_by_limits(plan, budget, now, SLOT_RECHECK_SECONDS)]
    return min(dues) if dues else None
