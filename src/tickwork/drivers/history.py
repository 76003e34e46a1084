"""The history seam: what a store offers the pruner (``scheduler/pruner.py`` holds the loop).
Drivers that say ``partitions`` keep attempts in daily partitions; SQLite has none to create
and deletes in batches."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class PartitionsEnsureParams:
    """Daily partitions from the day of ``now`` through ``days_ahead`` days after it."""

    now: datetime
    days_ahead: int = 3


@dataclass(frozen=True, slots=True)
class HistoryPruneParams:
    """Drop history older than ``before``, and audit entries older than ``audit_before``
    (None: keep them); delete at most ``limit`` rows of each kind. ``within_partitions``: a
    retention that is not whole days, so a driver with daily partitions also deletes the older
    attempts inside the partition the cutoff falls in (whole days wait for its drop)."""

    before: datetime
    limit: int = 5000
    audit_before: datetime | None = None
    within_partitions: bool = False


@dataclass(frozen=True, slots=True)
class HistoryPruned:
    partitions_dropped: list[str] = field(default_factory=list)
    occurrences_deleted: int = 0
    attempts_deleted: int = 0
    audit_deleted: int = 0


class HistoryStore(Protocol):
    async def history_partitions_ensure(self, p: PartitionsEnsureParams) -> list[str]:
        """Creates the missing partitions; returns their names."""
        ...

    async def history_prune(self, p: HistoryPruneParams) -> HistoryPruned: ...

    async def history_vacuum(self) -> list[str]:
        """Reclaim dead rows and refresh the planner's statistics where the server would not
        on its own (PostgreSQL with autovacuum off), by the server's own thresholds. The
        tables vacuumed or analyzed; [] when none needs it."""
        ...
