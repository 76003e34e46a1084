"""The store and the Redis dispatch, wired together: keys, waiting lists, and due_add glue.

The store decides and Redis only delivers (DESIGN rule 1). Everything here is the store
integration's side of ``docs/redis.md``:

- one key per occurrence, ``job_id|<scheduled_at in integer microseconds>`` (``occurrence_key``,
  ``parse_key``): the only place that knows the encoding;
- ``StoreWaitingSource``: the reconciler's ``WaitingSource`` on ``Store.occurrence_waiting``;
- ``DueFeeder``: puts occurrences the store made waiting into the due set (after a planner
  commit, a trigger, a backfill, a rescue, a release, a retry claimed on the SQL path). A
  failure never undoes what the store committed: it is logged at warning, and the reconciler
  repairs Redis (``on_recovered`` is told when Redis answers again, to rebuild at once);
- ``QueueCatalog``: which queues exist, for the promoter and the reconciler of a scheduler;
- ``SchedulerDispatch``: a scheduler process's Redis side (catalog, promoter, reconciler,
  feeder), and ``open_dispatch`` for the client settings the processes use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis

from tickwork.clock import Clock
from tickwork.drivers.admin import QueueListParams, admin_for
from tickwork.drivers.base import (
    JobAdvance,
    NewOccurrence,
    OccurrenceWaitingParams,
    Rescued,
    Store,
)
from tickwork.drivers.dispatch import EPOCH, Dispatch, DueAddParams, DueItem, due_ms
from tickwork.drivers.redis.dispatch import RedisDispatch
from tickwork.errors import DispatchError, DispatchUnavailable
from tickwork.models import Occurrence, OccurrenceState
from tickwork.scheduler.loop import Loop
from tickwork.scheduler.promoter import Promoter
from tickwork.scheduler.reconciler import Reconciler, WaitingItem

if TYPE_CHECKING:
    from tickwork.client import AsyncClient

log = logging.getLogger("tickwork.dispatching")

SEPARATOR = "|"
_WAITING = frozenset({OccurrenceState.SCHEDULED, OccurrenceState.QUEUED,
                      OccurrenceState.RETRYING})


def occurrence_key(job_id: str, scheduled_at: datetime) -> str:
    """``job_id|<µs since the epoch>``: exact (no float), and sorts nowhere in particular."""
    if scheduled_at.tzinfo is None:
        scheduled_at = scheduled_at.replace(tzinfo=UTC)
    return f"{job_id}{SEPARATOR}{(scheduled_at - EPOCH) // timedelta(microseconds=1)}"


def parse_key(key: str) -> tuple[str, datetime]:
    """The (job_id, scheduled_at) of a key; ValueError if it is not one of ours."""
    job_id, sep, micros = key.rpartition(SEPARATOR)
    if not sep or not job_id or not micros.lstrip("-").isdigit():
        raise ValueError(f"not an occurrence key: {key!r}")
    return job_id, EPOCH + timedelta(microseconds=int(micros))


def due_item(o: NewOccurrence | Occurrence) -> DueItem:
    return DueItem(queue=o.queue, key=occurrence_key(o.job_id, o.scheduled_at),
                   due_ms=due_ms(o.due_at), priority=o.priority)


class StoreWaitingSource:
    """The reconciler's WaitingSource: the store's waiting occurrences, in key order."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def waiting(self, queue: str, after: str | None, limit: int,
                      due_before_ms: int | None = None) -> list[WaitingItem]:
        rows = await self.store.occurrence_waiting(OccurrenceWaitingParams(
            queue=queue, after=None if after is None else parse_key(after), limit=limit,
            due_before=None if due_before_ms is None else datetime.fromtimestamp(
                due_before_ms / 1000, tz=UTC)))
        return [WaitingItem(occurrence_key(r.job_id, r.scheduled_at), due_ms(r.due_at),
                            r.priority) for r in rows]


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


class QueueCatalog(Loop):
    """The queues a scheduler promotes and reconciles: those the store knows (jobs, unfinished
    occurrences, pause rows), refreshed every ``interval_seconds``, plus any planned since."""

    name = "queue-catalog"

    def __init__(self, store: Store, clock: Clock, *, initial: Iterable[str] = ("default",),
                 interval_seconds: float = 10.0) -> None:
        super().__init__(clock=clock, interval_seconds=interval_seconds)
        self.store = store
        self._names: set[str] = set(initial)

    def __call__(self) -> list[str]:
        return sorted(self._names)

    def add(self, names: Iterable[str]) -> None:
        self._names.update(names)

    async def tick(self, now: datetime) -> bool:
        queues = await admin_for(self.store).queue_list(QueueListParams(now=now))
        self._names.update(q.name for q in queues)
        return False


def open_dispatch(url: str, *, block_ms: int = 1000, **options: Any) -> RedisDispatch:
    """A RedisDispatch on its own client. The socket timeout outlasts a blocking read, so a
    hung Redis (stopped, partitioned) surfaces as DispatchUnavailable instead of a hang."""
    client = Redis.from_url(url, decode_responses=True, socket_connect_timeout=2,
                            socket_timeout=max(2.0, block_ms / 1000 + 1.0),
                            health_check_interval=30)
    return RedisDispatch(client, owns_client=True, **options)


class SchedulerDispatch:
    """What a scheduler process runs for Redis: the promoter and the reconciler over the
    store's queues, and the feeder its planner and rescuer hand their occurrences to."""

    def __init__(self, *, store: Store, dispatch: Dispatch, clock: Clock,
                 reconcile_interval_seconds: float = 2.0) -> None:
        self.store = store
        self.dispatch = dispatch
        self.catalog = QueueCatalog(store, clock)
        self.promoter = Promoter(dispatch=dispatch, clock=clock, queues=self.catalog)
        self.reconciler = Reconciler(dispatch=dispatch, source=StoreWaitingSource(store),
                                     clock=clock, queues=self.catalog,
                                     interval_seconds=reconcile_interval_seconds)
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

    def loops(self) -> tuple[Loop, ...]:
        return (self.catalog, self.promoter, self.reconciler)


def attach_dispatch(client: AsyncClient, url: str) -> None:
    """Give ``client`` Redis dispatch: occurrences it triggers or backfills go into the due
    set as soon as the store has them (not at the reconciler's next repair)."""
    dispatch = open_dispatch(url)
    client.after_insert = DueFeeder(dispatch, client.clock).add_waiting
    client.on_close(dispatch.close)
