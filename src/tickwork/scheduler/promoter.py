"""The promoter: moves due keys from each queue's due set to its streams, in bounded batches.

Any number of promoters run at once, with no lock: each batch is one atomic Lua call that
decides due-ness on Redis' clock (DESIGN rules 3 and 6). Between passes it sleeps until the
next key is due, as the script reported it (a difference on Redis' clock, so local clock skew
does not matter), never longer than ``max_interval_seconds`` (keys added by other processes
are found within that bound) and at once when ``wake()`` is called (a local planner's
``on_planned`` or a trigger).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from tickwork.clock import Clock
from tickwork.drivers.dispatch import MAX_PROMOTE, Dispatch, DuePromoteParams
from tickwork.errors import DispatchUnavailable
from tickwork.scheduler.loop import Loop

log = logging.getLogger("tickwork.promoter")

# Entries a queue's streams may hold that no worker got yet: a burst waits in the due set
# beyond it, so work due later is delivered behind at most this many (about 50 ms of a
# two-core deployment's drain). 1,000 kept the p99 of W1's steady stream at 0.23-0.31 s, 500
# at 0.13-0.19 s, and the burst's drain the same, with workers of 64 slots. With the default
# of 256 it is less than two workers' claims: 2,000 drained a burst 5-8 % faster through
# Redis but doubled that p99 (0.34-0.37 s against 0.14-0.20 s), so it stays 500
# (docs/benchmarks.md, fifth session).
DEFAULT_BACKLOG = 500


@dataclass(frozen=True, slots=True)
class PromotePass:
    moved: int
    more: bool  # a queue still had a full batch due: go again at once
    sleep_seconds: float  # until the next key is due, within the bounds


class Promoter(Loop):
    name = "promoter"

    def __init__(
        self,
        *,
        dispatch: Dispatch,
        clock: Clock,
        queues: Sequence[str] | Callable[[], Iterable[str]],
        batch_size: int = MAX_PROMOTE,
        batches_per_queue: int = 10,
        backlog: int = DEFAULT_BACKLOG,
        held_interval_seconds: float = 0.005,
        max_interval_seconds: float = 0.5,
        min_interval_seconds: float = 0.001,
        unavailable_backoff_seconds: float = 1.0,
        on_promoted: Callable[[str, int], None] | None = None,
    ) -> None:
        """``queues``: the queues to promote, or a function giving them at each pass.
        ``batches_per_queue``: the most batches one pass moves per queue before the next
        queue's turn, so a burst in one queue does not hold up another.
        ``backlog``: the most entries a queue's streams hold that no worker got yet (0: no
        bound); a queue at its bound is looked at again ``held_interval_seconds`` later."""
        if backlog < 0:
            raise ValueError(f"backlog ({backlog}) must be 0 (no bound) or more")
        if not 0 < batch_size <= MAX_PROMOTE:
            raise ValueError(f"batch_size ({batch_size}) must be in 1..{MAX_PROMOTE}")
        if batches_per_queue < 1:
            raise ValueError(f"batches_per_queue ({batches_per_queue}) must be at least 1")
        if not 0 < min_interval_seconds <= max_interval_seconds:
            raise ValueError(f"min_interval_seconds ({min_interval_seconds}) must be positive "
                             f"and at most max_interval_seconds ({max_interval_seconds})")
        super().__init__(clock=clock, interval_seconds=max_interval_seconds)
        self.dispatch = dispatch
        self._queues = queues
        self.batch_size = batch_size
        self.batches_per_queue = batches_per_queue
        self.backlog = backlog
        self.held_interval_seconds = held_interval_seconds
        self.max_interval_seconds = max_interval_seconds
        self.min_interval_seconds = min_interval_seconds
        self.unavailable_backoff_seconds = unavailable_backoff_seconds
        self.on_promoted = on_promoted
        self._unavailable = False

    def queues(self) -> list[str]:
        return list(self._queues() if callable(self._queues) else self._queues)

    async def run_once(self, now: datetime | None = None) -> PromotePass:
        """One pass over every queue. ``now`` is unused: due-ness is Redis' clock."""
        moved, more = 0, False
        next_in: list[int] = []
        for queue in self.queues():
            for _ in range(self.batches_per_queue):
                step = await self.dispatch.due_promote(
                    DuePromoteParams(queue, self.batch_size, self.backlog))
                moved += step.moved
                if step.moved and self.on_promoted is not None:
                    self.on_promoted(queue, step.moved)
                if step.moved < self.batch_size:
                    if step.held or (self.backlog and step.next_in_ms == 0):
                        # The streams hold a backlog: room comes as workers read it.
                        next_in.append(round(self.held_interval_seconds * 1000))
                    elif step.next_in_ms is not None:
                        next_in.append(step.next_in_ms)
                    break
            else:
                more = True
        sleep = self.max_interval_seconds
        if next_in:
            sleep = min(sleep, max(self.min_interval_seconds, min(next_in) / 1000))
        return PromotePass(moved=moved, more=more, sleep_seconds=0.0 if more else sleep)

    async def tick(self, now: datetime) -> bool:
        return (await self.run_once(now)).more

    async def step(self, now: datetime) -> float:
        """A pass; then sleep until the next key is due (Loop's fixed interval does not fit),
        at most ``max_interval_seconds``; ``wake()`` promotes at once."""
        result = await self.run_once(now)
        if self._unavailable:
            log.warning("Redis is reachable again; promoting")
            self._unavailable = False
        return result.sleep_seconds

    def failed(self, exc: Exception) -> float:
        if not isinstance(exc, DispatchUnavailable):
            return super().failed(exc)
        if not self._unavailable:
            log.warning("cannot promote, Redis unavailable (%s); retrying every %gs",
                        exc, self.unavailable_backoff_seconds)
        self._unavailable = True
        return self.unavailable_backoff_seconds
