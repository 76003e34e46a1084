"""A scheduler process's Redis side: the promoter and the reconciler over the store's queues,
and the feeder its planner and rescuer hand their occurrences to."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from tickwork.clock import Clock
from tickwork.drivers.base import JobAdvance, NewOccurrence, Rescued, Store
from tickwork.drivers.dispatch import Dispatch
from tickwork.drivers.feeder import DueFeeder
from tickwork.scheduler.loop import Loop
from tickwork.scheduler.promoter import Promoter
from tickwork.scheduler.reconciler import (
    QueueCatalog,
    Reconciled,
    Reconciler,
    StoreWaitingSource,
)


class SchedulerDispatch:
    """What a scheduler process runs for Redis: the promoter and the reconciler over the
    store's queues, and the feeder its planner and rescuer hand their occurrences to."""

    def __init__(self, *, store: Store, dispatch: Dispatch, clock: Clock,
                 reconcile_interval_seconds: float = 2.0,
                 on_promoted: Callable[[str, int], None] | None = None,
                 on_backlog: Callable[[str, int], None] | None = None,
                 on_reconciled: Callable[[Reconciled], None] | None = None,
                 priorities: Mapping[str, int] | None = None) -> None:
        """``on_promoted``, ``on_backlog`` and ``on_reconciled``: the promoter's and the
        reconciler's hooks (metrics); ``priorities``: the queues the reconciler re-adds
        first."""
        self.store = store
        self.dispatch = dispatch
        self.catalog = QueueCatalog(store, clock)
        self.promoter = Promoter(dispatch=dispatch, clock=clock, queues=self.catalog,
                                 on_promoted=on_promoted, on_backlog=on_backlog)
        self.reconciler = Reconciler(dispatch=dispatch, source=StoreWaitingSource(store),
                                     clock=clock, queues=self.catalog,
                                     interval_seconds=reconcile_interval_seconds,
                                     on_reconciled=on_reconciled, priorities=priorities)
        self.feeder = DueFeeder(dispatch, clock, on_added=self.promoter.wake,
                                on_recovered=self._rebuild_all)

    def _rebuild_all(self) -> None:
        for queue in self.catalog():
            self.reconciler.notify_lost(queue)

    async def after_plan(self, advances: Sequence[JobAdvance]) -> None:
        self.catalog.add(o.queue for a in advances for o in a.occurrences)
        await self.feeder.after_plan(advances)

    def after_rescue(self) -> Callable[[list[Rescued]], Awaitable[None]]:
        return self.feeder.after_rescue(self.store)

    async def after_chained(self, occurrences: list[NewOccurrence]) -> None:
        """Runs that chains triggered (a rescue's on_failure or on_dead): into the due set."""
        self.catalog.add(o.queue for o in occurrences)
        await self.feeder.add_waiting(occurrences)

    def loops(self) -> tuple[Loop, ...]:
        return (self.catalog, self.promoter, self.reconciler)
