"""The Dispatch conformance suite: every dispatch driver passes it (STYLE habit 2).

A driver's test module subclasses ``DispatchConformance`` and defines these fixtures:

``dispatch``
    a fresh dispatch with a namespace of its own (a per-test key prefix);
``peer_dispatch``
    a second dispatch on the same namespace over its own connection, as another process;
``make_idle``
    ``async (dispatch, queue, consumer, entries, idle_ms)``: make pending entries look idle
    for ``idle_ms`` (Redis: ``XCLAIM ... IDLE``), so reclaim tests need no waiting;
``volatile_dispatch``
    ``(dispatch, lose)``: a dispatch whose data ``lose()`` wipes entirely (a flush, a restart);
``unreachable_dispatch``
    a dispatch pointed at a server that does not answer.

Due-ness is the dispatch's own clock: tests read it from an empty promote's ``now_ms`` and never
sleep; far-future due times stand for "not yet".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import pytest

from tickwork.drivers.dispatch import (
    DeadListParams,
    Dispatch,
    DueAddParams,
    DueCountParams,
    DueItem,
    DuePromoteParams,
    DueRebuildParams,
    Entry,
    EntryAckParams,
    EntryDeadLetterParams,
    EntryReadParams,
    EntryReclaimParams,
    EntryRetryParams,
    EntryTouchParams,
    Promoted,
    QueueStats,
    QueueStatsParams,
    StreamTrimParams,
)
from tickwork.errors import DispatchUnavailable

__all__ = ["DispatchConformance", "MakeIdle"]

Q = "default"
LATER = 3_600_000  # an hour: "not due" for the whole test
MakeIdle = Callable[[Dispatch, str, str, Sequence[Entry], int], Awaitable[None]]


async def now_ms(dispatch: Dispatch) -> int:
    """The dispatch's clock, from a promote of a queue nothing uses."""
    return (await dispatch.due_promote(DuePromoteParams("clock-probe"))).now_ms


async def add(dispatch: Dispatch, *due: int, prefix: str = "k", priority: int = 0,
              queue: str = Q) -> list[str]:
    keys = [f"{prefix}{i}" for i in range(len(due))]
    await dispatch.due_add(DueAddParams([DueItem(queue, k, d, priority)
                                         for k, d in zip(keys, due, strict=True)]))
    return keys


async def promote_all(dispatch: Dispatch, queue: str = Q, limit: int = 1000) -> int:
    moved = 0
    while (step := await dispatch.due_promote(DuePromoteParams(queue, limit))).moved:
        moved += step.moved
    return moved


async def promote_and_read(dispatch: Dispatch, backlog: int, queue: str = Q) -> list[str]:
    """Promote with a backlog bound, reading what moved, until nothing is due: the keys."""
    keys: list[str] = []
    while (step := await dispatch.due_promote(DuePromoteParams(queue, backlog=backlog))).moved:
        keys += [e.key for e in await read(dispatch, step.moved, "drain", queue)]
    return keys


async def read(dispatch: Dispatch, count: int = 100, consumer: str = "c1",
               queue: str = Q) -> list[Entry]:
    return (await dispatch.entry_read(EntryReadParams(queue, consumer, count))).entries


async def read_all(dispatch: Dispatch, consumer: str = "c1", queue: str = Q) -> list[Entry]:
    out: list[Entry] = []
    while batch := await read(dispatch, 1000, consumer, queue):
        out += batch
    return out


async def stats(dispatch: Dispatch, queue: str = Q) -> QueueStats:
    return await dispatch.queue_stats(QueueStatsParams(queue))


class DueConformance:
    async def test_due_promote_moves_exactly_the_due(self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        keys = await add(dispatch, now - 1000, now - 1, now, now + LATER, now + 2 * LATER)
        step = await dispatch.due_promote(DuePromoteParams(Q))
        assert step.moved == 3
        assert step.next_due_ms == now + LATER
        assert step.now_ms >= now
        assert step.next_in_ms is not None
        assert 0 < step.next_in_ms <= LATER
        assert await stats(dispatch) == QueueStats(due=2, ready=3, pending=0)
        got = await read(dispatch)
        assert sorted(e.key for e in got) == keys[:3]
        assert {e.key: e.due_ms for e in got} == {keys[0]: now - 1000, keys[1]: now - 1,
                                                  keys[2]: now}

    async def test_due_promote_empty(self, dispatch: Dispatch) -> None:
        step = await dispatch.due_promote(DuePromoteParams(Q))
        assert (step.moved, step.next_due_ms, step.next_in_ms) == (0, None, None)

    async def test_due_promote_bounded_batches(self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, *([now - 5] * 25))
        moves = [(await dispatch.due_promote(DuePromoteParams(Q, limit=10))).moved
                 for _ in range(4)]
        assert moves == [10, 10, 5, 0]
        with pytest.raises(ValueError, match="limit"):
            await dispatch.due_promote(DuePromoteParams(Q, limit=0))

    async def test_due_promote_with_a_backlog_bound_fills_the_streams_only_that_far(
            self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, *([now - 100] * 25))
        first = await dispatch.due_promote(DuePromoteParams(Q, backlog=10))
        assert (first.moved, first.held) == (10, False)
        full = await dispatch.due_promote(DuePromoteParams(Q, backlog=10))
        assert (full.moved, full.held, full.next_in_ms) == (0, True, 0)
        assert await stats(dispatch) == QueueStats(due=15, ready=10, pending=0)
        assert len(await read(dispatch, 4)) == 4  # delivered: room for four more
        assert (await dispatch.due_promote(DuePromoteParams(Q, backlog=10))).moved == 4
        assert await stats(dispatch) == QueueStats(due=11, ready=10, pending=4)
        with pytest.raises(ValueError, match="backlog"):
            await dispatch.due_promote(DuePromoteParams(Q, backlog=-1))

    async def test_due_promote_with_a_bound_moves_the_newest_due_alongside_a_burst(
            self, dispatch: Dispatch) -> None:
        """What comes due while a burst waits in the due set is delivered behind at most a
        backlog's worth of entries, not behind the whole burst."""
        now = await now_ms(dispatch)
        await add(dispatch, *([now - 1000] * 20), prefix="burst")
        steady = await add(dispatch, now - 40, now - 30, now - 20, now - 10, prefix="steady")
        await add(dispatch, now + LATER, prefix="later")
        step = await dispatch.due_promote(DuePromoteParams(Q, backlog=8))
        assert step.moved == 8
        assert (await stats(dispatch)).due == 17, "exactly what moved left the due set"
        got = [e.key for e in await read(dispatch, 8)]
        assert got[:4] == steady[::-1], "half of the move, the newest due first"
        assert all(k.startswith("burst") for k in got[4:]), "the rest is the oldest due"
        rest = await promote_and_read(dispatch, backlog=8)
        assert sorted(got + rest) == sorted({*got, *rest}), "no key moved twice"
        assert len(got + rest) == 24, "every key moved"
        assert await dispatch.due_count(DueCountParams(Q)) == 1, "the later one waits"

    async def test_due_add_keeps_the_first_due_time(self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        assert await dispatch.due_add(DueAddParams([DueItem(Q, "a", now + LATER)])) == 1
        assert await dispatch.due_add(DueAddParams([DueItem(Q, "a", now - 1)])) == 0
        assert (await dispatch.due_promote(DuePromoteParams(Q))).moved == 0
        assert await dispatch.due_count(DueCountParams(Q)) == 1
        assert await dispatch.due_add(DueAddParams([])) == 0

    async def test_due_add_batches_per_queue(self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        items = [DueItem(f"q{i % 3}", f"k{i}", now - 1) for i in range(2500)]
        assert await dispatch.due_add(DueAddParams(items)) == 2500
        for q in ("q0", "q1", "q2"):
            assert await dispatch.due_count(DueCountParams(q)) == len(items[int(q[1])::3])
            assert await promote_all(dispatch, q) == len(items[int(q[1])::3])

    async def test_due_rebuild_is_insert_if_absent(self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, now + LATER)
        added = await dispatch.due_rebuild(DueRebuildParams(
            [DueItem(Q, "k0", now - 1), DueItem(Q, "other", now - 1)]))
        assert added == 1
        assert [e.key for e in await read(dispatch)] == []
        assert await promote_all(dispatch) == 1
        assert [e.key for e in await read(dispatch)] == ["other"]

    async def test_due_promote_concurrent_never_twice_never_lost(
            self, dispatch: Dispatch, peer_dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        keys = await add(dispatch, *(now - 1 - i % 50 for i in range(600)))
        # Overlapping batches: ten promoters on one connection pool, ten on another.
        steps: list[Promoted] = []
        while True:
            batch = await asyncio.gather(
                *(d.due_promote(DuePromoteParams(Q, limit=7))
                  for d in [dispatch] * 10 + [peer_dispatch] * 10))
            steps += batch
            if not any(s.moved for s in batch):
                break
        assert sum(s.moved for s in steps) == len(keys)
        got = await read_all(dispatch)
        assert sorted(e.key for e in got) == sorted(keys)  # each exactly once
        assert await stats(dispatch) == QueueStats(due=0, ready=0, pending=len(keys))


class ReadConformance:
    async def test_entry_read_highest_band_first(self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        for priority in (-5, 0, 5, 50):
            await add(dispatch, now - 1, prefix=f"p{priority}-", priority=priority)
        await promote_all(dispatch)
        order = [e.key for _ in range(4) for e in await read(dispatch, 1)]
        assert order == ["p50-0", "p5-0", "p0-0", "p-5-0"]

    async def test_entry_read_one_batch_is_sorted_by_band(self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        for priority in (0, 50, -5):
            await add(dispatch, now - 2, now - 1, prefix=f"p{priority}-", priority=priority)
        await promote_all(dispatch)
        got = await read(dispatch, 5)
        assert [e.key for e in got][:4] == ["p50-0", "p50-1", "p0-0", "p0-1"]
        assert [e.band for e in got] == sorted(e.band for e in got)

    async def test_entry_read_count_and_groups_created(self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, *([now - 1] * 30))
        await promote_all(dispatch)
        first = await dispatch.entry_read(EntryReadParams(Q, "c1", 10))
        assert len(first.entries) == 10
        assert first.groups_created > 0  # a first start looks like a loss; reconciling is fine
        second = await dispatch.entry_read(EntryReadParams(Q, "c1", 25))
        assert (len(second.entries), second.groups_created) == (20, 0)
        with pytest.raises(ValueError, match="count"):
            await dispatch.entry_read(EntryReadParams(Q, "c1", 0))

    async def test_entry_read_blocks_until_an_entry_arrives(self, dispatch: Dispatch) -> None:
        assert await read(dispatch) == []
        empty = await dispatch.entry_read(EntryReadParams(Q, "c1", 5, block_ms=20))
        assert empty.entries == []
        waiting = asyncio.ensure_future(
            dispatch.entry_read(EntryReadParams(Q, "c1", 5, block_ms=30_000)))
        now = await now_ms(dispatch)
        await add(dispatch, now - 1)
        assert (await dispatch.due_promote(DuePromoteParams(Q))).moved == 1
        got = await asyncio.wait_for(waiting, 10)
        assert [e.key for e in got.entries] == ["k0"]

    async def test_entry_read_consumers_share_not_duplicate(
            self, dispatch: Dispatch, peer_dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        keys = await add(dispatch, *([now - 1] * 200))
        await promote_all(dispatch)
        batches = await asyncio.gather(*(
            read(d, 7, consumer=f"c{i}") for i in range(30)
            for d in (dispatch, peer_dispatch)))
        got = [e.key for b in batches for e in b] + [e.key for e in await read_all(dispatch)]
        assert sorted(got) == sorted(keys)

    async def test_entry_ack_removes_from_pending(self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, now - 1, now - 1, now - 1, priority=5)
        await add(dispatch, now - 1, prefix="low", priority=-1)
        await promote_all(dispatch)
        got = await read(dispatch)
        assert (await stats(dispatch)).pending == 4
        assert await dispatch.entry_ack(EntryAckParams(Q, got[1:])) == 3
        assert (await stats(dispatch)).pending == 1
        assert await dispatch.entry_ack(EntryAckParams(Q, got[1:])) == 0
        assert await dispatch.entry_ack(EntryAckParams(Q, [])) == 0


class SettleConformance:
    async def test_entry_retry_acks_and_rearms_atomically(self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, now - 1, priority=5)
        await promote_all(dispatch)
        (entry,) = await read(dispatch)
        assert await dispatch.entry_retry(EntryRetryParams(Q, entry, now - 1))
        assert await stats(dispatch) == QueueStats(due=1, ready=0, pending=0)
        assert await promote_all(dispatch) == 1
        (again,) = await read(dispatch)
        assert (again.key, again.band, again.due_ms) == (entry.key, entry.band, now - 1)
        assert again.id != entry.id

    async def test_entry_retry_waits_for_its_due_time(self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, now - 1)
        await promote_all(dispatch)
        (entry,) = await read(dispatch)
        assert await dispatch.entry_retry(EntryRetryParams(Q, entry, now + LATER))
        step = await dispatch.due_promote(DuePromoteParams(Q))
        assert (step.moved, step.next_due_ms) == (0, now + LATER)

    async def test_entry_retry_rearms_even_when_no_longer_pending(
            self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, now - 1)
        await promote_all(dispatch)
        (entry,) = await read(dispatch)
        await dispatch.entry_ack(EntryAckParams(Q, [entry]))
        assert not await dispatch.entry_retry(EntryRetryParams(Q, entry, now - 1))
        assert await dispatch.due_count(DueCountParams(Q)) == 1

    async def test_entry_reclaim_after_idle_counts_deliveries(
            self, dispatch: Dispatch, make_idle: MakeIdle) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, now - 2, now - 1)
        await promote_all(dispatch)
        first, second = await read(dispatch, consumer="dead-worker")
        assert first.delivery_count == 1
        assert await dispatch.entry_reclaim(EntryReclaimParams(Q, "rescuer", 5_000)) == []
        await make_idle(dispatch, Q, "dead-worker", [first], 10_000)
        (got,) = await dispatch.entry_reclaim(EntryReclaimParams(Q, "rescuer", 5_000))
        assert (got.id, got.key, got.delivery_count) == (first.id, first.key, 2)
        # Taking it over made it fresh again.
        assert await dispatch.entry_reclaim(EntryReclaimParams(Q, "rescuer", 5_000)) == []
        await make_idle(dispatch, Q, "rescuer", [got], 10_000)
        (third,) = await dispatch.entry_reclaim(EntryReclaimParams(Q, "other", 5_000))
        assert (third.key, third.delivery_count) == (first.key, 3)
        assert (await stats(dispatch)).pending == 2
        assert second.key != first.key

    async def test_entry_reclaim_reaches_idle_entries_behind_busy_ones(
            self, dispatch: Dispatch, make_idle: MakeIdle) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, *([now - 1] * 60))
        await promote_all(dispatch)
        got = await read(dispatch, consumer="w")
        await make_idle(dispatch, Q, "w", got[-3:], 10_000)
        found: list[Entry] = []
        for _ in range(10):  # a bounded number of calls, each bounded
            found += await dispatch.entry_reclaim(EntryReclaimParams(Q, "r", 5_000, count=1))
        assert sorted(e.key for e in found) == sorted(e.key for e in got[-3:])

    async def test_entry_touch_resets_idle(self, dispatch: Dispatch,
                                           make_idle: MakeIdle) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, now - 2, now - 1)
        await promote_all(dispatch)
        long_job, stuck = await read(dispatch, consumer="w")
        await make_idle(dispatch, Q, "w", [long_job, stuck], 10_000)
        assert await dispatch.entry_touch(EntryTouchParams(Q, "w", [long_job])) == []
        got = await dispatch.entry_reclaim(EntryReclaimParams(Q, "r", 5_000))
        assert [e.key for e in got] == [stuck.key]

    async def test_entry_touch_reports_entries_no_longer_pending(
            self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, now - 2, now - 1)
        await promote_all(dispatch)
        done, running = await read(dispatch, consumer="w")
        await dispatch.entry_ack(EntryAckParams(Q, [done]))
        assert await dispatch.entry_touch(EntryTouchParams(Q, "w", [done, running])) == [done]
        assert await dispatch.entry_touch(EntryTouchParams(Q, "w", [])) == []

    async def test_entry_dead_letter_poison(self, dispatch: Dispatch,
                                            make_idle: MakeIdle) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, now - 1, priority=5)
        await promote_all(dispatch)
        (entry,) = await read(dispatch, consumer="w")
        await make_idle(dispatch, Q, "w", [entry], 10_000)
        (entry,) = await dispatch.entry_reclaim(EntryReclaimParams(Q, "r", 5_000))
        assert await dispatch.entry_dead_letter(EntryDeadLetterParams(Q, entry, "boom x2"))
        assert (await stats(dispatch)).pending == 0
        (dead,) = await dispatch.dead_list(DeadListParams(Q))
        assert (dead.key, dead.reason, dead.delivery_count, dead.band, dead.entry_id) == (
            entry.key, "boom x2", 2, entry.band, entry.id)
        assert not await dispatch.entry_dead_letter(EntryDeadLetterParams(Q, entry, "again"))
        assert len(await dispatch.dead_list(DeadListParams(Q))) == 1

    async def test_stream_trim_never_drops_pending_or_undelivered(
            self, dispatch: Dispatch, make_idle: MakeIdle) -> None:
        now = await now_ms(dispatch)
        keys = await add(dispatch, *([now - 1] * 10))
        await promote_all(dispatch)
        got = await read(dispatch, 6, consumer="w")
        await dispatch.entry_ack(EntryAckParams(Q, got[1:4]))  # the first one stays pending
        await dispatch.stream_trim(StreamTrimParams(Q))
        assert await stats(dispatch) == QueueStats(due=0, ready=4, pending=3)
        await make_idle(dispatch, Q, "w", [got[0], *got[4:]], 10_000)
        reclaimed = await dispatch.entry_reclaim(EntryReclaimParams(Q, "r", 5_000))
        assert sorted(e.key for e in reclaimed) == sorted(e.key for e in [got[0], *got[4:]])
        rest = await read_all(dispatch)
        assert sorted(e.key for e in got + rest) == sorted(keys)
        await dispatch.entry_ack(EntryAckParams(Q, reclaimed + rest))
        assert await dispatch.stream_trim(StreamTrimParams(Q)) == 10
        assert await dispatch.stream_trim(StreamTrimParams(Q)) == 0
        assert await stats(dispatch) == QueueStats(due=0, ready=0, pending=0)

    async def test_stream_trim_before_any_read_keeps_everything(
            self, dispatch: Dispatch) -> None:
        now = await now_ms(dispatch)
        await add(dispatch, now - 1, now - 1)
        await promote_all(dispatch)
        assert await dispatch.stream_trim(StreamTrimParams(Q)) == 0
        assert len(await read(dispatch)) == 2


class LossConformance:
    async def test_epoch_check(self, dispatch: Dispatch, peer_dispatch: Dispatch) -> None:
        assert not await dispatch.epoch_check()  # nothing there yet: reconcile on first start
        assert await dispatch.epoch_check()
        assert await peer_dispatch.epoch_check()  # it was there when the peer first looked

    async def test_losing_everything_is_reported(
            self, volatile_dispatch: tuple[Dispatch, Callable[[], Awaitable[None]]]) -> None:
        dispatch, lose = volatile_dispatch
        await dispatch.epoch_check()
        assert await dispatch.epoch_check()
        now = await now_ms(dispatch)
        await add(dispatch, now - 1, now - 1, now + LATER)
        await promote_all(dispatch)
        assert len(await read(dispatch, 1)) == 1
        await lose()
        assert not await dispatch.epoch_check()
        assert await dispatch.epoch_check()
        assert await stats(dispatch) == QueueStats(due=0, ready=0, pending=0)
        after = await dispatch.entry_read(EntryReadParams(Q, "c1", 10))
        assert (after.entries, after.groups_created > 0) == ([], True)
        # Working again: the reconciler's rebuild flows through as usual.
        await dispatch.due_rebuild(DueRebuildParams([DueItem(Q, "k1", now - 1)]))
        await promote_all(dispatch)
        assert [e.key for e in await read(dispatch)] == ["k1"]

    async def test_unreachable_is_dispatch_unavailable(
            self, unreachable_dispatch: Dispatch) -> None:
        d = unreachable_dispatch
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: d.due_add(DueAddParams([DueItem(Q, "k", 0)])),
            lambda: d.due_promote(DuePromoteParams(Q)),
            lambda: d.entry_read(EntryReadParams(Q, "c", 1)),
            lambda: d.entry_ack(EntryAckParams(Q, [Entry("1-0", 0, "k", 0)])),
            lambda: d.queue_stats(QueueStatsParams(Q)),
            d.epoch_check,
        ]
        for call in calls:
            with pytest.raises(DispatchUnavailable):
                await call()
        with pytest.raises(ConnectionError):  # callers may catch the builtin
            await d.due_count(DueCountParams(Q))
        assert not (await d.health()).ok


class DispatchConformance(DueConformance, ReadConformance, SettleConformance, LossConformance):
    """Every test of the suite; a driver's test module subclasses this."""
