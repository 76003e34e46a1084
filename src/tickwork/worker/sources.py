"""Where a worker pool's claims come from: the ``ClaimSource`` seam, and the SQL one.

A pool asks its source for up to ``free`` claims of a queue (claim before execute: the store
has written state, attempt + 1 and a lease before anything runs), reports each fenced
completion back, and lets it touch what it holds at each heartbeat. ``SqlClaimSource`` claims
straight from the store (``occurrence_claim``: the embedded and postgres deployments, and the
Redis deployment's degraded mode); ``worker/redis_source.py`` claims what Redis delivers.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any, Protocol

from tickwork.clock import Clock
from tickwork.drivers.base import (
    ClaimResult,
    Completion,
    NewOccurrence,
    OccurrenceClaimParams,
    Store,
)
from tickwork.models import Claim


class ClaimSource(Protocol):
    """``claim`` returns a ``ClaimResult`` rather than a bare list, so the pool still learns
    about running attempts a ``cancel_previous`` claim ended and about marked occurrences."""

    def start(self, wake: Callable[[str], None]) -> None:
        """``wake(queue)``: the source has work for the queue outside a ``claim`` call."""
        ...

    async def stop(self) -> None: ...

    async def claim(self, queue: str, free: int, now: datetime) -> ClaimResult: ...

    async def idle_seconds(self, queue: str, now: datetime) -> float:
        """How long the pool may sleep before claiming again, when the last claim left slots
        free (a wake-up or a freed slot ends the sleep sooner)."""
        ...

    def settle(self, claim: Claim, completion: Completion,
               applied: bool) -> Coroutine[Any, Any, None] | None:
        """The store has the result (or fenced it off): settle the delivery, if any. The
        completer calls it for each run it wrote: what needs no wait is done now; what does
        (a call to Redis) comes back as a coroutine to run."""
        ...

    async def dropped(self, claim: Claim) -> None:
        """The store ended this attempt while it ran (cancelled, rescued, its job deleted):
        no result comes; settle its delivery, if any."""
        ...

    async def after_chained(self, occurrences: Sequence[NewOccurrence]) -> None:
        """Runs that chains of completed runs created, committed: make them claimable."""
        ...

    async def heartbeat(self, claims: Sequence[Claim]) -> None:
        """After the store heartbeat: keep the deliveries of these running claims alive."""
        ...

    async def released(self, claims: Sequence[Claim]) -> None:
        """The store took these back unfinished (graceful stop): they wait again, due now."""
        ...


class SqlClaimSource:
    """Claims due occurrences of a queue from the store, ``FOR UPDATE SKIP LOCKED`` on
    PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite. Sleeps until the next due time, at most
    ``poll_interval_seconds`` (a NOTIFY or a trigger wakes the pool sooner)."""

    def __init__(self, *, store: Store, clock: Clock, worker_id: str,
                 lease_seconds: float = 30.0, poll_interval_seconds: float = 1.0) -> None:
        self.store = store
        self.clock = clock
        self.worker_id = worker_id
        self.lease_seconds = lease_seconds
        self.poll_interval_seconds = poll_interval_seconds
        # Per queue: when the limits that held runs back at the last claim may let one start.
        self._recheck: dict[str, datetime] = {}

    def start(self, wake: Callable[[str], None]) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def claim(self, queue: str, free: int, now: datetime) -> ClaimResult:
        result = await self.store.occurrence_claim(OccurrenceClaimParams(
            queue=queue, worker=self.worker_id, limit=free, now=now,
            lease_seconds=self.lease_seconds))
        if result.recheck_at is not None:
            self._recheck[queue] = result.recheck_at
        else:
            self._recheck.pop(queue, None)
        return result

    async def idle_seconds(self, queue: str, now: datetime) -> float:
        timeout = self.poll_interval_seconds
        recheck = self._recheck.get(queue)
        if recheck is not None:  # a limit held due runs: look again when it may let one go
            return min(timeout, max(0.0, (recheck - self.clock.now()).total_seconds()))
        next_due = await self.store.occurrence_next_due(queue, now)
        if next_due is not None:
            wait = (next_due - self.clock.now()).total_seconds()
            # Due already but not claimed (a race with another claimer): look again soon,
            # without spinning.
            timeout = min(timeout, wait if wait > 0 else 0.05)
        return timeout

    def settle(self, claim: Claim, completion: Completion,
               applied: bool) -> Coroutine[Any, Any, None] | None:
        return None  # the store's row was the whole delivery

    async def dropped(self, claim: Claim) -> None:
        pass

    async def after_chained(self, occurrences: Sequence[NewOccurrence]) -> None:
        pass  # the store has them: a claim finds them (PostgreSQL NOTIFYs the queues)

    async def heartbeat(self, claims: Sequence[Claim]) -> None:
        pass

    async def released(self, claims: Sequence[Claim]) -> None:
        pass
