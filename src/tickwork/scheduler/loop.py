"""What every background loop shares: start, stop, and a loop that logs errors and never dies."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from tickwork.clock import Clock, wait_event
from tickwork.errors import reported_outage
from tickwork.tasks import cancel_and_wait


class Loop:
    """Calls ``tick(now)`` every ``interval_seconds`` on the injected clock; at once again
    when ``tick`` says more work is waiting, or when ``wake()`` is called. A loop whose pause
    depends on what a pass found overrides ``step``; one that reports errors its own way,
    ``failed``."""

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
            await cancel_and_wait(self._task)  # cancelled until it has ended (tickwork.tasks)
            self._task = None

    async def step(self, now: datetime) -> float:
        """One pass; returns the seconds to wait before the next (0: at once). By default,
        ``tick``'s answer: at once when more work is waiting, else the interval."""
        return 0.0 if await self.tick(now) else self.interval_seconds

    def failed(self, exc: Exception) -> float:
        """A pass raised ``exc``: log it (an outage the store logged already is not logged
        again) and return the seconds to wait before the next try."""
        if not reported_outage(exc):
            self._log.exception("%s pass failed; retrying in %gs", self.name,
                                self.interval_seconds)
        return self.interval_seconds

    async def _loop(self) -> None:
        while True:
            try:
                pause = await self.step(self.clock.now())
            except Exception as exc:
                pause = self.failed(exc)
            if pause > 0:
                await self._pause(pause)
            else:
                await asyncio.sleep(0)  # more is waiting: go on, but let others run

    async def _pause(self, seconds: float) -> None:
        """Until ``seconds`` have passed on the injected clock, or ``wake()``."""
        await wait_event(self.clock, self._wake, seconds)
        self._wake.clear()
