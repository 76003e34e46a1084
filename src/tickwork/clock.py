"""The one clock that decides due-ness, injectable so tests control time.

Code reads ``clock.now()`` once per loop and passes ``now`` down.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Protocol


@functools.lru_cache(maxsize=256)
def delta(seconds: float) -> timedelta:
    """``timedelta(seconds=seconds)``, made once per value: a run's deadline and lease are a
    job's few timeouts added to now, and the keyword constructor costs about 3,300 instructions
    a call (two per execution on the worker's path)."""
    return timedelta(seconds=seconds)


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

    def timeout(self, seconds: float) -> Deadline:
        """``async with clock.timeout(s):`` cancels the block after ``s`` on this clock and
        raises TimeoutError; ``expired()`` tells that apart from a TimeoutError of its own."""
        ...

    def call_later(self, seconds: float, callback: Callable[[], object]) -> Alarm:
        """Call ``callback`` on the running loop once ``seconds`` pass on this clock, unless
        the alarm is cancelled first."""
        ...


class Alarm(Protocol):
    def cancel(self) -> object: ...


class Deadline(Protocol):
    async def __aenter__(self) -> object: ...

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc_val: BaseException | None, exc_tb: TracebackType | None) -> None: ...

    def expired(self) -> bool: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def timeout(self, seconds: float) -> Deadline:
        return asyncio.timeout(max(0.0, seconds))  # no task of its own: cheap per execution

    def call_later(self, seconds: float, callback: Callable[[], object]) -> Alarm:
        return asyncio.get_running_loop().call_later(max(0.0, seconds), callback)


class FakeClock:
    """A clock that moves only when told to; ``advance`` wakes every sleeper whose time came."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2030, 1, 1, tzinfo=UTC)
        self._mono = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._alarms: set[asyncio.Future[None]] = set()

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        await self._wake_at(seconds)

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
        step = (when - self._now).total_seconds()
        if step < 0:
            raise ValueError("a FakeClock never goes back")
        self.advance(step)

    def timeout(self, seconds: float) -> Deadline:
        return _FakeDeadline(self, seconds)

    def call_later(self, seconds: float, callback: Callable[[], object]) -> Alarm:
        if seconds <= 0:  # due now: rings without the clock moving, as a sleep(0) returns
            return asyncio.get_running_loop().call_soon(callback)
        alarm = self._wake_at(seconds)
        alarm.add_done_callback(lambda f: None if f.cancelled() else callback())
        self._alarms.add(alarm)
        alarm.add_done_callback(self._alarms.discard)
        return alarm

    def _wake_at(self, seconds: float) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), future))
        return future

    @property
    def sleepers(self) -> int:
        """What waits on this clock: sleeps and deadlines, not ``call_later`` alarms."""
        return sum(1 for _, _, f in self._sleepers if not f.done() and f not in self._alarms)

    @property
    def alarms(self) -> int:
        """``call_later`` alarms set and not rung or cancelled yet."""
        return len(self._alarms)


class _FakeDeadline:
    """``asyncio.timeout`` expiring when a FakeClock, not the loop's clock, reaches it."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        self._clock = clock
        self._seconds = seconds
        self._timeout = asyncio.timeout(None)
        self._alarm: asyncio.Future[None] | None = None

    async def __aenter__(self) -> _FakeDeadline:
        await self._timeout.__aenter__()
        if self._seconds <= 0:
            self._timeout.reschedule(asyncio.get_running_loop().time())
            return self
        self._alarm = self._clock._wake_at(self._seconds)
        self._alarm.add_done_callback(self._ring)
        return self

    def _ring(self, alarm: asyncio.Future[None]) -> None:
        if not alarm.cancelled() and self._alarm is alarm:  # still inside the block
            self._timeout.reschedule(asyncio.get_running_loop().time())

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc_val: BaseException | None, exc_tb: TracebackType | None) -> None:
        alarm, self._alarm = self._alarm, None
        if alarm is not None:
            alarm.cancel()
        await self._timeout.__aexit__(exc_type, exc_val, exc_tb)

    def expired(self) -> bool:
        return self._timeout.expired()


async def wait_event(clock: Clock, event: asyncio.Event, seconds: float) -> None:
    """Until ``event`` is set or ``seconds`` pass on ``clock``, whichever comes first."""
    if event.is_set():
        return
    waiter = asyncio.ensure_future(event.wait())
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait([waiter, sleeper], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        sleeper.cancel()
