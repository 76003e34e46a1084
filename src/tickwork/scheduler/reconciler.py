"""The reconciler: rebuilds Redis' due sets from the store when Redis lost data or drifted.

The store decides and Redis only delivers (DESIGN rule 1), so whatever Redis loses, the store
still has as *waiting* occurrences; this loop puts their keys back (insert-if-absent). A queue is
rebuilt in full when

- the epoch changed or vanished (a flush, a restart without persistence, a failover to an empty
  replica): every queue;
- a worker's read had to create consumer groups (``notify_lost``): that queue;
- its due set and streams are empty while the store says occurrences wait: that queue.

Every ``repair_every_seconds`` it also repairs drift in a queue whose streams hold nothing ready:
store-waiting occurrences overdue by more than ``repair_grace_seconds`` are re-added (a partial
loss, e.g. the last writes before a failover). With nothing ready in the streams, an overdue
waiting occurrence is lost from Redis or in the short window between a read and the store
claim; re-adding the latter costs one claim the store rejects.

Rebuilds page through the store (``page_size`` per call) and resume across ticks, at most
``pages_per_tick`` pages per queue per tick (DESIGN rule 8). Queues of higher priority
(``queue_priorities``) are re-added first: while one is still being rebuilt, queues below it
wait for the next tick (queues of equal priority go side by side). The loop also trims acked entries
from the streams every ``trim_every_seconds``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from tickwork.clock import Clock
from tickwork.drivers.base import OccurrenceWaitingParams, Store
from tickwork.drivers.dispatch import (
    Dispatch,
    DueItem,
    DueRebuildParams,
    QueueStatsParams,
    StreamTrimParams,
    due_ms,
    occurrence_key,
    parse_key,
    to_ms,
)
from tickwork.errors import DispatchUnavailable
from tickwork.scheduler.loop import Loop

log = logging.getLogger("tickwork.reconciler")


@dataclass(frozen=True, slots=True)
class WaitingItem:
    """An occurrence the store has waiting (scheduled, queued or retrying), as Redis needs it."""

    key: str
    due_ms: int
    priority: int = 0


class WaitingSource(Protocol):
    async def waiting(self, queue: str, after: str | None, limit: int,
                      due_before_ms: int | None = None) -> list[WaitingItem]:
        """Up to ``limit`` waiting occurrences of ``queue`` ordered by key, starting after the
        key ``after`` (None: from the first); only those due before ``due_before_ms`` if set."""
        ...


@dataclass(slots=True)
class _Rebuild:
    reason: str
    due_before_ms: int | None = None
    after: str | None = None
    added: int = 0
    seen: int = 0


@dataclass(frozen=True, slots=True)
class Reconciled:
    queue: str
    reason: str
    seen: int  # waiting occurrences the store listed
    added: int  # keys that were missing from the due set


class Reconciler(Loop):
    name = "reconciler"

    def __init__(
        self,
        *,
        dispatch: Dispatch,
        source: WaitingSource,
        clock: Clock,
        queues: Sequence[str] | Callable[[], Iterable[str]],
        interval_seconds: float = 5.0,
        page_size: int = 1000,
        pages_per_tick: int = 20,
        repair_every_seconds: float = 300.0,
        repair_grace_seconds: float = 60.0,
        trim_every_seconds: float = 60.0,
        on_reconciled: Callable[[Reconciled], None] | None = None,
        priorities: Mapping[str, int] | None = None,
    ) -> None:
        """``priorities``: queue -> priority (unnamed: 0); higher ones are rebuilt first."""
        if page_size < 1 or pages_per_tick < 1:
            raise ValueError(f"page_size ({page_size}) and pages_per_tick ({pages_per_tick}) "
                             "must be at least 1")
        if repair_grace_seconds < 0:
            raise ValueError(f"repair_grace_seconds ({repair_grace_seconds}) must not be "
                             "negative")
        super().__init__(clock=clock, interval_seconds=interval_seconds)
        self.dispatch = dispatch
        self.source = source
        self._queues = queues
        self.page_size = page_size
        self.pages_per_tick = pages_per_tick
        self.repair_every = timedelta(seconds=repair_every_seconds)
        self.repair_grace_ms = int(repair_grace_seconds * 1000)
        self.trim_every = timedelta(seconds=trim_every_seconds)
        self.on_reconciled = on_reconciled
        self.priorities = dict(priorities or {})
        self._lost: set[str] = set()
        self._rebuilds: dict[str, _Rebuild] = {}
        self._repaired_at: dict[str, datetime] = {}
        self._trimmed_at: datetime | None = None
        self._outage = False  # a pass failed with Redis unreachable: rebuild when it answers

    def queues(self) -> list[str]:
        return list(self._queues() if callable(self._queues) else self._queues)

    def notify_lost(self, queue: str) -> None:
        """A worker's read had to create consumer groups for ``queue``: rebuild it now."""
        self._lost.add(queue)
        self.wake()

    async def run_once(self, now: datetime) -> tuple[list[Reconciled], bool]:
        """One bounded pass. Returns the rebuilds finished in it and whether more is left."""
        queues = self.queues()
        whole = False  # every queue's rebuild starts in this pass: it covers a lost group
        if not await self.dispatch.epoch_check():
            log.warning("Redis lost its data (epoch gone or changed): rebuilding %d queues "
                        "from the store", len(queues))
            for queue in queues:
                self._start(queue, _Rebuild("epoch"), now)
            whole = True
        elif self._outage:
            # Reachable again with its data: what the store made waiting meanwhile (planned,
            # retried, claimed on the SQL path) may be missing; insert-if-absent is cheap.
            log.warning("Redis is reachable again: re-adding %d queues' waiting occurrences",
                        len(queues))
            for queue in queues:
                self._start(queue, _Rebuild("outage"), now)
            whole = True
        self._outage = False
        lost, self._lost = self._lost, set()
        for queue in lost:
            if whole and queue in self._rebuilds:
                continue  # its rebuild from the first page, under the pass's reason, is begun
            log.warning("queue %s had no consumer group: rebuilding it from the store", queue)
            self._start(queue, _Rebuild("nogroup"), now)
        for queue in queues:
            if queue not in self._rebuilds:
                await self._check(queue, now)
        finished = await self._step_all()
        if self._trimmed_at is None or now - self._trimmed_at >= self.trim_every:
            self._trimmed_at = now
            for queue in queues:
                await self.dispatch.stream_trim(StreamTrimParams(queue))
        return finished, bool(self._rebuilds)

    async def tick(self, now: datetime) -> bool:
        return (await self.run_once(now))[1]

    def _priority(self, queue: str) -> int:
        return self.priorities.get(queue, 0)

    async def _step_all(self) -> list[Reconciled]:
        """A step of each rebuild, highest priority first; while one is left unfinished,
        those below it wait for the next tick."""
        finished: list[Reconciled] = []
        first: int | None = None  # the priority of the highest rebuild left unfinished
        for queue in sorted(self._rebuilds, key=self._priority, reverse=True):
            if first is not None and self._priority(queue) < first:
                continue  # a queue above it is still being re-added: it goes first
            done = await self._step(queue)
            if done is not None:
                finished.append(done)
            elif first is None:
                first = self._priority(queue)
        return finished

    def _start(self, queue: str, rebuild: _Rebuild, now: datetime) -> None:
        # A full rebuild covers a repair too; a new loss restarts one from its first page.
        self._repaired_at[queue] = now
        self._rebuilds[queue] = rebuild

    async def _check(self, queue: str, now: datetime) -> None:
        stats = await self.dispatch.queue_stats(QueueStatsParams(queue))
        if stats.ready:
            return  # work is waiting in the streams: nothing to say about drift yet
        # Nothing due, nothing delivered and unacked: a burst whose entries are all in
        # workers' hands (their claims not committed yet) is not a Redis that lost its data.
        if stats.due == 0 and stats.pending == 0 and await self.source.waiting(queue, None, 1):
            log.warning("queue %s: Redis has nothing while the store has occurrences waiting; "
                        "rebuilding", queue)
            self._start(queue, _Rebuild("empty"), now)
            return
        last = self._repaired_at.get(queue)
        if last is None or now - last >= self.repair_every:
            self._start(queue, _Rebuild("repair", due_before_ms=to_ms(now)
                                        - self.repair_grace_ms), now)

    async def _step(self, queue: str) -> Reconciled | None:
        rebuild = self._rebuilds[queue]
        for _ in range(self.pages_per_tick):
            items = await self.source.waiting(queue, rebuild.after, self.page_size,
                                              rebuild.due_before_ms)
            if items:
                rebuild.added += await self.dispatch.due_rebuild(DueRebuildParams(
                    [DueItem(queue, i.key, i.due_ms, i.priority) for i in items]))
                rebuild.seen += len(items)
                rebuild.after = items[-1].key
            if len(items) < self.page_size:
                del self._rebuilds[queue]
                done = Reconciled(queue, rebuild.reason, rebuild.seen, rebuild.added)
                if done.added or done.reason != "repair":
                    log.warning("queue %s reconciled (%s): %d waiting in the store, %d re-added "
                                "to Redis", queue, done.reason, done.seen, done.added)
                if self.on_reconciled is not None:
                    self.on_reconciled(done)
                return done
        return None

    def failed(self, exc: Exception) -> float:
        """Loop's, logging an unreachable Redis once."""
        if not isinstance(exc, DispatchUnavailable):
            return super().failed(exc)
        if not self._outage:
            log.warning("cannot reconcile, Redis unavailable (%s); retrying every %gs",
                        exc, self.interval_seconds)
        self._outage = True
        return self.interval_seconds


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


class QueueCatalog(Loop):
    """The queues a scheduler promotes and reconciles: those the store knows (unfinished
    occurrences, queue rows), refreshed every ``interval_seconds``, plus any planned since."""

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
        self._names.update(await self.store.admin().queue_names())
        return False
