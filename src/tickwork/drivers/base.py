"""The Store seam: what every storage driver does, with one params object per method.

Methods are noun-first (``job_create``, ``occurrence_claim``) and take ``now`` from the caller, so
the store never reads a clock of its own. Every driver passes
``tickwork.testing.conformance.store``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from tickwork.drivers.alerts import AlertStore
from tickwork.drivers.calendars import CalendarStore
from tickwork.drivers.chaining import ChainFire
from tickwork.drivers.enqueue import EnqueueStore
from tickwork.frozen import fast_init
from tickwork.models import (
    Attempt,
    AttemptOutcome,
    AuditAction,
    AuditEntry,
    Claim,
    Job,
    JobSpec,
    Occurrence,
    OccurrenceState,
    Overlap,
    Trigger,
)

# Bounds on the work one call may do (DESIGN rule 8).
MAX_BATCH = 1000

if TYPE_CHECKING:
    from tickwork.drivers.admin import AdminStore


@dataclass(frozen=True, slots=True)
class JobVersion:
    """A command's version of the job named ``name`` in ``namespace``: the change it comes
    with is written only if ``version`` is newer than the last one applied to that name there,
    and in the same transaction it becomes the last one (else StaleVersion, and nothing is
    written). Names are unique per namespace, so their versions are too."""

    name: str
    version: int
    namespace: str = "default"


@fast_init
@dataclass(frozen=True, slots=True)
class JobCreateParams:
    spec: JobSpec
    next_run_at: datetime | None
    now: datetime
    id: str | None = None
    actor: str | None = None  # who creates it: created_by, and the audit entry's actor
    version: JobVersion | None = None
    namespace: str = "default"  # the tenant it belongs to


@dataclass(frozen=True, slots=True)
class JobCreateManyParams:
    """``jobs`` is read once, in order, and may be produced as it is read (bulk creation
    validates documents while the store writes the ones before). A driver may start writing
    before it has them all: an exception raised while producing them rolls back the whole
    batch and reaches the caller as it is."""

    jobs: Iterable[JobCreateParams]
    # The namespace's job quota (drivers/namespaces.py), all jobs being of one namespace: the
    # batch is refused whole (QuotaExceeded) if the namespace would then hold more live jobs.
    # Counted in the write transaction, so concurrent creations cannot pass it together.
    max_jobs: int | None = None


@dataclass(frozen=True, slots=True)
class JobListParams:
    queue: str | None = None
    tag: str | None = None
    kind: str | None = None
    name_contains: str | None = None
    paused: bool | None = None
    after_name: str | None = None  # cursor: names sort; the page starts after this one
    limit: int = 100
    namespace: str | None = None  # only this namespace's jobs; None: every namespace


@dataclass(frozen=True, slots=True)
class JobUpdateParams:
    id: str
    spec: JobSpec
    next_run_at: datetime | None
    now: datetime
    actor: str | None = None
    # What changed, for the audit entry: {field: {"before": ..., "after": ...}}.
    diff: dict[str, Any] | None = None
    version: JobVersion | None = None
    # The schedule changed, or what a planned run copies from its job (queue, priority,
    # maximum attempts): the runs planned before that are not due yet (never started,
    # triggered by the schedule) are removed with the update, and the planner plans them
    # again from next_run_at. Runs already due, started, or triggered otherwise
    # (manually, by a backfill or a chain) stay.
    replan: bool = False


@dataclass(frozen=True, slots=True)
class JobSetPausedParams:
    id: str
    paused: bool
    next_run_at: datetime | None  # on resume: the first fire time from now on
    now: datetime
    actor: str | None = None


@dataclass(frozen=True, slots=True)
class JobDeleteParams:
    id: str
    now: datetime
    actor: str | None = None
    version: JobVersion | None = None


@dataclass(frozen=True, slots=True)
class JobDueParams:
    until: datetime  # jobs whose next_run_at <= until (now + horizon)
    limit: int = MAX_BATCH
    # Only jobs of these shards (the ones this scheduler leases); None means every shard.
    shards: frozenset[int] | None = None
    # And the one-off jobs (schedule type "at") due by this later instant; None: no others.
    until_one_off: datetime | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class NewOccurrence:
    job_id: str
    scheduled_at: datetime
    due_at: datetime  # scheduled_at plus the job's deterministic jitter
    queue: str
    priority: int
    max_attempts: int
    trigger: Trigger = Trigger.SCHEDULE
    state: OccurrenceState = OccurrenceState.SCHEDULED  # or MISSED, past the catch-up window
    overlap: Overlap | None = None  # claimed under this policy instead of the job's (backfills)


@fast_init
@dataclass(frozen=True, slots=True)
class JobAdvance:
    """Materialise these occurrences and move the job's next run on, in one transaction.

    Applied only while the job's next_run_at still equals ``expected_next_run_at`` (so two
    planners racing on one job never move it backwards); occurrences are insert-if-absent.
    """

    job_id: str
    expected_next_run_at: datetime
    occurrences: Sequence[NewOccurrence]
    next_run_at: datetime | None


@dataclass(frozen=True, slots=True)
class JobAdvanceManyParams:
    advances: Sequence[JobAdvance]
    now: datetime


@dataclass(frozen=True, slots=True)
class OccurrenceInsertParams:
    """Manual triggers and backfills: insert-if-absent, returns what is stored.

    With ``audit`` set (``trigger`` or ``backfill``), one audit entry is written for the first
    occurrence's job in the same transaction, with ``actor`` and ``details``."""

    occurrences: Sequence[NewOccurrence]
    now: datetime
    audit: AuditAction | None = None
    actor: str | None = None
    details: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class OccurrenceClaimParams:
    """Claim due occurrences of one queue: state running, attempt + 1, a lease, an attempt row.

    Due means ``due_at <= now`` in a waiting state, job not paused or deleted. Highest priority
    first, then earliest due. Occurrences not yet started and older than their job's catch-up
    window become ``missed`` instead. Overlap policies (G8) are applied here, against occurrences
    of the same job already running. The lease is ``max(lease_seconds, job timeout)`` plus
    ``lease_margin_seconds``.
    """

    queue: str
    worker: str
    limit: int
    now: datetime
    lease_seconds: float = 30.0
    lease_margin_seconds: float = 5.0


@fast_init
@dataclass(frozen=True, slots=True)
class Completion:
    """The fenced result of one attempt: applied only while the occurrence is still running
    that attempt. ``state`` is the occurrence's next state; ``due_at`` is set for a retry."""

    job_id: str
    scheduled_at: datetime
    attempt: int
    state: OccurrenceState
    outcome: AttemptOutcome
    started_at: datetime
    finished_at: datetime
    output: str | None = None
    error: str | None = None
    due_at: datetime | None = None
    # The jobs this end of the run triggers (drivers/chaining.py), inserted by the driver in
    # the completion's transaction when the completion applies.
    chain: ChainFire | None = None
    # When the attempt was due: the claimed occurrence's due_at, for the attempt's row where a
    # store writes it at the end (PostgreSQL); None: the row's own due_at.
    queued_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class OccurrenceCompleteParams:
    completions: Sequence[Completion]
    now: datetime
    # Filled by the driver: the occurrences the chains of applied completions created, so a
    # caller that dispatches through Redis can put them in the due set.
    chained: list[NewOccurrence] = field(default_factory=list)


@fast_init
@dataclass(frozen=True, slots=True)
class LeaseRef:
    job_id: str
    scheduled_at: datetime
    attempt: int


@dataclass(frozen=True, slots=True)
class OccurrenceHeartbeatParams:
    """Extend the leases of running attempts held by ``worker`` to ``now + extend_seconds``
    (never shorter than the job's timeout). Returns the refs no longer held (finished,
    cancelled or taken over): their execution should stop."""

    refs: Sequence[LeaseRef]
    worker: str
    now: datetime
    extend_seconds: float = 30.0


@dataclass(frozen=True, slots=True)
class OccurrenceReleaseParams:
    """Graceful shutdown: give back running attempts without charging them (G10). Each goes
    back to its waiting state, due now, with its attempt counter and attempt row undone."""

    refs: Sequence[LeaseRef]
    worker: str
    now: datetime


@dataclass(frozen=True, slots=True)
class OccurrenceRescueParams:
    """Expired leases: the attempt ends ``crashed``; the occurrence is retried (due now) while
    attempts remain, else ends ``crashed``. at_most_once jobs always end ``crashed``."""

    now: datetime
    limit: int = MAX_BATCH
    # Treat every running attempt not held by this worker as expired, whatever its lease says.
    # Only for a process that knows it is the store's sole user (the embedded service, which
    # holds the database's lock file): after a crash its old leases are orphans.
    all_but_worker: str | None = None
    # Filled by the driver: the occurrences chains created (on_failure for a rescued attempt
    # that will be retried, on_dead for one that ends crashed).
    chained: list[NewOccurrence] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Rescued:
    job_id: str
    scheduled_at: datetime
    attempt: int
    worker: str | None
    state: OccurrenceState


@dataclass(frozen=True, slots=True)
class OccurrenceListParams:
    job_id: str | None = None
    queue: str | None = None
    states: Sequence[OccurrenceState] = ()
    since: datetime | None = None  # scheduled_at >= since
    until: datetime | None = None  # scheduled_at < until
    before: tuple[datetime, str] | None = None  # cursor: (scheduled_at, job_id) of the last row
    limit: int = 100
    newest_first: bool = True
    namespace: str | None = None  # only runs of this namespace's jobs; None: every namespace


@dataclass(frozen=True, slots=True)
class OccurrenceCancelParams:
    """Cancel a job's waiting and running occurrences; running attempts end ``failed`` with
    ``reason``, and their workers learn it at the next heartbeat."""

    job_id: str
    now: datetime
    reason: str = "cancelled"


@dataclass(frozen=True, slots=True)
class AttemptNoteParams:
    """Add a note to an attempt that has ended (its error text, and the run's last error if
    the run ended with it): what a worker learned after the store ended the attempt, such as
    a synchronous callable it could not stop."""

    ref: LeaseRef
    note: str


@dataclass(frozen=True, slots=True)
class OccurrenceCancelOneParams:
    """Cancel one run: waiting (scheduled, queued, retrying) or running. It ends ``cancelled``
    with ``last_error`` saying who cancelled it; a running attempt ends ``failed`` with the same
    error, and its worker stops it at its next heartbeat (the lease is no longer held), its
    late result fenced off. Raises OccurrenceNotFound, or Conflict for a run already ended."""

    job_id: str
    scheduled_at: datetime
    now: datetime
    actor: str | None = None


@dataclass(frozen=True, slots=True)
class OccurrenceRetryParams:
    """Run a ``dead``, ``crashed`` or ``cancelled`` run again now: the same occurrence (and
    idempotency key), back to ``retrying``, due now, so its next claim is attempt n + 1
    whatever the job's overlap policy or catch-up window. Raises OccurrenceNotFound, JobNotFound
    (its job is deleted), or Conflict for a run in any other state."""

    job_id: str
    scheduled_at: datetime
    now: datetime
    actor: str | None = None


RETRYABLE_STATES = frozenset({OccurrenceState.DEAD, OccurrenceState.CRASHED,
                              OccurrenceState.CANCELLED})


@dataclass(frozen=True, slots=True)
class AuditListParams:
    """Audit entries oldest first (by id), after the cursor ``after_id``; of one job if set,
    at or after ``since`` if set."""

    job_id: str | None = None
    since: datetime | None = None
    after_id: int | None = None
    limit: int = 100


@dataclass(frozen=True, slots=True)
class ClaimResult:
    claims: list[Claim]
    missed: int = 0
    skipped: int = 0
    cancelled: list[LeaseRef] = field(default_factory=list)  # running ones cancel_previous ended
    held: int = 0  # due runs a limit held back (drivers/limits.py): they wait, uncharged
    recheck_at: datetime | None = None  # when the limits that held them may let one start


@dataclass(frozen=True, slots=True)
class OccurrenceClaimKeysParams:
    """Claim these occurrences, delivered by a dispatch (Redis), as ``occurrence_claim`` would:
    due by ``now`` in a waiting state, the same catch-up and overlap decisions and lease.

    Keys that cannot be claimed come back as ``not_due`` (waiting, but not due yet, or of a
    paused job or queue: re-arm them at the due time given) or ``gone`` (running, finished,
    cancelled, deleted or unknown: drop them). A key left waiting by the overlap policy
    (``buffer_one``/``buffer_all`` behind a running one) or locked by another claimer is
    ``not_due`` with its current due time too.
    """

    keys: Sequence[tuple[str, datetime]]  # (job_id, scheduled_at)
    worker: str
    now: datetime
    lease_seconds: float = 30.0
    lease_margin_seconds: float = 5.0


@dataclass(frozen=True, slots=True)
class KeyClaimResult(ClaimResult):
    not_due: list[tuple[str, datetime, datetime]] = field(default_factory=list)  # + due_at
    gone: list[tuple[str, datetime]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class OccurrenceWaitingParams:
    """Waiting occurrences (scheduled, queued, retrying) of one queue whose job is neither
    paused nor deleted, ordered by (job_id, scheduled_at), after the key ``after``; only those
    due before ``due_before`` if set. The reconciler rebuilds Redis from these pages."""

    queue: str
    after: tuple[str, datetime] | None = None
    limit: int = MAX_BATCH
    due_before: datetime | None = None


@dataclass(frozen=True, slots=True)
class WaitingOccurrence:
    job_id: str
    scheduled_at: datetime
    due_at: datetime
    priority: int


class Store(CalendarStore, AlertStore, EnqueueStore, Protocol):
    """The source of truth. Every method is one transaction."""

    async def migrate(self) -> None: ...
    async def migrations_pending(self) -> list[int]:
        """The versions ``migrate()`` would apply: all of them for a database that does not
        exist yet or has no tickwork tables. Creates and changes nothing."""
        ...
    async def close(self) -> None: ...
    def admin(self) -> AdminStore:
        """The AdminStore on this store's connection or pool."""
        ...

    async def job_create(self, p: JobCreateParams) -> Job: ...
    async def job_create_many(self, p: JobCreateManyParams) -> list[Job]: ...
    async def job_get(self, ref: str, namespace: str | None = None) -> Job:
        """By id, or by name. Raises JobNotFound. With ``namespace``, only a job of that
        namespace; without, an id of any namespace, and a name in ``default`` first, then in
        the other namespaces by name."""
        ...
    async def job_list(self, p: JobListParams) -> list[Job]: ...
    async def job_update(self, p: JobUpdateParams) -> Job: ...
    async def job_set_paused(self, p: JobSetPausedParams) -> Job: ...
    async def job_delete(self, p: JobDeleteParams) -> None:
        """Removes the job from listings and cancels its waiting occurrences; history stays."""
        ...
    async def job_version_get(self, name: str, namespace: str = "default") -> int | None:
        """The last version applied to the job named ``name`` in ``namespace`` (kept after a
        delete), or None."""
        ...
    async def job_get_deleted(self, ref: str, namespace: str | None = None) -> list[Job]:
        """Deleted jobs with this id or name (of ``namespace`` if set), most recently deleted
        first (their history stays readable)."""
        ...
    async def job_due(self, p: JobDueParams) -> list[Job]: ...
    async def job_advance_many(self, p: JobAdvanceManyParams) -> int:
        """Returns how many occurrences were newly inserted."""
        ...

    async def occurrence_insert(self, p: OccurrenceInsertParams) -> list[Occurrence]: ...
    async def occurrence_claim(self, p: OccurrenceClaimParams) -> ClaimResult: ...
    async def occurrence_claim_keys(self, p: OccurrenceClaimKeysParams) -> KeyClaimResult: ...
    async def occurrence_waiting(self, p: OccurrenceWaitingParams) -> list[WaitingOccurrence]: ...
    async def occurrence_complete(self, p: OccurrenceCompleteParams) -> list[bool]:
        """One flag per completion: True if applied, False if fenced off (stale attempt)."""
        ...
    async def occurrence_heartbeat(self, p: OccurrenceHeartbeatParams) -> list[LeaseRef]: ...
    async def occurrence_release(self, p: OccurrenceReleaseParams) -> int: ...
    async def occurrence_rescue(self, p: OccurrenceRescueParams) -> list[Rescued]: ...
    async def occurrence_cancel(self, p: OccurrenceCancelParams) -> int: ...
    async def occurrence_cancel_one(self, p: OccurrenceCancelOneParams) -> Occurrence: ...
    async def attempt_note(self, p: AttemptNoteParams) -> bool:
        """True if the attempt exists and has ended (a running one is never noted)."""
        ...
    async def occurrence_retry(self, p: OccurrenceRetryParams) -> Occurrence: ...
    async def occurrence_get(self, job_id: str, scheduled_at: datetime) -> Occurrence: ...
    async def occurrence_list(self, p: OccurrenceListParams) -> list[Occurrence]: ...
    async def occurrence_next_due(self, queue: str, now: datetime) -> datetime | None:
        """The earliest due_at of a waiting occurrence in this queue, for a worker's sleep."""
        ...
    async def attempt_list(self, job_id: str, scheduled_at: datetime) -> list[Attempt]: ...
    async def audit_list(self, p: AuditListParams) -> list[AuditEntry]: ...
