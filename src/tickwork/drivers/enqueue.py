"""The enqueue seam: one-off jobs created without a name, with an optional dedupe key, and
the purge of finished one-off and deleted job definitions (``scheduler/pruner.py``).

A dedupe key is held in ``job_dedupe`` (its primary key) until ``dedupe_until``: an enqueue
that finds the key held by a live job gets that job back instead of creating one. The primary
key is what makes this safe under concurrent enqueues, never a read before the write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from tickwork.models import Job

if TYPE_CHECKING:
    from tickwork.drivers.base import JobCreateParams  # base's Store extends EnqueueStore

PURGE_BATCH = 1000  # definitions one purge call removes at most (DESIGN rule 8)


@dataclass(frozen=True, slots=True)
class EnqueueItem:
    create: JobCreateParams
    dedupe_key: str | None = None
    dedupe_until: datetime | None = None  # the key is held until then (required with a key)


@dataclass(frozen=True, slots=True)
class JobEnqueueParams:
    """Create each item's job unless its dedupe key is held by a live job; all in one
    transaction, in order (an item may find the key an earlier item of the batch took)."""

    items: Sequence[EnqueueItem]
    now: datetime


@dataclass(frozen=True, slots=True)
class Enqueued:
    job: Job
    created: bool  # False: the dedupe key was held, ``job`` is the one holding it


@dataclass(frozen=True, slots=True)
class JobPurgeParams:
    """Remove definitions that ended before ``before``: one-off jobs whose run finished
    (no waiting or running occurrence, none finished at or after ``before``), and jobs
    deleted before it. At most ``limit`` of each; their history stays (it has its own
    retention). Expired dedupe keys and those of removed jobs go too."""

    before: datetime
    now: datetime
    limit: int = PURGE_BATCH


@dataclass(frozen=True, slots=True)
class JobsPurged:
    finished: int = 0
    deleted: int = 0
    dedupe_keys: int = 0


class EnqueueStore(Protocol):
    async def job_enqueue(self, p: JobEnqueueParams) -> list[Enqueued]: ...
    async def job_purge(self, p: JobPurgeParams) -> JobsPurged: ...
