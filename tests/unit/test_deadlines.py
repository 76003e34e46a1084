"""The worker's run deadlines on one alarm (worker/deadlines.py): each run expires at its own
time on the injected clock, with asyncio.timeout's semantics."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tickwork.clock import FakeClock, SystemClock
from tickwork.worker.deadlines import Deadlines


async def _run(deadlines: Deadlines, seconds: float, entered: asyncio.Event,
               body: asyncio.Event | None = None) -> str:
    deadline = deadlines.start(seconds)
    try:
        with deadline:
            entered.set()
            await (body or asyncio.Event()).wait()
    except TimeoutError:
        return f"timed out, expired={deadline.expired()}"
    return f"finished, expired={deadline.expired()}"


async def _started(deadlines: Deadlines, seconds: float,
                   body: asyncio.Event | None = None) -> asyncio.Task[str]:
    entered = asyncio.Event()
    task = asyncio.create_task(_run(deadlines, seconds, entered, body))
    await entered.wait()
    return task


async def test_each_run_expires_at_its_own_time_on_one_alarm() -> None:
    clock = FakeClock()
    deadlines = Deadlines(clock)
    long_ = await _started(deadlines, 10)
    clock.advance(1)
    short = await _started(deadlines, 5)  # started later, due earlier: the alarm moves
    same = await _started(deadlines, 10)  # due at 11, after the first 10 s run
    assert clock.alarms == 1
    clock.advance(4.9)
    await asyncio.sleep(0)
    assert not short.done()
    clock.advance(0.1)  # t = 6
    assert await short == "timed out, expired=True"
    assert not long_.done()
    assert not same.done()
    clock.advance(4)  # t = 10
    assert await long_ == "timed out, expired=True"
    await asyncio.sleep(0)
    assert not same.done()
    clock.advance(1)  # t = 11
    assert await same == "timed out, expired=True"
    assert len(deadlines) == 0
    assert clock.alarms == 0


async def test_runs_that_end_in_time_never_expire_and_set_one_alarm_between_them() -> None:
    clock = FakeClock()
    deadlines = Deadlines(clock)
    for _ in range(3):  # one after another, as runs that never wait go
        done = asyncio.Event()
        task = await _started(deadlines, 5, done)
        done.set()
        assert await task == "finished, expired=False"
    assert len(deadlines) == 0
    assert clock.alarms == 1  # set by the first, kept for the others
    clock.advance(5)  # it rings for nothing and is not set again
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert clock.alarms == 0
    later = await _started(deadlines, 5)
    clock.advance(5)
    assert await later == "timed out, expired=True"


async def test_the_alarm_rings_for_the_next_run_when_the_first_has_ended() -> None:
    clock = FakeClock()
    deadlines = Deadlines(clock)
    first_done = asyncio.Event()
    first = await _started(deadlines, 5, first_done)
    clock.advance(2)
    second = await _started(deadlines, 5)  # due at 7
    first_done.set()
    assert await first == "finished, expired=False"
    clock.advance(3)  # t = 5: the alarm set for the first rings, and is set again for 7
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not second.done()
    clock.advance(2)
    assert await second == "timed out, expired=True"


async def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    clock = FakeClock()
    task = await _started(Deadlines(clock), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_run_that_swallows_the_expiry_is_still_expired_and_not_left_cancelling(
        ) -> None:
    clock = FakeClock()
    deadlines = Deadlines(clock)
    entered = asyncio.Event()

    async def stubborn() -> tuple[bool, int]:
        deadline = deadlines.start(5)
        with deadline:
            entered.set()
            with contextlib.suppress(asyncio.CancelledError):  # swallowed: it returns anyway
                await asyncio.Event().wait()
        task = asyncio.current_task()
        assert task is not None
        return deadline.expired(), task.cancelling()

    task = asyncio.create_task(stubborn())
    await entered.wait()
    clock.advance(5)
    assert await task == (True, 0)


@pytest.mark.parametrize("clock", [FakeClock(), SystemClock()], ids=["fake", "system"])
async def test_a_timeout_error_of_the_run_itself_is_not_an_expiry(clock: object) -> None:
    deadline = Deadlines(clock).start(60)  # type: ignore[arg-type]
    with pytest.raises(TimeoutError, match="the job's own"), deadline:
        raise TimeoutError("the job's own")
    assert not deadline.expired()


async def test_the_system_clock_expires_runs_on_the_loops_clock() -> None:
    deadlines = Deadlines(SystemClock())
    task = await _started(deadlines, 0.01)
    assert await task == "timed out, expired=True"
    zero = await _started(deadlines, 0)
    assert await zero == "timed out, expired=True"
