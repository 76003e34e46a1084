"""The pruner: keeps history fast by dropping what is past the retention settings.

On PostgreSQL, attempts live in daily partitions: each pass creates the partitions of the next
days ahead (so attempts never land in the default partition in normal operation), drops whole
partitions older than the retention, and deletes finished occurrences (and any attempts in the
default partition) older than it in bounded batches (DESIGN rule 8). On SQLite, finished runs
and their attempts are deleted in the same bounded batches. Audit entries older than their own
retention go too.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from tickwork.clock import Clock
from tickwork.drivers.history import (
    HistoryPruned,
    HistoryPruneParams,
    HistoryStore,
    PartitionsEnsureParams,
)
from tickwork.scheduler.loop import Loop

log = logging.getLogger("tickwork.pruner")


class Pruner(Loop):
    name = "pruner"

    def __init__(self, *, store: HistoryStore, clock: Clock, retention_days: int = 30,
                 audit_retention_days: int = 365, days_ahead: int = 3,
                 interval_seconds: float = 600.0, batch_size: int = 5000) -> None:
        if min(retention_days, audit_retention_days) < 1:
            raise ValueError(f"retention days must be at least 1 (got {retention_days} and "
                             f"{audit_retention_days})")
        if days_ahead < 1:
            raise ValueError(f"days_ahead must be at least 1 (got {days_ahead})")
        super().__init__(clock=clock, interval_seconds=interval_seconds)
        self.store = store
        self.retention = timedelta(days=retention_days)
        self.audit_retention = timedelta(days=audit_retention_days)
        self.days_ahead = days_ahead
        self.batch_size = batch_size

    async def run_once(self, now: datetime) -> HistoryPruned:
        created = await self.store.history_partitions_ensure(
            PartitionsEnsureParams(now=now, days_ahead=self.days_ahead))
        if created:
            log.info("created history partitions %s", ", ".join(created))
        pruned = await self.store.history_prune(HistoryPruneParams(
            before=now - self.retention, limit=self.batch_size,
            audit_before=now - self.audit_retention))
        if pruned.partitions_dropped or pruned.occurrences_deleted or pruned.attempts_deleted:
            log.info("pruned history older than %s: dropped %s, deleted %d runs and %d attempts",
                     (now - self.retention).date().isoformat(),
                     ", ".join(pruned.partitions_dropped) or "no partitions",
                     pruned.occurrences_deleted, pruned.attempts_deleted)
        if pruned.audit_deleted:
            log.info("pruned %d audit entries older than %s", pruned.audit_deleted,
                     (now - self.audit_retention).date().isoformat())
        return pruned

    async def tick(self, now: datetime) -> bool:
        pruned = await self.run_once(now)
        return max(pruned.occurrences_deleted, pruned.attempts_deleted,
                   pruned.audit_deleted) >= self.batch_size
