"""The timeouts of a worker's runs on one alarm, not a timer each.

``asyncio.timeout`` per run puts a timer handle in the loop's heap and cancels it when the run
ends, which leaves it there until the loop sweeps it: about 5 % of a worker's instructions per
execution of a no-op job. Here the runs that share a timeout keep their deadlines in the order
they started, in an insertion-ordered dict (the first in is the first due), and a single alarm
on the injected clock rings at the earliest deadline; a run that ends takes its entry out in
constant time, and the alarm, when it rings early for a run gone, is set again for the next
(a run due later than the alarm sets nothing: per timeout, one alarm at most rings).

Expiry is ``asyncio.timeout``'s: the run's task is cancelled, and leaving the block turns that
cancellation, and only that one, into TimeoutError (a cancellation from elsewhere, such as a
lost lease, stays a cancellation); ``expired()`` tells it apart from a TimeoutError of the
job's own.
"""

from __future__ import annotations

import asyncio
import math
from collections import OrderedDict
from types import TracebackType

from tickwork.clock import Alarm, Clock


class Deadlines:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._by_timeout: dict[float, OrderedDict[RunDeadline, None]] = {}
        self._alarm: Alarm | None = None
        self._alarm_at = math.inf

    def __len__(self) -> int:
        return sum(len(runs) for runs in self._by_timeout.values())

    def start(self, seconds: float) -> RunDeadline:
        """A deadline ``seconds`` from now, for ``with`` around the current task's run."""
        return RunDeadline(self, seconds)

    def _add(self, deadline: RunDeadline) -> None:
        runs = self._by_timeout.get(deadline.seconds)
        if runs is None:
            runs = self._by_timeout[deadline.seconds] = OrderedDict()
        runs[deadline] = None
        if deadline.at < self._alarm_at:  # never for a run behind others of its timeout
            self._set_alarm(deadline.at)

    def _remove(self, deadline: RunDeadline) -> None:
        # The alarm stays set when no run is left: runs that never wait (a no-op job) enter
        # and leave one after another, and setting it again for each costs what a timer each
        # did. Ringing for nothing, it is not set again until a run starts.
        runs = self._by_timeout[deadline.seconds]
        del runs[deadline]
        if not runs:
            del self._by_timeout[deadline.seconds]

    def _set_alarm(self, at: float) -> None:
        if self._alarm is not None:
            self._alarm.cancel()
        self._alarm_at = at
        self._alarm = self._clock.call_later(at - self._clock.monotonic(), self._ring)

    def _ring(self) -> None:
        self._alarm, self._alarm_at = None, math.inf
        now = self._clock.monotonic()
        earliest = math.inf
        for seconds, runs in list(self._by_timeout.items()):
            while runs:
                first = next(iter(runs))
                if first.at > now:
                    earliest = min(earliest, first.at)
                    break
                runs.popitem(last=False)
                first.expire()
            if not runs:
                del self._by_timeout[seconds]
        if earliest < math.inf:
            self._set_alarm(earliest)


class RunDeadline:
    __slots__ = ("_cancelling", "_expired", "_owner", "_task", "at", "seconds")

    def __init__(self, owner: Deadlines, seconds: float) -> None:
        self._owner = owner
        self.seconds = seconds if seconds > 0.0 else 0.0
        self.at = owner._clock.monotonic() + self.seconds
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._expired = False

    def __enter__(self) -> RunDeadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a run's deadline is entered inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._owner._add(self)
        return self

    def expire(self) -> None:
        self._expired = True
        if self._task is not None:
            self._task.cancel()

    def __exit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                 exc_tb: TracebackType | None) -> None:
        if not self._expired:
            self._owner._remove(self)
            return
        assert self._task is not None
        # Our cancel is taken back whatever the block did with it (it may have swallowed it).
        if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc_val

    def expired(self) -> bool:
        return self._expired
