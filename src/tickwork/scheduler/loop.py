"""What every background loop shares: start, stop, and a loop that logs errors and never dies."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from tickwork.clock import Clock, wait_event
from tickwork.errors import reported_outage

STOP_RECHECK_SECONDS = 0.1


class Loop:
    """Calls ``tick(now)`` every ``interval_seconds`` on the injected clock; at once again
    when ``tick`` says more work is waiting, or when ``wake()`` is called."""

    name = "loop"

    def __init__(self, *, clock: Clock, interval_seconds: float) -> None:
        self.clock = clock
        self.interval_seconds = interval_seconds
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._log = logging.getLogger(f"tickwork.{self.name}")

    async def tick(self, now: datetime) -> bool:
        """One bounded pass; returns whether more work is waiting."""
        raise NotImplementedError

    def wake(self) -> None:
        """Run the next pass now rather than at the end of the interval."""
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"tickwork-{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            # Cancel until it has ended: on Python 3.11, asyncio.wait_for (redis-py wraps each
            # send in one) drops a cancellation that arrives just as its inner call completes,
            # and the loop would go on forever.
            while not self._task.done():
                self._task.cancel()
                await asyncio.wait([self._task], timeout=STOP_RECHECK_SECONDS)
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _loop(self) -> None:
        while True:
            more = False
            try:
                more = await self.tick(self.clock.now())
            except Exception as exc:
                if not reported_outage(exc):  # an outage is logged once, by the store
                    self._log.exception("%s pass failed; retrying in %gs", self.name,
                                        self.interval_seconds)
            if not more:
                await self._pause()

    async def _pause(self) -> None:
        """Until the interval has passed on the injected clock, or ``wake()``."""
        await wait_event(self.clock, self._wake, self.interval_seconds)
        self._wake.clear()
