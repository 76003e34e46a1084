"""The alert part of the Store seam: alerts that fire and resolve, and their deliveries.

An alert is one (job, condition) going wrong: it fires once (a unique index allows one firing
alert per job and condition, so evaluators racing on one job, in one process or several,
record it once) and resolves when the job recovers. Firing and resolving write the alert's
deliveries (one per channel) in the same transaction; a delivery loop claims them, sends
them and records each attempt. Every driver passes ``tickwork.testing.conformance.alerts``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from tickwork.models import Job

FIRING = "firing"
RESOLVED = "resolved"
PENDING = "pending"
DELIVERED = "delivered"
FAILED = "failed"
# The conditions, in the order they are evaluated and shown.
CONDITIONS = ("failed", "consecutive_failures", "late_start", "running_too_long",
              "no_success")
MAX_ALERTS = 500  # listed at once


@dataclass(frozen=True, slots=True)
class NewDelivery:
    channel: int  # its index in the job's alerts.channels
    kind: str  # the channel's kind: slack, email, webhook, publish
    payload: str  # the executor payload as JSON, secrets as references


@dataclass(frozen=True, slots=True)
class AlertDelivery:
    id: str
    alert_id: str
    event: str  # fired or resolved
    channel: int
    kind: str
    payload: str
    state: str  # pending, delivered or failed
    attempts: int
    next_attempt_at: datetime
    created_at: datetime
    finished_at: datetime | None = None
    last_error: str | None = None
    # The namespace of the alert's job, where its channels' secrets resolve (set by
    # delivery_claim; "" when the job is gone, where no secret resolves).
    namespace: str = "default"


@dataclass(frozen=True, slots=True)
class StoredAlert:
    id: str
    job_id: str
    job_name: str
    condition: str
    state: str  # firing or resolved
    detail: str
    notified: bool  # False: it fired inside the cooldown, and nothing was sent
    fired_at: datetime
    updated_at: datetime
    resolved_at: datetime | None = None
    deliveries: tuple[AlertDelivery, ...] = ()


@dataclass(frozen=True, slots=True)
class AlertFireParams:
    """Record a firing alert unless one of this job and condition is firing already (then
    None). Its deliveries are written unless the last notified alert of this job and condition
    fired less than ``cooldown_seconds`` before ``now`` (then ``notified`` is False)."""

    job_id: str
    job_name: str
    condition: str
    detail: str
    now: datetime
    cooldown_seconds: float
    deliveries: Sequence[NewDelivery] = ()


@dataclass(frozen=True, slots=True)
class AlertResolveParams:
    """Resolve the firing alert of this job and condition (None if there is none); its
    deliveries are written only if the alert was notified."""

    job_id: str
    condition: str
    detail: str
    now: datetime
    deliveries: Sequence[NewDelivery] = ()


@dataclass(frozen=True, slots=True)
class AlertListParams:
    job_id: str | None = None
    state: str | None = None  # firing or resolved
    before: tuple[datetime, str] | None = None  # cursor: (fired_at, id) of the last row
    limit: int = 100


@dataclass(frozen=True, slots=True)
class AlertFactsParams:
    """What the conditions of one job are judged on. ``recent``: how many of its last ended
    runs to read (cancelled and skipped ones left out); ``late_after`` and
    ``running_longer_than``: the thresholds, in seconds (None: not asked); ``ended_since``:
    also read the failed runs that ended at or after this instant (the previous pass), so a
    failure followed by a success before the pass is still seen (None: not asked)."""

    job_id: str
    now: datetime
    recent: int = 1
    late_after: float | None = None
    running_longer_than: float | None = None
    ended_since: datetime | None = None


@dataclass(frozen=True, slots=True)
class AlertFacts:
    recent: list[tuple[datetime, str]] = field(default_factory=list)  # newest first: (at, state)
    last_success_at: datetime | None = None  # when the last succeeded run finished
    late_since: datetime | None = None  # the oldest not started run due before the threshold
    running_since: datetime | None = None  # the oldest running attempt claimed before it
    # failed runs that ended since ``ended_since``, newest first: (scheduled at, state)
    failed_since: list[tuple[datetime, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AlertJobsParams:
    """Jobs (not deleted) by id after ``after_id``; only those whose spec has alerts unless
    ``every_job`` (defaults in the settings apply to the others); only of ``shards`` if set."""

    after_id: str = ""
    limit: int = 500
    every_job: bool = False
    shards: frozenset[int] | None = None


@dataclass(frozen=True, slots=True)
class DeliveryClaimParams:
    """Pending deliveries due by ``now``: each gets attempts + 1 and is hidden from other
    claimers until ``now + lease_seconds`` (a delivery loop that dies leaves it to the next)."""

    now: datetime
    limit: int = 50
    lease_seconds: float = 60.0


@dataclass(frozen=True, slots=True)
class DeliveryFinishParams:
    """The result of one attempt, applied only while the delivery is pending at ``attempt``.
    ``retry_at`` None: final (delivered if ``error`` is None, else failed)."""

    id: str
    attempt: int
    now: datetime
    error: str | None = None
    retry_at: datetime | None = None


class AlertStore(Protocol):
    async def alert_fire(self, p: AlertFireParams) -> StoredAlert | None: ...
    async def alert_resolve(self, p: AlertResolveParams) -> StoredAlert | None: ...
    async def alert_list(self, p: AlertListParams) -> list[StoredAlert]:
        """Newest first (fired_at, then id), each with its deliveries."""
        ...
    async def alert_facts(self, p: AlertFactsParams) -> AlertFacts: ...
    async def alert_jobs(self, p: AlertJobsParams) -> list[Job]: ...
    async def delivery_claim(self, p: DeliveryClaimParams) -> list[AlertDelivery]: ...
    async def delivery_finish(self, p: DeliveryFinishParams) -> bool:
        """True if applied; False if fenced off (another claimer took it since)."""
        ...
