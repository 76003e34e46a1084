"""The injected clock's deadlines: a FakeClock's expire when the test moves time, not before."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tickwork.clock import FakeClock, SystemClock, delta


async def test_a_fake_deadline_expires_only_when_the_clock_passes_it() -> None:
    clock = FakeClock()
    entered = asyncio.Event()

    async def job() -> str:
        deadline = clock.timeout(10)
        try:
            async with deadline:
                entered.set()
                await asyncio.Event().wait()  # never set: only the deadline ends it
        except TimeoutError:
            return f"expired={deadline.expired()}"
        return "finished"

    task = asyncio.create_task(job())
    await entered.wait()
    clock.advance(9.9)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(0.1)
    assert await task == "expired=True"
    assert clock.sleepers == 0


async def test_a_block_that_ends_in_time_leaves_no_alarm_behind() -> None:
    clock = FakeClock()
    deadline = clock.timeout(5)
    async with deadline:
        await asyncio.sleep(0)
    clock.advance(10)  # the alarm was cancelled on exit: nothing to ring
    await asyncio.sleep(0)
    assert not deadline.expired()
    assert clock.sleepers == 0


@pytest.mark.parametrize("clock", [FakeClock(), SystemClock()], ids=["fake", "system"])
async def test_a_timeout_error_of_the_block_itself_is_not_an_expiry(clock: object) -> None:
    deadline = clock.timeout(60)  # type: ignore[attr-defined]
    with pytest.raises(TimeoutError):
        async with deadline:
            raise TimeoutError("the job's own")
    assert not deadline.expired()


async def test_the_system_deadline_cancels_on_the_loops_clock() -> None:
    deadline = SystemClock().timeout(0.01)
    with pytest.raises(TimeoutError):
        async with deadline:
            await asyncio.Event().wait()
    assert deadline.expired()


def test_a_delta_is_made_once_per_number_of_seconds() -> None:
    assert delta(1.5) == timedelta(seconds=1.5)
    assert delta(0.000_001) == timedelta(microseconds=1)
    assert delta(30) is delta(30)  # the worker adds the same few to now, run after run
    assert delta(31) != delta(30)
