"""The pruner: keeps history fast by dropping what is past the retention settings, and purges
job definitions that are done with.

On PostgreSQL, attempts live in daily partitions: each pass creates the partitions of the next
days ahead (so attempts never land in the default partition in normal operation), drops whole
partitions older than the retention, and deletes finished occurrences (and any attempts in the
default partition) older than it in bounded batches (DESIGN rule 8). A retention of a fraction
of a day (tests, benchmarks) also deletes, in the same batches, the attempts of finished runs
older than it inside the partitions kept. On SQLite, finished runs and their attempts are
deleted in the same bounded batches. Audit entries older than their own retention go too.

Each pass also purges definitions past ``finished_job_retention_seconds`` (with ``jobs``): one-off
jobs whose run finished that long ago, and jobs deleted that long ago, a batch of each per pass;
their history stays until its own retention.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from tickwork.clock import Clock
from tickwork.drivers.enqueue import PURGE_BATCH, EnqueueStore, JobPurgeParams, JobsPurged
from tickwork.drivers.history import (
    HistoryPruned,
    HistoryPruneParams,
    HistoryStore,
    PartitionsEnsureParams,
)
from tickwork.scheduler.loop import Loop

log = logging.getLogger("tickwork.pruner")
FINISHED_JOB_RETENTION_SECONDS = 7 * 86400.0
DAY = timedelta(days=1)


class Pruner(Loop):
    name = "pruner"

    def __init__(self, *, store: HistoryStore, clock: Clock, retention_days: float = 30,
                 audit_retention_days: int = 365, days_ahead: int = 3,
                 interval_seconds: float = 600.0, batch_size: int = 5000,
                 jobs: EnqueueStore | None = None,
                 finished_job_retention_seconds: float = FINISHED_JOB_RETENTION_SECONDS,
                 purge_batch: int = PURGE_BATCH,
                 on_purged: Callable[[JobsPurged], None] | None = None,
                 on_deleted: Callable[[], None] | None = None) -> None:
        if not retention_days > 0:
            raise ValueError(f"retention_days must be greater than 0 (got {retention_days})")
        if audit_retention_days < 1:
            raise ValueError(f"audit_retention_days must be at least 1 (got "
                             f"{audit_retention_days})")
        if days_ahead < 1:
            raise ValueError(f"days_ahead must be at least 1 (got {days_ahead})")
        if not finished_job_retention_seconds > 0:
            raise ValueError("finished_job_retention_seconds must be greater than 0 "
                             f"(got {finished_job_retention_seconds})")
        if purge_batch < 1:
            raise ValueError(f"purge_batch must be at least 1 (got {purge_batch})")
        super().__init__(clock=clock, interval_seconds=interval_seconds)
        self.store = store
        self.retention = timedelta(days=retention_days)
        self.audit_retention = timedelta(days=audit_retention_days)
        self.days_ahead = days_ahead
        self.batch_size = batch_size
        self.jobs = jobs
        self.job_retention = timedelta(seconds=finished_job_retention_seconds)
        self.purge_batch = purge_batch
        self.on_purged = on_purged
        self.on_deleted = on_deleted  # a pass deleted rows (the vacuumer looks at once)
        self._purge_full = False

    async def run_once(self, now: datetime) -> HistoryPruned:
        """One pass: history and audit entries, then a batch of definitions."""
        created = await self.store.history_partitions_ensure(
            PartitionsEnsureParams(now=now, days_ahead=self.days_ahead))
        if created:
            log.info("created history partitions %s", ", ".join(created))
        pruned = await self.store.history_prune(HistoryPruneParams(
            before=now - self.retention, limit=self.batch_size,
            audit_before=now - self.audit_retention,
            within_partitions=bool(self.retention % DAY)))
        if pruned.partitions_dropped or pruned.occurrences_deleted or pruned.attempts_deleted:
            log.info("pruned history older than %s: dropped %s, deleted %d runs and %d attempts",
                     _instant(now - self.retention, self.retention),
                     ", ".join(pruned.partitions_dropped) or "no partitions",
                     pruned.occurrences_deleted, pruned.attempts_deleted)
        if pruned.audit_deleted:
            log.info("pruned %d audit entries older than %s", pruned.audit_deleted,
                     (now - self.audit_retention).date().isoformat())
        purged = await self.purge_once(now)
        self._purge_full = max(purged.finished, purged.deleted) >= self.purge_batch
        if (pruned.partitions_dropped or pruned.occurrences_deleted or pruned.attempts_deleted
                or purged.finished or purged.deleted) and self.on_deleted is not None:
            self.on_deleted()
        return pruned

    async def purge_once(self, now: datetime) -> JobsPurged:
        """One batch of finished one-off jobs and deleted jobs past the retention."""
        if self.jobs is None:
            return JobsPurged()
        before = now - self.job_retention
        purged = await self.jobs.job_purge(
            JobPurgeParams(before=before, now=now, limit=self.purge_batch))
        if purged.finished or purged.deleted:
            log.info("purged job definitions that ended before %s: %d finished one-off jobs, "
                     "%d deleted jobs (%d dedupe keys)", before.isoformat(timespec="seconds"),
                     purged.finished, purged.deleted, purged.dedupe_keys)
        if self.on_purged is not None:
            self.on_purged(purged)
        return purged

    async def tick(self, now: datetime) -> bool:
        pruned = await self.run_once(now)
        return (max(pruned.occurrences_deleted, pruned.attempts_deleted,
                    pruned.audit_deleted) >= self.batch_size or self._purge_full)


def _instant(at: datetime, retention: timedelta) -> str:
    """The cutoff as a day, or to the second when the retention is not whole days."""
    if retention % DAY:
        return at.isoformat(timespec="seconds")
    return at.date().isoformat()
