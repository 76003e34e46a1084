"""Small builders for tests: job specs, new occurrences, and the store calls tests repeat.

Every instant is derived from ``NOW`` by timedelta arithmetic; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork.drivers.base import (
    ClaimResult,
    Completion,
    JobCreateParams,
    LeaseRef,
    NewOccurrence,
    OccurrenceClaimParams,
    OccurrenceCompleteParams,
    OccurrenceInsertParams,
    Store,
)
from tickwork.models import (
    AttemptOutcome,
    Claim,
    Delivery,
    Job,
    JobSpec,
    Occurrence,
    OccurrenceState,
    Overlap,
    RetryPolicy,
    ScheduleSpec,
    Trigger,
)

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def seconds(n: float) -> timedelta:
    return timedelta(seconds=n)


def job_spec(
    name: str = "job",
    *,
    queue: str = "default",
    priority: int = 0,
    kind: str = "http",
    payload: dict[str, Any] | None = None,
    schedule: ScheduleSpec | None = None,
    max_attempts: int = 3,
    timeout_seconds: float = 30.0,
    overlap: Overlap = Overlap.SKIP,
    catchup_window_seconds: float = 3600.0,
    paused: bool = False,
    tags: Sequence[str] = (),
    delivery: Delivery = Delivery.AT_LEAST_ONCE,
    alerts: str | None = None,
    limit_key: str | None = None,
    max_concurrency: int | None = None,
) -> JobSpec:
    """A valid spec: every minute, an HTTP ping, with the given fields changed."""
    return JobSpec(
        name=name,
        schedule=schedule or ScheduleSpec(type="every", every_seconds=60.0),
        kind=kind,
        payload={"method": "GET", "url": "https://example.org/ping"} if payload is None
        else payload,
        queue=queue,
        priority=priority,
        retry=RetryPolicy(max_attempts=max_attempts),
        timeout_seconds=timeout_seconds,
        overlap=overlap,
        catchup_window_seconds=catchup_window_seconds,
        paused=paused,
        tags=tuple(tags),
        delivery=delivery,
        alerts=alerts,
        limit_key=limit_key,
        max_concurrency=max_concurrency,
    )


def create_params(
    spec: JobSpec, *, now: datetime = NOW, next_run_at: datetime | None = None,
    id: str | None = None,
) -> JobCreateParams:
    return JobCreateParams(spec=spec, next_run_at=next_run_at, now=now, id=id)


def new_occurrence(
    job: Job,
    scheduled_at: datetime,
    *,
    due_at: datetime | None = None,
    priority: int | None = None,
    trigger: Trigger = Trigger.SCHEDULE,
    state: OccurrenceState = OccurrenceState.SCHEDULED,
    overlap: Overlap | None = None,
) -> NewOccurrence:
    """An occurrence of ``job`` with the queue, priority and attempts its spec gives."""
    return NewOccurrence(
        job_id=job.id,
        scheduled_at=scheduled_at,
        due_at=scheduled_at if due_at is None else due_at,
        queue=job.spec.queue,
        priority=job.spec.priority if priority is None else priority,
        max_attempts=job.spec.retry.max_attempts,
        trigger=trigger,
        state=state,
        overlap=overlap,
    )


# -- store calls tests repeat ---------------------------------------------------------------


async def add_job(
    store: Store, name: str = "job", *, now: datetime = NOW,
    next_run_at: datetime | None = None, **spec: Any,
) -> Job:
    """Create a job from ``job_spec(name, **spec)``."""
    return await store.job_create(
        create_params(job_spec(name, **spec), now=now, next_run_at=next_run_at))


async def add_occurrences(
    store: Store, job: Job, *scheduled: datetime, now: datetime = NOW,
    trigger: Trigger = Trigger.SCHEDULE, overlap: Overlap | None = None,
) -> list[Occurrence]:
    """Insert one occurrence of ``job`` at each instant, due when scheduled."""
    return await store.occurrence_insert(OccurrenceInsertParams(
        occurrences=[new_occurrence(job, at, trigger=trigger, overlap=overlap)
                     for at in scheduled], now=now))


async def claim(
    store: Store, now: datetime, *, queue: str = "default", worker: str = "w1",
    limit: int = 10, lease_seconds: float = 30.0, lease_margin_seconds: float = 5.0,
) -> ClaimResult:
    return await store.occurrence_claim(OccurrenceClaimParams(
        queue=queue, worker=worker, limit=limit, now=now, lease_seconds=lease_seconds,
        lease_margin_seconds=lease_margin_seconds))


async def claim_one(store: Store, now: datetime, *, worker: str = "w1") -> Claim:
    """Claim exactly one occurrence from the default queue."""
    result = await claim(store, now, worker=worker, limit=1)
    assert len(result.claims) == 1, result
    return result.claims[0]


def ref(c: Claim | Occurrence) -> LeaseRef:
    occ = c.occurrence if isinstance(c, Claim) else c
    return LeaseRef(occ.job_id, occ.scheduled_at, occ.attempt)


def completion(
    c: Claim | LeaseRef,
    *,
    state: OccurrenceState = OccurrenceState.SUCCEEDED,
    outcome: AttemptOutcome | None = None,
    started_at: datetime = NOW,
    finished_at: datetime | None = None,
    attempt: int | None = None,
    output: str | None = None,
    error: str | None = None,
    due_at: datetime | None = None,
) -> Completion:
    """The result of ``c``'s attempt; the outcome follows the state unless given."""
    r = ref(c) if isinstance(c, Claim) else c
    if outcome is None:
        outcome = (AttemptOutcome.SUCCEEDED if state is OccurrenceState.SUCCEEDED
                   else AttemptOutcome.FAILED)
    return Completion(
        job_id=r.job_id, scheduled_at=r.scheduled_at,
        attempt=r.attempt if attempt is None else attempt, state=state, outcome=outcome,
        started_at=started_at, finished_at=started_at + seconds(1) if finished_at is None
        else finished_at, output=output, error=error, due_at=due_at,
        queued_at=c.occurrence.due_at if isinstance(c, Claim) else None)


async def complete(store: Store, now: datetime, *completions: Completion) -> list[bool]:
    return await store.occurrence_complete(
        OccurrenceCompleteParams(completions=completions, now=now))
