"""cancel_and_wait: a task whose cancellation a library call lost is cancelled again."""

from __future__ import annotations

import asyncio

import pytest

from tickwork.tasks import cancel_and_wait


async def _loses_cancellations(lost: int, seen: list[str]) -> None:
    """Goes on after its first ``lost`` cancellations, as a loop around a call that dropped
    them would (Python 3.11's wait_for and timeouts can)."""
    while True:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            if len(seen) > lost:
                raise
            asyncio.current_task().uncancel()  # type: ignore[union-attr]


async def test_a_task_that_lost_its_cancellation_is_cancelled_until_it_ends() -> None:
    seen: list[str] = []
    task = asyncio.create_task(_loses_cancellations(2, seen))
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait(task), 5)
    assert task.cancelled()
    assert seen == ["cancelled"] * 3


async def test_a_single_cancel_was_not_enough_for_that_task() -> None:
    # What the helper replaces: one cancel, then waiting, never ends.
    seen: list[str] = []
    task = asyncio.create_task(_loses_cancellations(1, seen))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.shield(task), 0.3)
    assert not task.done()
    assert seen == ["cancelled"]
    await cancel_and_wait(task)
    assert task.cancelled()


async def test_none_is_skipped_and_exceptions_are_not_raised() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    failed = asyncio.create_task(fails())
    await asyncio.sleep(0)
    done = asyncio.create_task(asyncio.sleep(0))
    await done
    await cancel_and_wait(None, failed, done)
    assert isinstance(failed.exception(), ValueError)
    await cancel_and_wait()


async def test_within_gives_up_on_a_task_that_never_ends_and_returns_it() -> None:
    cancels: list[int] = []
    done = asyncio.Event()

    async def stubborn_loop() -> None:  # catches every cancellation until told to end
        while not done.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                cancels.append(1)

    stubborn = asyncio.create_task(stubborn_loop())
    ends = asyncio.create_task(asyncio.Event().wait())
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    began = loop.time()
    left = await cancel_and_wait(stubborn, ends, within=0.35)
    assert left == [stubborn]
    assert 0.35 <= loop.time() - began < 2
    assert ends.cancelled()
    assert len(cancels) >= 3  # cancelled again while it was waited for
    assert await cancel_and_wait(ends, within=0.35) == []
    done.set()
    await asyncio.wait_for(stubborn, 2)
