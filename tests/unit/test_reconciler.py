"""The reconciler against a real Redis, with the store's side as a tiny in-memory source."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from tickwork.clock import FakeClock
from tickwork.drivers.dispatch import (
    DueCountParams,
    EntryAckParams,
    QueueStatsParams,
    to_ms,
)
from tickwork.drivers.redis import RedisDispatch
from tickwork.scheduler.reconciler import Reconciled, Reconciler, WaitingItem
from tickwork.testing import redis as rt
from tickwork.testing.conformance.dispatch import add, promote_all, read

START = datetime(2030, 1, 1, tzinfo=UTC)
T0 = to_ms(START)  # far ahead of Redis' clock: nothing here is due for the promoter


class MemorySource:
    """What the store would answer: waiting occurrences per queue, paged by key."""

    def __init__(self, **queues: list[WaitingItem]) -> None:
        self.queues = queues
        self.pages = 0

    async def waiting(self, queue: str, after: str | None, limit: int,
                      due_before_ms: int | None = None) -> list[WaitingItem]:
        self.pages += 1
        items = sorted(self.queues.get(queue, []), key=lambda i: i.key)
        return [i for i in items if (after is None or i.key > after)
                and (due_before_ms is None or i.due_ms < due_before_ms)][:limit]


def items(n: int, prefix: str = "k", due_ms: int = T0) -> list[WaitingItem]:
    return [WaitingItem(f"{prefix}{i:05}", due_ms, i % 3) for i in range(n)]


def reconciler(d: RedisDispatch, source: MemorySource, **kwargs: Any) -> Reconciler:
    kwargs.setdefault("clock", FakeClock(START))
    kwargs.setdefault("queues", sorted(source.queues))
    return Reconciler(dispatch=d, source=source, **kwargs)


async def due(d: RedisDispatch, queue: str) -> int:
    return await d.due_count(DueCountParams(queue))


async def settle(r: Reconciler) -> list[Reconciled]:
    """Run passes until no rebuild is left (each pass is bounded)."""
    done: list[Reconciled] = []
    for _ in range(100):
        finished, more = await r.run_once(r.clock.now())
        done += finished
        if not more:
            return done
    raise AssertionError("the reconciler never finished")


async def test_first_start_rebuilds_every_queue_in_bounded_pages(
        redis_dispatch: RedisDispatch) -> None:
    source = MemorySource(big=items(2500), small=items(3))
    r = reconciler(redis_dispatch, source, page_size=1000, pages_per_tick=2)
    finished, more = await r.run_once(START)
    assert more
    assert [(f.queue, f.reason, f.added) for f in finished] == [("small", "epoch", 3)]
    assert await due(redis_dispatch, "big") == 2000
    finished, more = await r.run_once(START)
    assert not more
    assert [(f.queue, f.seen, f.added) for f in finished] == [("big", 2500, 2500)]
    assert await due(redis_dispatch, "big") == 2500


async def test_intact_redis_is_left_alone(redis_dispatch: RedisDispatch) -> None:
    source = MemorySource(q=items(10))
    r = reconciler(redis_dispatch, source)
    await settle(r)
    pages = source.pages
    assert await settle(r) == []  # epoch intact, due set not empty, repair not due yet
    assert source.pages == pages


async def test_lost_epoch_rebuilds_everything(redis_dispatch: RedisDispatch) -> None:
    source = MemorySource(a=items(5), b=items(5))
    r = reconciler(redis_dispatch, source)
    await settle(r)
    # Redis lost everything of this prefix (as a flush would), the epoch included.
    await rt.delete_prefix(redis_dispatch.client, redis_dispatch.keys.prefix)
    done = await settle(r)
    assert sorted((f.queue, f.reason, f.added) for f in done) == [
        ("a", "epoch", 5), ("b", "epoch", 5)]


async def test_a_read_that_made_groups_rebuilds_that_queue(
        redis_dispatch: RedisDispatch) -> None:
    source = MemorySource(a=items(5), b=items(5))
    r = reconciler(redis_dispatch, source)
    await settle(r)
    r.notify_lost("a")
    assert [(f.queue, f.reason, f.added) for f in await settle(r)] == [("a", "nogroup", 0)]


async def test_a_lost_epoch_keeps_its_name_when_a_read_also_made_groups(
        redis_dispatch: RedisDispatch) -> None:
    source = MemorySource(a=items(5), b=items(5))
    r = reconciler(redis_dispatch, source)
    await settle(r)
    await rt.delete_prefix(redis_dispatch.client, redis_dispatch.keys.prefix)
    r.notify_lost("a")  # a worker's read met the empty Redis before the pass did
    done = await settle(r)
    assert sorted((f.queue, f.reason, f.added) for f in done) == [
        ("a", "epoch", 5), ("b", "epoch", 5)]


async def test_empty_redis_while_the_store_waits_rebuilds(
        redis_dispatch: RedisDispatch) -> None:
    source = MemorySource(a=items(5), b=items(5))
    r = reconciler(redis_dispatch, source)
    await settle(r)
    await redis_dispatch.client.delete(redis_dispatch.keys.due("b"))
    assert [(f.queue, f.reason, f.added) for f in await settle(r)] == [("b", "empty", 5)]


async def test_a_burst_in_workers_hands_is_not_mistaken_for_lost_data(
        redis_dispatch: RedisDispatch) -> None:
    """All promoted and read, none acked yet, while the store still shows them waiting (their
    claims not committed): the due set and the streams' backlog are empty, but Redis lost
    nothing, and re-adding every key would only deliver the burst twice."""
    d = redis_dispatch
    r = reconciler(d, MemorySource(q=items(5, due_ms=1)))
    await settle(r)  # the first start puts the five in the due set
    assert await promote_all(d, "q") == 5
    assert len(await read(d, 10, queue="q")) == 5  # in a worker's hands
    assert await settle(r) == []
    assert (await due(d, "q"), (await d.queue_stats(QueueStatsParams("q"))).pending) == (0, 5)


async def test_periodic_repair_re_adds_only_the_long_overdue(
        redis_dispatch: RedisDispatch) -> None:
    clock = FakeClock(START)
    source = MemorySource(q=[WaitingItem("old", T0 - 120_000), WaitingItem("fresh", T0 - 10_000),
                             WaitingItem("later", T0 + 100_000)])
    r = reconciler(redis_dispatch, source, clock=clock, repair_every_seconds=30,
                   repair_grace_seconds=60)
    await settle(r)
    due_key = redis_dispatch.keys.due("q")
    await redis_dispatch.client.zrem(due_key, "2|old", "2|fresh")  # lost in a failover
    assert await settle(r) == []  # the last repair was a moment ago
    clock.advance(30)  # now "old" is 150 s overdue, "fresh" 40 s: within the grace
    done = await settle(r)
    assert [(f.reason, f.seen, f.added) for f in done] == [("repair", 1, 1)]
    assert await redis_dispatch.client.zrange(due_key, 0, -1) == ["2|old", "2|later"]


async def test_no_repair_while_entries_wait_in_the_streams(
        redis_dispatch: RedisDispatch) -> None:
    d = redis_dispatch
    clock = FakeClock(START)
    source = MemorySource(q=[WaitingItem("lost", T0 - 120_000)])
    r = reconciler(d, source, clock=clock, repair_every_seconds=1)
    await settle(r)
    await d.client.delete(d.keys.due("q"))
    await add(d, 1, queue="q")  # an old key is ready in a stream: the backlog explains lateness
    await promote_all(d, "q")
    clock.advance(5)
    assert await settle(r) == []
    assert (await d.queue_stats(QueueStatsParams("q"))).ready == 1


async def test_a_new_loss_restarts_a_rebuild_from_the_first_page(
        redis_dispatch: RedisDispatch) -> None:
    source = MemorySource(q=items(30))
    r = reconciler(redis_dispatch, source, page_size=10, pages_per_tick=1)
    await r.run_once(START)
    await r.run_once(START)
    assert await due(redis_dispatch, "q") == 20
    await rt.delete_prefix(redis_dispatch.client, redis_dispatch.keys.prefix)
    done = await settle(r)
    assert [(f.reason, f.seen, f.added) for f in done] == [("epoch", 30, 30)]


async def test_streams_are_trimmed(redis_dispatch: RedisDispatch) -> None:
    d = redis_dispatch
    clock = FakeClock(START)
    r = reconciler(d, MemorySource(q=[]), clock=clock, trim_every_seconds=60)
    await add(d, 1, 2, queue="q")
    await promote_all(d, "q")
    await d.entry_ack(EntryAckParams("q", await read(d, queue="q")))
    await settle(r)
    assert sum([await d.client.xlen(s) for s in d.keys.streams("q")]) == 0


async def test_the_loop_wakes_on_notify_lost(redis_dispatch: RedisDispatch) -> None:
    clock = FakeClock(START)
    done: asyncio.Queue[Reconciled] = asyncio.Queue()
    r = reconciler(redis_dispatch, MemorySource(q=items(3)), clock=clock,
                   interval_seconds=3600, on_reconciled=done.put_nowait)
    r.start()
    try:
        assert (await asyncio.wait_for(done.get(), 10)).reason == "epoch"
        r.notify_lost("q")  # no need to wait an hour
        assert (await asyncio.wait_for(done.get(), 10)).reason == "nogroup"
    finally:
        await r.stop()


def test_settings_are_validated(redis_dispatch: RedisDispatch) -> None:
    with pytest.raises(ValueError, match="page_size"):
        reconciler(redis_dispatch, MemorySource(), page_size=0)
    with pytest.raises(ValueError, match="repair_grace_seconds"):
        reconciler(redis_dispatch, MemorySource(), repair_grace_seconds=-1)


async def test_higher_priority_queues_are_re_added_first(
        redis_dispatch: RedisDispatch) -> None:
    """After a loss, a critical queue's rebuild finishes before a lower queue's first page;
    queues of equal priority go side by side."""
    source = MemorySource(bulk=items(1500, "b"), critical=items(2500, "c"), mail=items(10, "m"),
                          other=items(10, "o"))
    r = reconciler(redis_dispatch, source, page_size=1000, pages_per_tick=1,
                   priorities={"critical": 10, "mail": 5, "other": 5})
    finished, more = await r.run_once(START)
    assert (finished, more) == ([], True)
    assert [await due(redis_dispatch, q) for q in ("critical", "mail", "other", "bulk")] == [
        1000, 0, 0, 0]
    finished, _ = await r.run_once(START)
    assert finished == []
    assert await due(redis_dispatch, "critical") == 2000
    finished, _ = await r.run_once(START)  # critical's last page, both 5s, then bulk's first
    assert [f.queue for f in finished] == ["critical", "mail", "other"]
    assert await due(redis_dispatch, "bulk") == 1000
    assert [f.queue for f in await settle(r)] == ["bulk"]
    assert await due(redis_dispatch, "bulk") == 1500
