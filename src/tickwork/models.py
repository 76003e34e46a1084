"""The nouns of tickwork: jobs, schedules, occurrences, attempts and their states.

Frozen dataclasses with no I/O. Every instant is an aware ``datetime`` in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from tickwork.frozen import fast_init


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
    """Why an occurrence exists: its schedule, a manual trigger, a backfill, or the end of a
    run of another job that names this one in ``on_success``/``on_failure``/``on_dead``."""

    SCHEDULE = "schedule"
    MANUAL = "manual"
    BACKFILL = "backfill"
    CHAIN = "chain"


class ChainEvent(StrEnum):
    """How a run ended, as the chaining fields name it: ``success`` (the run succeeded),
    ``failure`` (an attempt failed and the run will be retried) or ``dead`` (the run ended
    without success for good: dead, or crashed)."""

    SUCCESS = "success"
    FAILURE = "failure"
    DEAD = "dead"


class AuditAction(StrEnum):
    """What an audit entry records: a change to a job or to one of its runs."""

    CREATE = "create"
    UPDATE = "update"
    PAUSE = "pause"
    RESUME = "resume"
    DELETE = "delete"
    TRIGGER = "trigger"
    CANCEL = "cancel"
    RETRY = "retry"
    BACKFILL = "backfill"


KINDS = ("http", "slack", "email", "shell", "python", "publish")


@fast_init
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
    # ``"offset": "auto"``: each job's offset comes from a hash of its id (schedules.auto_offset)
    offset_auto: bool = False
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter_seconds: float = 0.0
    rule: str | None = None
    exclude: tuple[str, ...] = ()
    only: tuple[str, ...] = ()

    @property
    def one_off(self) -> bool:
        """Runs once (``at``): planned up to planner_one_off_horizon_seconds ahead, and marked
        so in the store (jobs.once)."""
        return self.type == "at"

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


@fast_init
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
    # Names of jobs to trigger when a run of this one ends that way (see ChainEvent).
    on_success: tuple[str, ...] = ()
    on_failure: tuple[str, ...] = ()
    on_dead: tuple[str, ...] = ()
    # Limits (docs/limits.md): the named rate limit this job's starts count against, whatever
    # its queue; and, for overlap allow_all, how many of its runs may run at once.
    limit_key: str | None = None
    max_concurrency: int | None = None

    @property
    def chained(self) -> tuple[str, ...]:
        """Every job this one may trigger, each once."""
        return tuple(dict.fromkeys((*self.on_success, *self.on_failure, *self.on_dead)))

    def chain_targets(self, state: OccurrenceState) -> tuple[ChainEvent, tuple[str, ...]] | None:
        """The event a run's next ``state`` is and the jobs it triggers, or None."""
        if state is OccurrenceState.SUCCEEDED:
            event, names = ChainEvent.SUCCESS, self.on_success
        elif state is OccurrenceState.RETRYING:
            event, names = ChainEvent.FAILURE, self.on_failure
        elif state in (OccurrenceState.DEAD, OccurrenceState.CRASHED):
            event, names = ChainEvent.DEAD, self.on_dead
        else:
            return None
        return (event, names) if names else None


@fast_init
@dataclass(frozen=True, slots=True)
class Upstream:
    """The run whose end triggered a chained occurrence: handed to its executions."""

    job_id: str
    job_name: str
    scheduled_at: datetime
    attempt: int
    event: ChainEvent
    idempotency_key: str
    output: str | None = None  # the upstream attempt's output, when at most UPSTREAM_OUTPUT_MAX


UPSTREAM_OUTPUT_MAX = 4096  # bytes of upstream output a chained run receives; larger: None


@fast_init
@dataclass(frozen=True, slots=True)
class Job:
    """A stored job: its spec plus what the store keeps about it."""

    id: str
    spec: JobSpec
    next_run_at: datetime | None
    created_at: datetime
    updated_at: datetime
    shard: int = 0
    created_by: str | None = None  # who created it: an API token's name, an OS user
    updated_by: str | None = None  # who changed it last
    namespace: str = "default"  # the tenant it belongs to; names are unique per namespace


@fast_init
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
    upstream: Upstream | None = None  # trigger chain: the run that triggered this one
    overlap: Overlap | None = None  # claimed under this policy, not its job's (a backfill's choice)


@fast_init
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
class AuditEntry:
    """One recorded change: who (``actor``), what, to which job (and run), when.

    ``details`` holds what the action changed: for an update, ``{field: {"before": ...,
    "after": ...}}`` of the job document's top-level fields that differ."""

    id: int
    at: datetime
    actor: str | None
    action: AuditAction
    job_id: str | None
    job_name: str | None
    scheduled_at: datetime | None = None
    details: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Backfill:
    """A backfill of ``[since, until)``, done or previewed (``dry_run``): one run per fire time.

    ``existing`` are the fire times that already have a run: they are left as they are (their
    overlap too). ``overlap`` is the policy the new runs are claimed under; ``overlap_chosen``
    says whether the backfill named it (stored on each run) or it is the job's own (the runs
    follow the job's policy, as it is when they are claimed). ``occurrences`` are the runs
    stored for these fire times, new and existing; none for a preview.
    """

    job_id: str
    since: datetime
    until: datetime
    fire_times: list[datetime]
    existing: list[datetime]
    overlap: Overlap
    overlap_chosen: bool
    dry_run: bool = False
    occurrences: list[Occurrence] = field(default_factory=list)

    @property
    def new(self) -> list[datetime]:
        """The fire times without a run yet: those a backfill creates."""
        have = set(self.existing)
        return [t for t in self.fire_times if t not in have]

    @property
    def created(self) -> int:
        """How many runs this backfill created (none for a preview)."""
        return 0 if self.dry_run else len(self.new)


@fast_init
@dataclass(frozen=True, slots=True)
class Claim:
    """What a worker gets from a claim: the running occurrence and its job."""

    occurrence: Occurrence
    job: Job
    limited_at: datetime | None = None  # when a limit first held it back, if one did

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


# The instant last formatted for a key, and its text: the runs of a burst share one instant,
# and a claim makes a key for each run it takes. One tuple, swapped whole (threads read it).
_LAST_INSTANT: list[tuple[datetime | None, str]] = [(None, "")]


def idempotency_key(
    job_id: str, scheduled_at: datetime, trigger: Trigger = Trigger.SCHEDULE
) -> str:
    """``job_id:scheduled_at`` for scheduled runs; manual runs and backfills get their own."""
    last, text = _LAST_INSTANT[0]
    if scheduled_at != last:  # equal instants have one text, whatever their time zone
        text = rfc3339(scheduled_at)
        _LAST_INSTANT[0] = (scheduled_at, text)
    if trigger is Trigger.SCHEDULE:
        return f"{job_id}:{text}"
    return f"{job_id}:{trigger.value}:{text}"
