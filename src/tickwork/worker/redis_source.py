"""Claims of what Redis delivers: read a batch, claim those keys in the store, settle entries.

Per queue: ``entry_read`` (a batch, blocking at most ``block_ms``) -> ``occurrence_claim_keys``
(the store decides: claim, not due, gone) -> the pool executes -> the completer writes the
result, fenced -> then the entry is acked, or, for a retry the store now holds, re-armed with
``entry_retry`` at its due time (DESIGN rule 3: never ack before the store has the outcome).
Keys the store calls gone are acked; keys not due are re-armed at the store's due time.

Alongside: acks are batched; the heartbeat touches running entries so they never look idle;
entries idle past ``reclaim_idle_seconds`` (their consumer died or hung) are reclaimed and
claimed afresh, and one delivered more than ``max_deliveries`` times goes to the dead stream.

**Degraded mode.** When Redis is unreachable (``DispatchUnavailable``), claims come straight
from the store (``SqlClaimSource``: ``occurrence_claim``, SKIP LOCKED), queues of higher
priority first (``worker/priorities.py``), and ``health()`` is
probed every ``probe_seconds``; when it answers, reads resume. The switch never runs an
occurrence twice: a key Redis delivers for an occurrence the SQL path already ran is ``gone``
to the store's claim, and is acked.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from typing import Any

from tickwork.clock import Clock
from tickwork.drivers.base import (
    ClaimResult,
    Completion,
    KeyClaimResult,
    NewOccurrence,
    OccurrenceClaimKeysParams,
    Store,
)
from tickwork.drivers.dispatch import (
    MAX_READ,
    Dispatch,
    DueItem,
    Entry,
    EntryAckParams,
    EntryDeadLetterParams,
    EntryReadParams,
    EntryReclaimParams,
    EntryRetryParams,
    EntryTouchParams,
    due_ms,
    occurrence_key,
    parse_key,
    to_ms,
)
from tickwork.drivers.feeder import DueFeeder
from tickwork.errors import DispatchError, DispatchUnavailable
from tickwork.models import Claim, OccurrenceState
from tickwork.tasks import cancel_and_wait
from tickwork.worker.failpoints import failpoint
from tickwork.worker.priorities import PriorityGate
from tickwork.worker.sources import SqlClaimSource

log = logging.getLogger("tickwork.worker.redis")

REDIS, DEGRADED = "redis", "degraded"
Key = tuple[str, datetime]


class RedisClaimSource:
    def __init__(
        self,
        *,
        store: Store,
        dispatch: Dispatch,
        clock: Clock,
        worker_id: str,
        lease_seconds: float = 30.0,
        heartbeat_seconds: float = 10.0,
        poll_interval_seconds: float = 1.0,
        block_ms: int = 1000,
        max_deliveries: int = 5,
        reclaim_idle_seconds: float | None = None,
        probe_seconds: float = 3.0,
        recheck_seconds: float = 1.0,
        on_lost: Callable[[str], None] | None = None,
        on_mode: Callable[[str], None] | None = None,
        priorities: Mapping[str, int] | None = None,
    ) -> None:
        """``reclaim_idle_seconds`` (default 3 x heartbeat): how long an entry must sit
        untouched before another worker takes it over; more than the heartbeat interval, so
        a live worker's running entries are never taken. ``recheck_seconds``: the earliest a
        key the store would not claim (paused, locked, held back by its overlap policy) is
        delivered again. ``on_lost(queue)``: a read had to create consumer groups (Redis lost
        its data); the reconciler of a scheduler notices the same through the epoch.
        ``priorities``: each queue this worker serves and its priority; in degraded mode a
        queue claims only while none above it is behind (``PriorityGate``)."""
        idle = 3 * heartbeat_seconds if reclaim_idle_seconds is None else reclaim_idle_seconds
        if idle <= heartbeat_seconds:
            raise ValueError(f"reclaim_idle_seconds ({idle}) must be more than "
                             f"heartbeat_seconds ({heartbeat_seconds})")
        if max_deliveries < 1:
            raise ValueError(f"max_deliveries ({max_deliveries}) must be at least 1")
        self.store = store
        self.dispatch = dispatch
        self.clock = clock
        self.worker_id = worker_id
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.block_ms = block_ms
        self.max_deliveries = max_deliveries
        self.reclaim_idle_ms = int(idle * 1000)
        self.probe_seconds = probe_seconds
        self.recheck_ms = int(recheck_seconds * 1000)
        self.on_lost = on_lost
        self.on_mode = on_mode
        self.sql = SqlClaimSource(store=store, clock=clock, worker_id=worker_id,
                                  lease_seconds=lease_seconds,
                                  poll_interval_seconds=poll_interval_seconds)
        self.feeder = DueFeeder(dispatch, clock)
        self.gate = PriorityGate(priorities or {})
        self.mode = REDIS
        self.dead_lettered = 0
        self.reclaimed = 0  # entries taken over from consumers that died or hung
        self._queues: set[str] = set()
        # Held until the run's result is written: queue, entry and the attempt it started.
        self._entries: dict[Key, tuple[str, Entry, int]] = {}
        self._backlog: dict[str, list[Entry]] = defaultdict(list)
        self._acks: dict[str, list[Entry]] = defaultdict(list)
        self._ack_wake = asyncio.Event()
        self._wake: Callable[[str], None] = lambda _queue: None
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, wake: Callable[[str], None]) -> None:
        self._wake = wake
        self._tasks = [asyncio.create_task(self._ack_loop(), name="redis-acks"),
                       asyncio.create_task(self._reclaim_loop(), name="redis-reclaim")]

    async def stop(self) -> None:
        await cancel_and_wait(*self._tasks)  # each calls Redis: a cancel may be lost
        self._tasks.clear()
        await self._flush_acks()

    # -- the mode ----------------------------------------------------------------------------

    def _degrade(self, exc: Exception) -> None:
        if self.mode == REDIS:
            log.warning("Redis is unavailable (%s): DEGRADED MODE, claiming straight from the "
                        "store; probing Redis every %gs", exc, self.probe_seconds)
            self.mode = DEGRADED
            self.gate.degraded()
            if self.on_mode is not None:
                self.on_mode(self.mode)
            self._tasks.append(asyncio.create_task(self._probe_loop(), name="redis-probe"))

    async def _probe_loop(self) -> None:
        """In degraded mode: ask ``health()`` every ``probe_seconds`` (a hung Redis counts
        as down), and go back to reading from Redis once it answers."""
        while self.mode == DEGRADED:
            await self.clock.sleep(self.probe_seconds)
            try:
                ok = (await asyncio.wait_for(self.dispatch.health(), self.probe_seconds)).ok
            except (TimeoutError, DispatchError):
                ok = False
            if ok:
                log.warning("Redis is reachable again: leaving degraded mode, reading from "
                            "Redis")
                self.mode = REDIS
                if self.on_mode is not None:
                    self.on_mode(self.mode)
                self.gate.reset(self._wake, self._queues)

    # -- claiming ----------------------------------------------------------------------------

    async def claim(self, queue: str, free: int, now: datetime) -> ClaimResult:
        self._queues.add(queue)
        if self.mode == DEGRADED:
            return await self._claim_stored(queue, free, now)
        try:
            return await self._claim_delivered(queue, min(free, MAX_READ))
        except DispatchUnavailable as exc:
            self._degrade(exc)
            return await self._claim_stored(queue, free, self.clock.now())

    async def _claim_stored(self, queue: str, free: int, now: datetime) -> ClaimResult:
        """Degraded mode: from the store, unless a queue of higher priority is behind."""
        if not self.gate.may_claim(queue):
            for above in self.gate.behind_above(queue):  # busy, but with nothing more due?
                next_due = await self.store.occurrence_next_due(above, now)
                if next_due is None or next_due > now:
                    self.gate.caught_up(above, self._wake)
            if not self.gate.may_claim(queue):
                return ClaimResult(claims=[])
        result = await self.sql.claim(queue, free, now)
        self.gate.claimed(queue, free, len(result.claims), self._wake)
        return result

    async def idle_seconds(self, queue: str, now: datetime) -> float:
        if self.mode == REDIS:
            return 0.0  # the next read blocks until an entry comes, at most block_ms
        if self.gate.holding(queue):
            return self.probe_seconds  # woken when the queues above have caught up
        return min(await self.sql.idle_seconds(queue, now), self.probe_seconds)

    async def _claim_delivered(self, queue: str, free: int) -> ClaimResult:
        backlog = self._backlog[queue]
        entries, backlog[:] = backlog[:free], backlog[free:]
        if len(entries) < free:
            read = await self.dispatch.entry_read(EntryReadParams(
                queue=queue, consumer=self.worker_id, count=free - len(entries),
                block_ms=0 if entries else self.block_ms))
            if read.groups_created and self.on_lost is not None:
                self.on_lost(queue)
            entries += read.entries
        if not entries:
            return ClaimResult(claims=[])
        by_key: dict[Key, Entry] = {}
        settle: list[Entry] = []
        later: list[Entry] = []
        for entry in entries:
            try:
                key = parse_key(entry.key)
            except ValueError:
                await self._dead_letter(queue, entry, "not an occurrence key")
                continue
            if key in by_key:
                settle.append(entry)  # the same occurrence twice: one claim decides
            elif key in self._entries:
                # An attempt of it still runs here, which the store may have ended (rescued
                # while this worker stalled): this may be its retry. Looked at again soon,
                # once that attempt is settled, rather than dropped.
                later.append(entry)
            else:
                by_key[key] = entry
        now = self.clock.now()  # after the read, which may have blocked
        try:
            result = await self.store.occurrence_claim_keys(OccurrenceClaimKeysParams(
                keys=list(by_key), worker=self.worker_id, now=now,
                lease_seconds=self.lease_seconds))
        except Exception:
            backlog[:0] = list(by_key.values())  # try them again at the next claim
            raise
        await self._settle(queue, by_key, result, now)
        self._ack(queue, settle)
        for entry in later:
            await self._rearm(queue, entry, to_ms(now) + self.recheck_ms)
        return result

    async def _settle(self, queue: str, by_key: dict[Key, Entry], result: KeyClaimResult,
                      now: datetime) -> None:
        """Claimed entries are held until their result is written; the rest are settled now:
        not due -> re-armed at the store's due time; gone, missed, skipped -> acked."""
        for claim in result.claims:
            self._entries[claim.key] = (queue, by_key.pop(claim.key), claim.occurrence.attempt)
        floor = to_ms(now) + self.recheck_ms
        for job_id, scheduled_at, due_at in result.not_due:
            entry = by_key.pop((job_id, scheduled_at))
            again = max(due_ms(due_at), floor)
            log.debug("%s: not claimable yet (due %s; paused, locked or held back): "
                      "delivered again in %d ms", entry.key, due_at.isoformat(),
                      again - to_ms(now))
            await self._rearm(queue, entry, again)
        self._ack(queue, list(by_key.values()))

    async def _rearm(self, queue: str, entry: Entry, at_ms: int) -> None:
        try:
            await self.dispatch.entry_retry(EntryRetryParams(queue=queue, entry=entry,
                                                             due_ms=at_ms))
        except DispatchError as exc:  # still pending: reclaimed later, decided again
            log.warning("could not re-arm %s (%s)", entry.key, exc)

    # -- settling ----------------------------------------------------------------------------

    def _ack(self, queue: str, entries: Sequence[Entry]) -> None:
        if entries:
            self._acks[queue].extend(entries)
            self._ack_wake.set()

    async def _ack_loop(self) -> None:
        while True:
            await self._ack_wake.wait()
            self._ack_wake.clear()
            await self._flush_acks()

    async def _flush_acks(self) -> None:
        acks, self._acks = self._acks, defaultdict(list)
        for queue, entries in acks.items():
            try:
                await self.dispatch.entry_ack(EntryAckParams(queue=queue, entries=entries))
            except DispatchError as exc:
                # Still pending: reclaimed after the idle time, then gone to the store: acked.
                log.warning("could not ack %d entries of %s (%s); they will be reclaimed",
                            len(entries), queue, exc)
                continue
            failpoint("after_ack")

    def settle(self, claim: Claim, completion: Completion,
               applied: bool) -> Coroutine[Any, Any, None] | None:
        """An ack is only queued (the ack loop sends them in batches): done now. A retry is
        armed in Redis: a coroutine."""
        held = self._entries.pop(claim.key, None)
        retry_at = completion.due_at if (
            applied and completion.state is OccurrenceState.RETRYING) else None
        if held is None:  # claimed on the SQL path: Redis has no entry to settle
            if retry_at is None:
                return None
            occ = claim.occurrence
            return self._feed_retry(DueItem(occ.queue, occurrence_key(*claim.key),
                                            due_ms(retry_at), occ.priority))
        queue, entry, _ = held
        if retry_at is None:
            self._ack(queue, [entry])
            return None
        return self._rearm_retry(queue, entry, retry_at)

    async def _feed_retry(self, item: DueItem) -> None:
        await self.feeder.add([item])  # if Redis fails, the reconciler adds it from the store

    async def _rearm_retry(self, queue: str, entry: Entry, retry_at: datetime) -> None:
        try:  # the store holds the retry already: ack and re-arm in one step
            await self.dispatch.entry_retry(EntryRetryParams(queue, entry, due_ms(retry_at)))
        except DispatchError as exc:
            log.warning("could not re-arm the retry of %s in Redis (%s); the entry will be "
                        "reclaimed and re-armed", entry.key, exc)

    async def dropped(self, claim: Claim) -> None:
        """The store ended this attempt while it ran here: its entry is done with (a retry
        the rescuer made is armed anew by it, and by the reconciler)."""
        held = self._entries.get(claim.key)
        if held is not None and held[2] == claim.occurrence.attempt:
            del self._entries[claim.key]
            self._ack(held[0], [held[1]])

    async def after_chained(self, occurrences: Sequence[NewOccurrence]) -> None:
        """Runs that chains triggered go into the due set, as a trigger's do; if Redis fails
        the feeder logs it and the reconciler adds them from the store."""
        await self.feeder.add_waiting(occurrences)

    async def heartbeat(self, claims: Sequence[Claim]) -> None:
        by_queue: dict[str, list[Entry]] = defaultdict(list)
        for claim in claims:
            held = self._entries.get(claim.key)
            if held is not None:
                by_queue[held[0]].append(held[1])
        for queue, entries in by_queue.items():
            try:
                await self.dispatch.entry_touch(EntryTouchParams(
                    queue=queue, consumer=self.worker_id, entries=entries))
            except DispatchError as exc:
                log.warning("could not touch %d running entries of %s (%s)", len(entries),
                            queue, exc)

    async def released(self, claims: Sequence[Claim]) -> None:
        """Given back at a graceful stop: due now again, in the store and in Redis."""
        now_ms = to_ms(self.clock.now())
        for claim in claims:
            held = self._entries.pop(claim.key, None)
            try:
                if held is None:
                    occ = claim.occurrence
                    await self.feeder.add([DueItem(occ.queue, occurrence_key(*claim.key),
                                                   now_ms, occ.priority)])
                else:
                    await self.dispatch.entry_retry(EntryRetryParams(held[0], held[1], now_ms))
            except DispatchError as exc:
                log.warning("could not re-arm released %s (%s); the reconciler will",
                            claim.key[0], exc)

    # -- rescue on the Redis side -----------------------------------------------------------

    async def _reclaim_loop(self) -> None:
        while True:
            await self.clock.sleep(self.heartbeat_seconds)
            if self.mode != REDIS:
                continue
            for queue in sorted(self._queues):
                try:
                    if await self.reclaim_once(queue):
                        self._wake(queue)
                except DispatchUnavailable:
                    break  # the next claim switches to degraded mode
                except Exception:
                    log.exception("reclaiming idle entries of %s failed", queue)

    async def reclaim_once(self, queue: str) -> int:
        """Take over entries idle past the reclaim time; they are claimed at the next
        ``claim`` of the queue, as a fresh read. Returns how many were taken."""
        if self._backlog[queue]:
            return 0
        entries = await self.dispatch.entry_reclaim(EntryReclaimParams(
            queue=queue, consumer=self.worker_id, min_idle_ms=self.reclaim_idle_ms))
        taken = []
        for entry in entries:
            key = _key_of(entry)
            held = None if key is None else self._entries.get(key)
            if held is not None and held[1].id == entry.id:
                continue  # ours and running (a late heartbeat): it stays ours
            if entry.delivery_count > self.max_deliveries:
                await self._dead_letter(queue, entry, f"delivered {entry.delivery_count} "
                                        "times without being settled")
            else:
                taken.append(entry)
        if taken:
            self.reclaimed += len(taken)
            log.warning("reclaimed %d entries of %s idle for %.1fs or more (a worker died "
                        "or hung)", len(taken), queue, self.reclaim_idle_ms / 1000)
            self._backlog[queue].extend(taken)
        return len(taken)

    async def _dead_letter(self, queue: str, entry: Entry, reason: str) -> None:
        if await self.dispatch.entry_dead_letter(EntryDeadLetterParams(queue, entry, reason)):
            self.dead_lettered += 1
            log.warning("dead-lettered entry %s (%s) of %s: %s; its occurrence, if still "
                        "waiting in the store, is re-added by the reconciler", entry.id,
                        entry.key, queue, reason)


def _key_of(entry: Entry) -> Key | None:
    try:
        return parse_key(entry.key)
    except ValueError:
        return None
