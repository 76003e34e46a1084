"""The feeder: puts occurrences the store made waiting into the due set.

After a planner commit, a trigger, a backfill, a rescue, a release or a retry claimed on the SQL
path. A failure never undoes what the store committed: it is logged at warning, and the
reconciler repairs Redis (``on_recovered`` is told when Redis answers again, to rebuild at once).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence

from tickwork.clock import Clock
from tickwork.drivers.base import JobAdvance, NewOccurrence, Rescued, Store
from tickwork.drivers.dispatch import Dispatch, DueAddParams, DueItem, due_item
from tickwork.errors import DispatchError, DispatchUnavailable
from tickwork.models import Occurrence, OccurrenceState

log = logging.getLogger("tickwork.feeder")

_WAITING = frozenset({OccurrenceState.SCHEDULED, OccurrenceState.QUEUED,
                      OccurrenceState.RETRYING})


class DueFeeder:
    """``due_add`` that never fails its caller: the store has committed already.

    While Redis is down it tries at most once every ``retry_seconds`` (each try waits at most
    ``timeout_seconds``), so a planner is never held up for long; what it skips is counted,
    and ``on_recovered`` (a full reconcile) re-adds it once Redis answers.
    """

    def __init__(self, dispatch: Dispatch, clock: Clock, *,
                 on_added: Callable[[], None] | None = None,
                 on_recovered: Callable[[], None] | None = None,
                 retry_seconds: float = 2.0, timeout_seconds: float = 2.0) -> None:
        self.dispatch = dispatch
        self.clock = clock
        self.retry_seconds = retry_seconds
        self.timeout_seconds = timeout_seconds
        self._tried_at = 0.0
        self.on_added = on_added  # e.g. the local promoter's wake()
        self.on_recovered = on_recovered  # e.g. a full reconcile: what failed is missing
        self.down = False
        self.failed = 0  # occurrences whose due_add failed (the reconciler re-adds them)

    async def add(self, items: Sequence[DueItem]) -> bool:
        if not items:
            return True
        if self.down and self.clock.monotonic() - self._tried_at < self.retry_seconds:
            self.failed += len(items)
            return False
        self._tried_at = self.clock.monotonic()
        try:
            await asyncio.wait_for(self.dispatch.due_add(DueAddParams(items)),
                                   self.timeout_seconds)
        except (DispatchUnavailable, TimeoutError) as exc:
            self.failed += len(items)
            if not self.down:
                log.warning("cannot add due occurrences to Redis (%s); they are safe in the "
                            "store, and the reconciler re-adds them when Redis is back", exc)
            self.down = True
            return False
        except DispatchError:
            self.failed += len(items)
            log.exception("adding %d due occurrences to Redis failed; the reconciler will "
                          "re-add them", len(items))
            return False
        if self.down:
            self.down = False
            log.warning("Redis accepts due occurrences again")
            if self.on_recovered is not None:
                self.on_recovered()
        if self.on_added is not None:
            self.on_added()
        return True

    async def add_waiting(self, occurrences: Iterable[NewOccurrence | Occurrence]) -> bool:
        return await self.add([due_item(o) for o in occurrences if o.state in _WAITING])

    async def after_plan(self, advances: Sequence[JobAdvance]) -> None:
        """The planner's ``after_commit``: the SCHEDULED occurrences it planned."""
        await self.add([due_item(o) for a in advances for o in a.occurrences
                        if o.state is OccurrenceState.SCHEDULED])

    def after_rescue(self, store: Store) -> Callable[[list[Rescued]], Awaitable[None]]:
        """The rescuer's ``after_rescue``: rescued occurrences that will be retried."""

        async def hook(rescued: list[Rescued]) -> None:
            retried = [await store.occurrence_get(r.job_id, r.scheduled_at) for r in rescued
                       if r.state is OccurrenceState.RETRYING]
            await self.add_waiting(retried)

        return hook
