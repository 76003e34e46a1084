"""Completions written in batches: whatever finished while the last write ran goes in the next.

One store round trip serves many attempts under load, and still one per attempt when idle.
A run hands its completion over with what to do once it is written (``hand_over``) and ends:
no future and no wake-up of its task per run; ``submit`` waits for the answer instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TypeAlias

from tickwork.clock import Clock
from tickwork.drivers.base import Completion, NewOccurrence, OccurrenceCompleteParams, Store
from tickwork.errors import reported_outage
from tickwork.tasks import cancel_and_wait
from tickwork.worker.failpoints import failpoint

log = logging.getLogger("tickwork.completer")

# What waits for a completion's answer: a waiting caller's future, or a run's callback.
Written: TypeAlias = asyncio.Future[bool] | Callable[[bool], None]


class Completer:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        batch_size: int = 500,
        on_written: Callable[[Completion, bool], None] | None = None,
        on_chained: Callable[[list[NewOccurrence]], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.batch_size = batch_size
        self.on_written = on_written
        self.on_chained = on_chained  # the runs the written completions' chains created
        # A deque and an event, not an asyncio.Queue: a put is an append, and the event is
        # set only when the loop waits for work (a Queue wakes a getter per put).
        self._queue: deque[tuple[Completion, Written]] = deque()
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()  # nothing queued and nothing being written
        self._idle.set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="tickwork-completer")

    async def submit(self, completion: Completion) -> bool:
        """Queue one completion; resolves to whether the store applied it (the fence held)."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._put((completion, future))
        return await future

    def hand_over(self, completion: Completion, then: Callable[[bool], None]) -> None:
        """Queue one completion; ``then(applied)`` is called once the store has answered, in
        the completer's task (it must not raise)."""
        self._put((completion, then))

    def _put(self, item: tuple[Completion, Written]) -> None:
        if not self._queue:
            self._ready.set()
            self._idle.clear()
        self._queue.append(item)

    async def stop(self) -> None:
        """Write what is queued, then stop."""
        if self._task is None:
            return
        await self._idle.wait()
        await cancel_and_wait(self._task)
        self._task = None

    async def _loop(self) -> None:
        queue = self._queue
        while True:
            if not queue:
                self._ready.clear()
                self._idle.set()
                await self._ready.wait()
            batch = [queue.popleft() for _ in range(min(len(queue), self.batch_size))]
            try:
                await self._write(batch)
            except Exception:  # a bug after the write: logged, and the loop goes on
                log.exception("after writing %d completions", len(batch))

    async def _write(self, batch: list[tuple[Completion, Written]]) -> None:
        completions = [c for c, _ in batch]
        delay = 0.1
        while True:
            params = OccurrenceCompleteParams(completions=completions, now=self.clock.now())
            try:
                applied = await self.store.occurrence_complete(params)
                break
            except Exception as exc:  # the store is down: keep the results and try again
                outage = reported_outage(exc)  # an outage is logged once, by the store
                if not outage:
                    log.exception("writing %d completions failed; retrying in %.1fs",
                                  len(completions), delay)
                await self.clock.sleep(delay)
                # Through an outage, at most a second apart: the attempts' leases run out
                # meanwhile, and a result written late once the store is back loses to the
                # rescuer (a rerun).
                delay = min(delay * 2, 1.0 if outage else 5.0)
        failpoint("after_commit")  # fault tests: die with the batch committed, nothing acked
        if params.chained and self.on_chained is not None:
            try:  # committed already: a failure here (Redis down) is the reconciler's to mend
                await self.on_chained(params.chained)
            except Exception:
                log.exception("announcing %d chained runs failed; they are in the store",
                              len(params.chained))
        for (completion, then), ok in zip(batch, applied, strict=True):
            if not ok:
                log.warning("result of %s @ %s attempt %d rejected: the attempt no longer holds "
                            "its lease (rescued, cancelled or finished elsewhere)",
                            completion.job_id, completion.scheduled_at.isoformat(),
                            completion.attempt)
            if self.on_written is not None:
                self.on_written(completion, ok)
            if isinstance(then, asyncio.Future):
                if not then.done():
                    then.set_result(ok)
                continue
            try:
                then(ok)
            except Exception:  # the next ones are still told
                log.exception("after writing the result of %s", completion.job_id)
