"""The one clock that decides due-ness, injectable so tests control time.

Code reads ``clock.now()`` once per loop and passes ``now`` down.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; only differences mean anything."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait this long on this clock."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that moves only when told to; ``advance`` wakes every sleeper whose time came."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2030, 1, 1, tzinfo=UTC)
        self._mono = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), future))
        await future

    def advance(self, seconds: float) -> None:
        """Move time forward and wake the sleepers that are now due."""
        self._now += timedelta(seconds=seconds)
        self._mono += seconds
        while self._sleepers and self._sleepers[0][0] <= self._mono:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def set(self, when: datetime) -> None:
        """Jump to an instant at or after the current one."""
        delta = (when - self._now).total_seconds()
        if delta < 0:
            raise ValueError("a FakeClock never goes back")
        self.advance(delta)

    @property
    def sleepers(self) -> int:
        return sum(1 for _, _, f in self._sleepers if not f.done())
