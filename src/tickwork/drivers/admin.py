"""The AdminStore seam: what the REST API, the dashboard and /metrics need beyond the Store.

Queues with a pause switch, aggregates for status pages and plots, API tokens and a health
check. Kept apart from ``Store`` (drivers/base.py) so the core seam stays small; every driver
implements both. Methods are noun-first with one params object, and take ``now`` from the caller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from tickwork.drivers.limits import LimitStore, Rate, limit_state
from tickwork.drivers.namespaces import NamespaceStore
from tickwork.drivers.rows import RowLike
from tickwork.errors import TickworkError

if TYPE_CHECKING:
    pass


class TokenNotFound(TickworkError, LookupError):
    def __init__(self, ref: str) -> None:
        self.ref = ref
        super().__init__(f"no active token {ref!r}")


class Scope(StrEnum):
    """What a token may do; each scope includes the ones before it."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"

    def allows(self, needed: Scope) -> bool:
        order = (Scope.READ, Scope.WRITE, Scope.ADMIN)
        return order.index(self) >= order.index(needed)


@dataclass(frozen=True, slots=True)
class QueueInfo:
    name: str
    paused: bool
    waiting: int  # scheduled, queued or retrying
    due: int  # waiting and due now: the queue's depth
    running: int
    # Limits across every worker (drivers/limits.py); None: not limited.
    max_running: int | None = None
    rate: Rate | None = None
    burst: int | None = None
    tokens: float | None = None  # the rate's tokens left at the ``now`` of the listing
    namespace: str | None = None  # the namespace that owns it; None: shared


@dataclass(frozen=True, slots=True)
class QueueListParams:
    now: datetime
    # The counts (waiting, due, running) of this namespace's jobs only, and the queues it owns
    # or shares (not those other namespaces own); None: every queue, the whole store's counts.
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class QueueSetPausedParams:
    name: str
    paused: bool
    now: datetime


@dataclass(frozen=True, slots=True)
class MinutePoint:
    minute: datetime  # the start of the minute, UTC
    finished: int  # attempts that finished in this minute
    lateness_avg_seconds: float | None  # first attempts that started in it: start - scheduled_at
    lateness_max_seconds: float | None


@dataclass(frozen=True, slots=True)
class StatsParams:
    now: datetime
    window_seconds: int = 3600  # the per-minute series covers this much, up to now
    namespace: str | None = None  # this namespace's jobs and their runs only; None: the store


@dataclass(frozen=True, slots=True)
class Stats:
    jobs: int
    jobs_paused: int
    occurrences_by_state: dict[str, int]
    attempts_by_outcome: dict[str, int]  # over the window
    per_minute: list[MinutePoint]  # oldest first, one point per minute of the window


@dataclass(frozen=True, slots=True)
class JobStatusParams:
    job_id: str
    now: datetime
    last_n: int = 100  # the success rate and lateness cover this job's last n finished runs


@dataclass(frozen=True, slots=True)
class JobStatus:
    job_id: str
    last_scheduled_at: datetime | None  # the newest occurrence that started or ended
    last_state: str | None
    finished: int  # how many of the last n ended (any terminal state)
    succeeded: int
    success_rate: float | None  # succeeded / finished, None when nothing finished
    lateness_avg_seconds: float | None  # first attempts of those runs: started - scheduled_at
    lateness_p95_seconds: float | None
    waiting: int  # occurrences not yet run
    running: int
    by_state: dict[str, int] = field(default_factory=dict)  # over all of the job's runs


@dataclass(frozen=True, slots=True)
class TokenInfo:
    id: str
    name: str
    scope: Scope
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    namespace: str | None = None  # the only namespace it sees; None: every namespace


@dataclass(frozen=True, slots=True)
class TokenCreateParams:
    id: str
    name: str
    scope: Scope
    token_hash: str  # hex SHA-256 of the secret; the secret itself is never stored
    now: datetime
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class TokenAuthenticateParams:
    token_hash: str
    now: datetime
    touch_after_seconds: float = 60.0  # last_used_at is written at most this often


@dataclass(frozen=True, slots=True)
class TokenRevokeParams:
    ref: str  # id or name of an active token
    now: datetime
    namespace: str | None = None  # only a token of this namespace; None: any token


class AdminStore(LimitStore, NamespaceStore, Protocol):
    """Reads and small writes for the API and dashboard. Every method is one transaction."""

    async def health_check(self) -> None:
        """Raises StoreUnavailable when the store cannot answer."""
        ...

    async def queue_list(self, p: QueueListParams) -> list[QueueInfo]:
        """Every queue that has jobs, waiting or running occurrences, or a pause row."""
        ...
    async def queue_names(self) -> list[str]:
        """The names of the queues that have waiting or running occurrences, or a queue row:
        what a scheduler promotes and reconciles. Cheap at any number of jobs (no counts)."""
        ...
    async def queue_set_paused(self, p: QueueSetPausedParams) -> QueueInfo: ...

    async def stats_get(self, p: StatsParams) -> Stats: ...
    async def job_status_get(self, p: JobStatusParams) -> JobStatus: ...

    async def token_create(self, p: TokenCreateParams) -> TokenInfo:
        """Raises Conflict when an active token has the name."""
        ...
    async def token_list(self) -> list[TokenInfo]: ...
    async def token_authenticate(self, p: TokenAuthenticateParams) -> TokenInfo | None:
        """The active token with this hash (and its last use noted), or None."""
        ...
    async def token_revoke(self, p: TokenRevokeParams) -> TokenInfo:
        """Raises LookupError (TokenNotFound) when no active token has the id or name."""
        ...


def queue_info(row: RowLike, tokens_at: datetime | None, now: datetime,
               paused: bool) -> QueueInfo:
    """A queue_list row (name, waiting, due, running and the limit columns) as QueueInfo."""
    limit = limit_state("queue", row, tokens_at)
    return QueueInfo(name=row["name"], paused=paused, waiting=row["waiting"], due=row["due"],
                     running=row["running"], max_running=limit.max_running,
                     rate=limit.rate.rate if limit.rate else None,
                     burst=limit.rate.burst if limit.rate else None,
                     tokens=limit.rate.tokens(limit.bucket, now) if limit.rate else None,
                     namespace=row["namespace"])


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of already sorted values (both drivers report it this way)."""
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]
