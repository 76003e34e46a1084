"""The nouns of tickwork: jobs, schedules, occurrences, attempts and their states.

Frozen dataclasses with no I/O. Every instant is an aware ``datetime`` in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal


class OccurrenceState(StrEnum):
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CRASHED = "crashed"
    MISSED = "missed"
    SKIPPED_OVERLAP = "skipped_overlap"
    CANCELLED = "cancelled"


WAITING_STATES = frozenset({OccurrenceState.SCHEDULED, OccurrenceState.QUEUED,
                            OccurrenceState.RETRYING})
TERMINAL_STATES = frozenset({
    OccurrenceState.SUCCEEDED, OccurrenceState.DEAD, OccurrenceState.CRASHED,
    OccurrenceState.MISSED, OccurrenceState.SKIPPED_OVERLAP, OccurrenceState.CANCELLED,
})


class AttemptOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CRASHED = "crashed"
    LATE = "late"


class Overlap(StrEnum):
    """What happens when an occurrence is due while an earlier one of the same job runs (G8)."""

    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    BUFFER_ALL = "buffer_all"
    CANCEL_PREVIOUS = "cancel_previous"
    ALLOW_ALL = "allow_all"


class Delivery(StrEnum):
    AT_LEAST_ONCE = "at_least_once"
    AT_MOST_ONCE = "at_most_once"


class Trigger(StrEnum):
    """Why an occurrence exists: its schedule, a manual trigger, or a backfill."""

    SCHEDULE = "schedule"
    MANUAL = "manual"
    BACKFILL = "backfill"


KINDS = ("http", "slack", "email", "shell", "python")


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """When a job runs: exactly one of ``at``, ``cron``, ``every_seconds`` or ``rule`` is set.

    ``rule`` is a weekly or monthly rule (``type`` says which) as canonical JSON, read by
    ``tickwork.schedules.structured``. ``exclude`` and ``only`` name calendars: no fire time on
    what an ``exclude`` calendar covers, and (with ``only``) none outside the ``only`` ones.
    """

    type: Literal["at", "cron", "every", "weekly", "monthly"]
    at: datetime | None = None
    cron: str | None = None
    timezone: str = "UTC"
    every_seconds: float | None = None
    offset_seconds: float = 0.0
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter_seconds: float = 0.0
    rule: str | None = None
    exclude: tuple[str, ...] = ()
    only: tuple[str, ...] = ()

    @property
    def calendars(self) -> tuple[str, ...]:
        """Every calendar this schedule names, each once."""
        if not self.only:
            return self.exclude
        return tuple(dict.fromkeys((*self.exclude, *self.only)))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 3
    backoff_base_seconds: float = 2.0
    backoff_max_seconds: float = 300.0
    jitter: Literal["full", "equal", "none"] = "full"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A validated job document: what to run, when, and how (DESIGN §8)."""

    name: str
    schedule: ScheduleSpec
    kind: str
    payload: dict[str, Any]
    queue: str = "default"
    priority: int = 0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_seconds: float = 30.0
    overlap: Overlap = Overlap.SKIP
    catchup_window_seconds: float = 3600.0
    paused: bool = False
    tags: tuple[str, ...] = ()
    delivery: Delivery = Delivery.AT_LEAST_ONCE
    alerts: str | None = None  # the ``alerts`` field as canonical JSON (document/alerts.py)


@dataclass(frozen=True, slots=True)
class Job:
    """A stored job: its spec plus what the store keeps about it."""

    id: str
    spec: JobSpec
    next_run_at: datetime | None
    created_at: datetime
    updated_at: datetime
    shard: int = 0


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One (job_id, scheduled_at) the schedule produced, or a manual/backfill run."""

    job_id: str
    scheduled_at: datetime
    due_at: datetime
    queue: str
    priority: int
    state: OccurrenceState
    attempt: int
    max_attempts: int
    trigger: Trigger
    idempotency_key: str
    created_at: datetime
    updated_at: datetime
    lease_until: datetime | None = None
    worker: str | None = None
    finished_at: datetime | None = None
    last_error: str | None = None


@dataclass(frozen=True, slots=True)
class Attempt:
    """One execution try of an occurrence."""

    job_id: str
    scheduled_at: datetime
    number: int
    worker: str
    queued_at: datetime
    claimed_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    outcome: AttemptOutcome | None = None
    output: str | None = None
    error: str | None = None

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


@dataclass(frozen=True, slots=True)
class Claim:
    """What a worker gets from a claim: the running occurrence and its job."""

    occurrence: Occurrence
    job: Job

    @property
    def key(self) -> tuple[str, datetime]:
        return (self.occurrence.job_id, self.occurrence.scheduled_at)


def utc(dt: datetime) -> datetime:
    """The same instant as an aware UTC datetime; naive values are taken as UTC."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def rfc3339(dt: datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, microseconds only when present."""
    if dt.tzinfo is not UTC:
        dt = utc(dt)
    # isoformat leaves out a zero microsecond as the format asks, at half strftime's cost
    # (one key per claimed occurrence); it zero-pads years before 1000, strftime does not.
    if dt.year >= 1000:
        return dt.isoformat()[:-6] + "Z"  # without "+00:00"
    if dt.microsecond:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def idempotency_key(
    job_id: str, scheduled_at: datetime, trigger: Trigger = Trigger.SCHEDULE
) -> str:
    """``job_id:scheduled_at`` for scheduled runs; manual runs and backfills get their own."""
    if trigger is Trigger.SCHEDULE:
        return f"{job_id}:{rfc3339(scheduled_at)}"
    return f"{job_id}:{trigger.value}:{rfc3339(scheduled_at)}"
