"""The rescuer: finds attempts whose lease expired (a worker died or hung) and settles them.

Each becomes ``crashed``; its occurrence is retried while attempts remain, or ends ``crashed``
(always, for at_most_once jobs). The attempt fence rejects a late result from the old worker.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from tickwork.clock import Clock
from tickwork.drivers.base import MAX_BATCH, OccurrenceRescueParams, Rescued, Store
from tickwork.models import WAITING_STATES
from tickwork.scheduler.loop import Loop

log = logging.getLogger("tickwork.rescuer")


class Rescuer(Loop):
    name = "rescuer"

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        interval_seconds: float = 5.0,
        sole_worker: str | None = None,
        on_rescued: Callable[[list[Rescued]], None] | None = None,
        after_rescue: Callable[[list[Rescued]], Awaitable[None]] | None = None,
    ) -> None:
        """``sole_worker``: set only by a process that holds the store's lock (the embedded
        service); leases of every other worker are then orphans and are rescued at once."""
        super().__init__(clock=clock, interval_seconds=interval_seconds)
        self.store = store
        self.sole_worker = sole_worker
        self.on_rescued = on_rescued
        self.after_rescue = after_rescue  # the Redis deployment re-arms retried occurrences

    async def run_once(self, now: datetime) -> list[Rescued]:
        rescued = await self.store.occurrence_rescue(
            OccurrenceRescueParams(now=now, all_but_worker=self.sole_worker))
        for r in rescued:
            # A run that will not be tried again (crashed, or dead) is an error; a retry is not.
            level = logging.WARNING if r.state in WAITING_STATES else logging.ERROR
            log.log(level, "rescued %s @ %s attempt %d from worker %s (its lease ran out): "
                    "now %s", r.job_id, r.scheduled_at.isoformat(), r.attempt, r.worker,
                    r.state.value)
        if rescued and self.on_rescued is not None:
            self.on_rescued(rescued)
        if rescued and self.after_rescue is not None:
            await self.after_rescue(rescued)
        return rescued

    async def tick(self, now: datetime) -> bool:
        return len(await self.run_once(now)) >= MAX_BATCH
