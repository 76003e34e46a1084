"""The Redis deployment in one process: planner -> due set -> promoter -> worker -> store -> ack.

PostgreSQL (a database per test) and Redis (the shared server with a key prefix per test; a
private redis-server where the test needs Redis to go away). Time is a FakeClock set near the
real time, because Redis decides due-ness on its own clock.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.drivers.base import Completion, OccurrenceInsertParams, OccurrenceRescueParams
from tickwork.drivers.dispatch import (
    DeadListParams,
    DueAddParams,
    DueCountParams,
    DueItem,
    DuePromoteParams,
    EntryReadParams,
    QueueStatsParams,
    occurrence_key,
    parse_key,
    to_ms,
)
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.drivers.redis.dispatch import RedisDispatch
from tickwork.drivers.redis.keys import member
from tickwork.models import Claim, OccurrenceState, rfc3339
from tickwork.scheduler.dispatch import SchedulerDispatch
from tickwork.scheduler.planner import Planner
from tickwork.scheduler.reconciler import StoreWaitingSource
from tickwork.testing import ledger
from tickwork.testing import redis as rt
from tickwork.testing.factories import add_job, complete, completion, new_occurrence
from tickwork.testing.faults.redisserver import PrivateRedis, free_port
from tickwork.testing.harness import make_executors
from tickwork.worker.pool import WorkerPool
from tickwork.worker.redis_source import DEGRADED, REDIS, RedisClaimSource

S = OccurrenceState


def test_keys_round_trip() -> None:
    at = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    key = occurrence_key("job|with|bars", at)
    assert key == "job|with|bars|1893553445678901"
    assert parse_key(key) == ("job|with|bars", at)
    for exact in (datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
                  datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
                  datetime(2026, 11, 27, 21, 0, 0, 1, tzinfo=UTC)):
        assert parse_key(occurrence_key("j", exact)) == ("j", exact)  # to the microsecond
    for bad in ("", "nokey", "|123", "j|12x"):
        with pytest.raises(ValueError, match="not an occurrence key"):
            parse_key(bad)


@dataclass
class Stack:
    store: PostgresStore
    dispatch: RedisDispatch
    clock: FakeClock
    redis: SchedulerDispatch
    planner: Planner
    source: RedisClaimSource
    pool: WorkerPool
    client: AsyncClient
    tmp: Path
    written: asyncio.Queue[tuple[Completion, bool]] = field(default_factory=asyncio.Queue)
    started: bool = False

    def start(self) -> None:
        self.pool.start()
        self.started = True

    async def stop(self) -> None:
        if self.started:
            self.started = False
            await self.pool.stop(grace_seconds=0)  # flushes the batched acks

    async def completed(self, n: int) -> list[Completion]:
        done = []
        for _ in range(n):
            c, ok = await asyncio.wait_for(self.written.get(), 15)
            assert ok, c
            done.append(c)
        return done


async def settled(source: RedisClaimSource, claim: Claim, result: Completion) -> None:
    """What the completer does once the store took ``result``: settle its delivery."""
    step = source.settle(claim, result, applied=True)
    if step is not None:
        await step


def near_now() -> FakeClock:
    """A FakeClock a little behind the real time: what it calls due, Redis calls due too."""
    return FakeClock(datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=2))


@pytest.fixture
async def stack(tmp_path: Path, postgres_url: str,
                redis_dispatch: RedisDispatch) -> AsyncIterator[Stack]:
    store = PostgresStore(postgres_url)
    clock = near_now()
    redis = SchedulerDispatch(store=store, dispatch=redis_dispatch, clock=clock)
    planner = Planner(store=store, clock=clock, horizon_seconds=2, interval_seconds=1,
                      after_commit=redis.after_plan)
    source = RedisClaimSource(store=store, dispatch=redis_dispatch, clock=clock,
                              worker_id="w1", heartbeat_seconds=10, block_ms=100)
    pool = WorkerPool(store=store, clock=clock, executors=make_executors(),
                      queues=(("default", 8),), worker_id="w1", lease_seconds=30,
                      heartbeat_seconds=10, shutdown_grace_seconds=5, rng=random.Random(7),
                      source=source)
    client = AsyncClient(store, clock=clock, after_insert=redis.feeder.add_waiting)
    s = Stack(store, redis_dispatch, clock, redis, planner, source, pool, client, tmp_path)
    pool.completer.on_written = lambda c, ok: s.written.put_nowait((c, ok))
    yield s
    await s.stop()
    for executor in pool.executors.values():
        await executor.close()
    await store.close()


def record(name: str, path: Path, at: datetime, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedule": {"at": rfc3339(at)}, "kind": "python",
            "payload": {"callable": "tickwork.testing.ledger:record",
                        "kwargs": {"path": str(path), **extra.pop("kwargs", {})}}, **extra}


async def test_planner_to_due_set_to_worker_to_store_and_ack(stack: Stack) -> None:
    path = stack.tmp / "ledger.jsonl"
    at = stack.clock.now()
    jobs = await stack.client.create_jobs([record(f"j{i}", path, at) for i in range(20)])
    inserted, _ = await stack.planner.run_once(stack.clock.now())
    assert inserted == 20
    assert await stack.dispatch.due_count(DueCountParams("default")) == 20
    assert (await stack.redis.promoter.run_once()).moved == 20
    stack.start()
    done = await stack.completed(20)
    assert {c.job_id for c in done} == {j.id for j in jobs}
    assert all(c.state is S.SUCCEEDED and c.attempt == 1 for c in done)

    stack.clock.advance(1)
    trigger = await stack.client.trigger_job("j0")  # manual: due_add by the client's hook
    assert (await stack.redis.promoter.run_once()).moved == 1
    (c,) = await stack.completed(1)
    assert (c.job_id, c.scheduled_at) == (trigger.job_id, trigger.scheduled_at)

    await stack.stop()  # flushes the batched acks
    stats = await stack.dispatch.queue_stats(QueueStatsParams("default"))
    assert (stats.due, stats.ready, stats.pending) == (0, 0, 0)
    keys = [r["key"] for r in ledger.read(path)]
    assert len(keys) == len(set(keys)) == 21


def due_member(dispatch: RedisDispatch, key: str) -> str:
    return member(dispatch.keys.band_of(0), key)


async def put(stack: Stack, job_id: str, at: datetime, due: datetime) -> None:
    """A key in the due set, due for Redis now, then promoted to the stream."""
    await stack.dispatch.due_add(DueAddParams([DueItem("default", occurrence_key(job_id, at),
                                                       to_ms(due))]))
    assert (await stack.dispatch.due_promote(DuePromoteParams("default"))).moved == 1


async def test_not_due_is_re_armed_and_gone_is_acked(stack: Stack) -> None:
    now = stack.clock.now()
    job = await add_job(stack.store, "later", now=now)
    await stack.store.occurrence_insert(OccurrenceInsertParams(occurrences=[
        new_occurrence(job, now, due_at=now + timedelta(seconds=30))], now=now))
    await put(stack, job.id, now, due=now)  # Redis was told too early (a clock disagreement)
    result = await stack.source.claim("default", 8, now)
    assert result.claims == []
    client = stack.dispatch.client
    member = due_member(stack.dispatch, occurrence_key(job.id, now))
    assert await client.zscore(stack.dispatch.keys.due("default"), member) == to_ms(
        now + timedelta(seconds=30))

    done = await add_job(stack.store, "done", now=now)
    await stack.store.occurrence_insert(OccurrenceInsertParams(occurrences=[
        new_occurrence(done, now)], now=now))
    await put(stack, done.id, now, due=now)
    (claimed,) = (await stack.source.claim("default", 8, now)).claims
    await complete(stack.store, now, completion(claimed))
    await settled(stack.source, claimed, completion(claimed))
    await put(stack, done.id, now, due=now)  # delivered again after it ran
    assert (await stack.source.claim("default", 8, now)).claims == []
    await stack.source.stop()
    stats = await stack.dispatch.queue_stats(QueueStatsParams("default"))
    assert (stats.due, stats.ready, stats.pending) == (1, 0, 0)  # only the re-armed key
    assert (await stack.store.occurrence_get(done.id, now)).attempt == 1


async def test_retry_is_written_then_re_armed(stack: Stack) -> None:
    now = stack.clock.now()
    job = await add_job(stack.store, "flaky", now=now)
    await stack.store.occurrence_insert(OccurrenceInsertParams(occurrences=[
        new_occurrence(job, now)], now=now))
    await put(stack, job.id, now, due=now)
    (claimed,) = (await stack.source.claim("default", 8, now)).claims
    retry_at = now + timedelta(seconds=7)
    result = completion(claimed, state=S.RETRYING, due_at=retry_at)
    assert await complete(stack.store, now, result) == [True]
    await settled(stack.source, claimed, result)
    member = due_member(stack.dispatch, occurrence_key(job.id, now))
    assert await stack.dispatch.client.zscore(stack.dispatch.keys.due("default"),
                                              member) == to_ms(retry_at)
    assert (await stack.dispatch.queue_stats(QueueStatsParams("default"))).pending == 0


async def test_reclaim_takes_over_a_dead_consumer_and_dead_letters_poison(
        stack: Stack) -> None:
    now = stack.clock.now()
    jobs = [await add_job(stack.store, f"j{i}", now=now) for i in range(2)]
    for job in jobs:
        await stack.store.occurrence_insert(OccurrenceInsertParams(occurrences=[
            new_occurrence(job, now)], now=now))
        await put(stack, job.id, now, due=now)
    read = await stack.dispatch.entry_read(EntryReadParams("default", "dead", count=2))
    assert len(read.entries) == 2  # the dead consumer holds them and never settles them
    source = RedisClaimSource(store=stack.store, dispatch=stack.dispatch, clock=stack.clock,
                              worker_id="heir", heartbeat_seconds=0.01,
                              reclaim_idle_seconds=0.05, max_deliveries=2)
    await asyncio.sleep(0.1)  # the fault: the entries sit idle on Redis' clock
    assert await source.reclaim_once("default") == 2
    claims = (await source.claim("default", 1, now)).claims  # one slot: one waits in backlog
    assert [c.job.id for c in claims] == [jobs[0].id]
    source._backlog.clear()  # as if the heir died too, before claiming it
    await asyncio.sleep(0.1)
    await source.heartbeat(claims)  # the running one is touched: never idle long
    assert await source.reclaim_once("default") == 0  # the other: a third delivery, poison
    (dead,) = await stack.dispatch.dead_list(DeadListParams("default"))
    assert (dead.key, dead.delivery_count) == (occurrence_key(jobs[1].id, now), 3)
    assert "delivered 3 times" in dead.reason
    assert source.dead_lettered == 1
    waiting = await StoreWaitingSource(stack.store).waiting("default", None, 10)
    assert [w.key for w in waiting] == [occurrence_key(jobs[1].id, now)]  # reconciler's


async def test_degraded_mode_claims_from_the_store_and_returns(
        stack: Stack, tmp_path: Path) -> None:
    port = free_port()
    dispatch = RedisDispatch.from_url(f"redis://127.0.0.1:{port}/0", prefix=rt.new_prefix())
    modes: list[str] = []
    source = RedisClaimSource(store=stack.store, dispatch=dispatch, clock=stack.clock,
                              worker_id="w2", probe_seconds=1, on_mode=modes.append)
    source.start(lambda _q: None)
    now = stack.clock.now()
    job = await add_job(stack.store, "j", now=now)
    await stack.store.occurrence_insert(OccurrenceInsertParams(occurrences=[
        new_occurrence(job, now)], now=now))
    server = PrivateRedis(port)
    try:
        (claimed,) = (await source.claim("default", 8, now)).claims  # Redis is not there
        assert (source.mode, modes) == (DEGRADED, [DEGRADED])
        assert claimed.job.id == job.id
        await server.start()
        while source.mode != REDIS:  # the probe runs on the FakeClock
            stack.clock.advance(1)
            await asyncio.sleep(0.01)
        assert modes == [DEGRADED, REDIS]
        # The key reaches Redis after the SQL path ran it: the store calls it gone, and
        # the entry is acked, not run twice.
        await complete(stack.store, now, completion(claimed))
        await settled(source, claimed, completion(claimed))
        await dispatch.due_add(DueAddParams([DueItem("default", occurrence_key(job.id, now),
                                                     to_ms(now))]))
        await dispatch.due_promote(DuePromoteParams("default"))
        assert (await source.claim("default", 8, now)).claims == []
        await source.stop()
        assert (await dispatch.queue_stats(QueueStatsParams("default"))).pending == 0
    finally:
        await source.stop()
        await dispatch.close()
        await server.kill()


async def test_a_retried_run_is_armed_again_and_runs_its_next_attempt(stack: Stack) -> None:
    at = stack.clock.now()
    await stack.client.create_job({
        "name": "refused", "schedule": {"at": rfc3339(at)}, "kind": "http",
        "payload": {"url": "http://127.0.0.1:9/"}, "retry": {"max_attempts": 1}})
    await stack.planner.run_once(stack.clock.now())
    assert (await stack.redis.promoter.run_once()).moved == 1
    stack.start()
    (dead,) = await stack.completed(1)
    assert (dead.attempt, dead.state) == (1, S.DEAD)
    stack.clock.advance(1)
    retried = await stack.client.retry_run("refused", at, actor="ops")
    assert retried.state is S.RETRYING
    assert await stack.dispatch.due_count(DueCountParams("default")) == 1  # armed again
    assert (await stack.redis.promoter.run_once()).moved == 1
    (again,) = await stack.completed(1)
    assert (again.attempt, again.state) == (2, S.DEAD)


async def test_a_rescued_attempt_still_running_here_does_not_swallow_its_retry(
        stack: Stack) -> None:
    # This worker stalled past its lease: the store rescued attempt 1, and the retry is
    # delivered to this same worker while attempt 1 still runs here. The delivery is put off,
    # not acked; once the pool drops attempt 1, the retry is claimed.
    now = stack.clock.now()
    job = await add_job(stack.store, "stalled", now=now)
    await stack.store.occurrence_insert(OccurrenceInsertParams(occurrences=[
        new_occurrence(job, now)], now=now))
    await put(stack, job.id, now, due=now)
    (first,) = (await stack.source.claim("default", 8, now)).claims
    [rescued] = await stack.store.occurrence_rescue(OccurrenceRescueParams(
        now=now, all_but_worker="another-worker"))
    assert (rescued.attempt, rescued.state) == (1, S.RETRYING)

    await put(stack, job.id, now, due=now)  # the retry, delivered while attempt 1 runs here
    assert (await stack.source.claim("default", 8, now)).claims == []
    key = due_member(stack.dispatch, occurrence_key(job.id, now))
    assert await stack.dispatch.client.zscore(stack.dispatch.keys.due("default"), key) is not None

    await stack.source.dropped(first)  # the pool's heartbeat found attempt 1 gone
    await put(stack, job.id, now, due=now)
    (second,) = (await stack.source.claim("default", 8, now)).claims
    assert second.occurrence.attempt == 2
    await stack.source.dropped(first)  # attempt 1 again: attempt 2's delivery stays held
    await stack.source.stop()
    assert (await stack.dispatch.queue_stats(QueueStatsParams("default"))).pending == 1
