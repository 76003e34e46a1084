"""The promoter against a real Redis: bounded batches, fair queues, sleeps until the next due."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

import pytest

from tickwork.clock import FakeClock
from tickwork.drivers.dispatch import Dispatch, QueueStatsParams
from tickwork.drivers.redis import RedisDispatch
from tickwork.scheduler.promoter import PromotePass, Promoter
from tickwork.testing.conformance.dispatch import add, now_ms, read


class CountingPromoter(Promoter):
    """Reports each pass on a queue, so tests wait on events, never on time."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.passes: asyncio.Queue[PromotePass | None] = asyncio.Queue()

    async def run_once(self, now: datetime | None = None) -> PromotePass:
        try:
            result = await super().run_once(now)
        except Exception:
            self.passes.put_nowait(None)
            raise
        self.passes.put_nowait(result)
        return result


async def next_pass(p: CountingPromoter) -> PromotePass | None:
    return await asyncio.wait_for(p.passes.get(), 10)


def promoter(dispatch: Dispatch, *queues: str, **kwargs: Any) -> CountingPromoter:
    return CountingPromoter(dispatch=dispatch, clock=FakeClock(), queues=list(queues) or [
        "default"], **kwargs)


async def test_run_once_moves_due_keys_and_sleeps_until_the_next(
        redis_dispatch: RedisDispatch) -> None:
    d = redis_dispatch
    now = await now_ms(d)
    await add(d, now - 5, now - 1, now - 1)
    await add(d, now + 200, queue="mail")
    result = await promoter(d, "default", "mail").run_once()
    assert (result.moved, result.more) == (3, False)
    assert 0.001 <= result.sleep_seconds <= 0.2
    assert len(await read(d)) == 3


async def test_run_once_with_nothing_due_sleeps_the_maximum(
        redis_dispatch: RedisDispatch) -> None:
    result = await promoter(redis_dispatch, max_interval_seconds=0.25).run_once()
    assert result == PromotePass(moved=0, more=False, sleep_seconds=0.25)
    now = await now_ms(redis_dispatch)
    await add(redis_dispatch, now + 3_600_000)
    assert (await promoter(redis_dispatch, max_interval_seconds=0.25).run_once()
            ).sleep_seconds == 0.25


async def test_bounded_batches_and_fair_queues(redis_dispatch: RedisDispatch) -> None:
    d = redis_dispatch
    now = await now_ms(d)
    await add(d, *([now - 1] * 25))
    await add(d, now - 1, queue="mail")
    moved: dict[str, int] = {}
    p = promoter(d, "default", "mail", batch_size=5, batches_per_queue=2,
                 on_promoted=lambda q, n: moved.__setitem__(q, moved.get(q, 0) + n))
    first = await p.run_once()
    assert (first.moved, first.more, first.sleep_seconds) == (11, True, 0.0)
    assert moved == {"default": 10, "mail": 1}  # the burst did not hold up the other queue
    assert [(r.moved, r.more) for r in [await p.run_once(), await p.run_once()]] == [
        (10, True), (5, False)]
    assert (await d.queue_stats(QueueStatsParams("default"))).ready == 25


async def test_the_loop_sleeps_on_the_clock_and_wakes_on_demand(
        redis_dispatch: RedisDispatch) -> None:
    d = redis_dispatch
    clock = FakeClock()
    p = CountingPromoter(dispatch=d, clock=clock, queues=["default"], max_interval_seconds=30)
    p.start()
    try:
        assert (await next_pass(p)) == PromotePass(0, False, 30)
        now = await now_ms(d)
        await add(d, now - 1)
        p.wake()  # a planner just added keys: no need to wait 30 s
        result = await next_pass(p)
        assert result is not None
        assert result.moved == 1
        clock.advance(30)  # the bound on the sleep
        assert await next_pass(p) == PromotePass(0, False, 30)
    finally:
        await p.stop()


async def test_the_loop_survives_redis_being_unavailable(
        unreachable_dispatch: RedisDispatch, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    p = CountingPromoter(dispatch=unreachable_dispatch, clock=clock, queues=["default"],
                         unavailable_backoff_seconds=2)
    with caplog.at_level(logging.WARNING, logger="tickwork.promoter"):
        p.start()
        try:
            assert await next_pass(p) is None
            clock.advance(2)
            assert await next_pass(p) is None
        finally:
            await p.stop()
    warnings = [r for r in caplog.records if "Redis unavailable" in r.getMessage()]
    assert len(warnings) == 1  # once per outage, not once per attempt


async def test_a_queue_at_its_backlog_bound_is_looked_at_again_shortly(
        redis_dispatch: RedisDispatch) -> None:
    """A burst waits in the due set: the streams get a backlog's worth, then more as workers
    read, the promoter looking again every held interval, not at the maximum sleep."""
    d = redis_dispatch
    now = await now_ms(d)
    await add(d, *([now - 1] * 30))
    p = promoter(d, backlog=12, held_interval_seconds=0.005, max_interval_seconds=0.5)
    first = await p.run_once()
    assert (first.moved, first.more, first.sleep_seconds) == (12, False, 0.005)
    assert (await p.run_once()).moved == 0  # held: nobody read yet
    assert len(await read(d, 5)) == 5
    assert (await p.run_once()).moved == 5
    assert (await d.queue_stats(QueueStatsParams("default"))).due == 13


async def test_by_default_a_queue_s_bound_is_what_its_workers_read_in_the_target_time(
        redis_dispatch: RedisDispatch) -> None:
    """Workers reading 2,000 a second with a 50 ms target: the bound falls from its start
    (500) to its least (128); a queue with a fixed bound keeps it."""
    d = redis_dispatch
    now = await now_ms(d)
    await add(d, *([now - 1] * 5000))
    clock = FakeClock()
    told: list[tuple[str, int]] = []
    p = CountingPromoter(dispatch=d, clock=clock, queues=["default"], backlog_seconds=0.05,
                         on_backlog=lambda queue, size: told.append((queue, size)))
    assert p.backlog_of("default") == 500
    assert (await p.run_once()).moved == 500
    for _ in range(150):  # 1.5 s of workers reading 20 entries every 10 ms
        assert len(await read(d, 20)) == 20
        clock.advance(0.01)
        await p.run_once()
    assert p.backlog_of("default") == 128
    assert told[0] == ("default", 500)  # sized at first sight, then told each change
    assert told[-1] == ("default", 128)
    assert [size for _, size in told] == sorted({size for _, size in told}, reverse=True)
    waiting = (await d.queue_stats(QueueStatsParams("default"))).due
    assert waiting == 5000 - 150 * 20 - 128  # the streams hold the bound, no more
    assert promoter(d, backlog=12).backlog_of("default") == 12


def test_settings_are_validated(redis_dispatch: RedisDispatch) -> None:
    with pytest.raises(ValueError, match="backlog"):
        promoter(redis_dispatch, backlog=-1)
    with pytest.raises(ValueError, match="seconds"):
        promoter(redis_dispatch, backlog_seconds=0)
    with pytest.raises(ValueError, match="batch_size"):
        promoter(redis_dispatch, batch_size=0)
    with pytest.raises(ValueError, match="batches_per_queue"):
        promoter(redis_dispatch, batches_per_queue=0)
    with pytest.raises(ValueError, match="min_interval_seconds"):
        promoter(redis_dispatch, min_interval_seconds=2, max_interval_seconds=1)


async def test_queues_may_be_a_function(redis_dispatch: RedisDispatch) -> None:
    queues = ["a"]
    p = CountingPromoter(dispatch=redis_dispatch, clock=FakeClock(), queues=lambda: queues)
    now = await now_ms(redis_dispatch)
    await add(redis_dispatch, now - 1, queue="b")
    assert (await p.run_once()).moved == 0
    queues.append("b")
    assert (await p.run_once()).moved == 1
