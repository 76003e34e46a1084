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
from tickwork.scheduler.backlog import DEFAULT_SECONDS, BacklogSize
from tickwork.scheduler.loop import Loop

log = logging.getLogger("tickwork.promoter")


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
        backlog: int | None = None,
        backlog_seconds: float = DEFAULT_SECONDS,
        held_interval_seconds: float = 0.005,
        max_interval_seconds: float = 0.5,
        min_interval_seconds: float = 0.001,
        unavailable_backoff_seconds: float = 1.0,
        on_promoted: Callable[[str, int], None] | None = None,
        on_backlog: Callable[[str, int], None] | None = None,
    ) -> None:
        """``queues``: the queues to promote, or a function giving them at each pass.
        ``batches_per_queue``: the most batches one pass moves per queue before the next
        queue's turn, so a burst in one queue does not hold up another.
        ``backlog``: the most entries a queue's streams hold that no worker got yet (0: no
        bound); by default (None) each queue's bound is what its workers read in
        ``backlog_seconds`` (``BacklogSize``). A queue at its bound is looked at again
        ``held_interval_seconds`` later. ``on_backlog``: told each queue's bound when it is
        first sized and whenever it changes (a metric)."""
        if backlog is not None and backlog < 0:
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
        self.backlog_seconds = backlog_seconds
        self._sizes: dict[str, BacklogSize] = {}
        BacklogSize(seconds=backlog_seconds)  # validates the setting now, not at a pass
        self.held_interval_seconds = held_interval_seconds
        self.max_interval_seconds = max_interval_seconds
        self.min_interval_seconds = min_interval_seconds
        self.unavailable_backoff_seconds = unavailable_backoff_seconds
        self.on_promoted = on_promoted
        self.on_backlog = on_backlog
        self._unavailable = False

    def queues(self) -> list[str]:
        return list(self._queues() if callable(self._queues) else self._queues)

    async def run_once(self, now: datetime | None = None) -> PromotePass:
        """One pass over every queue. ``now`` is unused: due-ness is Redis' clock."""
        moved, more = 0, False
        next_in: list[int] = []
        for queue in self.queues():
            size = self._size(queue)
            for _ in range(self.batches_per_queue):
                backlog = size.size if size is not None else self.backlog or 0
                step = await self.dispatch.due_promote(
                    DuePromoteParams(queue, self.batch_size, backlog))
                moved += step.moved
                if step.moved and self.on_promoted is not None:
                    self.on_promoted(queue, step.moved)
                held = step.moved < self.batch_size and (
                    step.held or bool(backlog and step.next_in_ms == 0))
                if (size is not None and size.observe(step.moved, held, self.clock.monotonic())
                        and self.on_backlog is not None):
                    self.on_backlog(queue, size.size)
                if step.moved < self.batch_size:
                    if held:
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

    def _size(self, queue: str) -> BacklogSize | None:
        if self.backlog is not None:
            return None
        size = self._sizes.get(queue)
        if size is None:
            size = self._sizes[queue] = BacklogSize(seconds=self.backlog_seconds)
            if self.on_backlog is not None:
                self.on_backlog(queue, size.size)
        return size

    def backlog_of(self, queue: str) -> int:
        """The bound a queue's next pass uses (0: none)."""
        size = self._size(queue)
        return (self.backlog or 0) if size is None else size.size

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
