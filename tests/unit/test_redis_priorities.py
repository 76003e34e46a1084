"""Queue priorities in degraded mode: with Redis unreachable, a worker claims its queues of
higher priority first (``worker/priorities.py``), against PostgreSQL and an address where no
Redis listens."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from test_redis_worker import Stack, stack

from tickwork.drivers.base import Completion, OccurrenceInsertParams
from tickwork.drivers.redis.dispatch import RedisDispatch
from tickwork.testing import ledger
from tickwork.testing import redis as rt
from tickwork.testing.factories import add_job, new_occurrence
from tickwork.testing.faults.redisserver import free_port
from tickwork.testing.harness import make_executors
from tickwork.worker.pool import WorkerPool
from tickwork.worker.redis_source import DEGRADED, RedisClaimSource

__all__ = ["stack"]  # the fixture, shared with test_redis_worker.py


def unreachable() -> RedisDispatch:
    return RedisDispatch.from_url(f"redis://127.0.0.1:{free_port()}/0", prefix=rt.new_prefix())


async def test_a_worker_runs_its_critical_queue_before_its_default_one(
        stack: Stack, tmp_path: Path) -> None:
    """A pool of one slot per queue, three critical runs and one default run due, Redis down:
    the default run starts only after the last critical one has started."""
    path = tmp_path / "ledger.jsonl"
    dispatch = unreachable()
    source = RedisClaimSource(store=stack.store, dispatch=dispatch, clock=stack.clock,
                              worker_id="w3", priorities={"critical": 10, "default": 0})
    pool = WorkerPool(store=stack.store, clock=stack.clock, executors=make_executors(),
                      queues=(("critical", 1), ("default", 1)), worker_id="w3",
                      lease_seconds=30, heartbeat_seconds=10, shutdown_grace_seconds=5,
                      rng=random.Random(7), source=source)
    written: asyncio.Queue[tuple[Completion, bool]] = asyncio.Queue()
    pool.completer.on_written = lambda c, ok: written.put_nowait((c, ok))
    now = stack.clock.now()
    payload = {"callable": "tickwork.testing.ledger:record",
               "kwargs": {"path": str(path), "sleep": 0.2}}  # the job's own run time
    for name, queue in (("d-0", "default"), ("c-0", "critical"), ("c-1", "critical"),
                        ("c-2", "critical")):
        job = await add_job(stack.store, name, now=now, queue=queue, kind="python",
                            payload=payload)
        await stack.store.occurrence_insert(OccurrenceInsertParams(
            occurrences=[new_occurrence(job, now)], now=now))
    pool.start()
    try:
        for _ in range(4):
            _, ok = await asyncio.wait_for(written.get(), 15)
            assert ok
        assert source.mode == DEGRADED
    finally:
        await pool.stop(grace_seconds=0)
        for executor in pool.executors.values():
            await executor.close()
        await dispatch.close()
    started = {line["job"]: line["started"] for line in ledger.read(path)}
    assert sorted(started) == ["c-0", "c-1", "c-2", "d-0"]
    assert started["d-0"] >= max(started[c] for c in ("c-0", "c-1", "c-2"))


async def test_degraded_mode_serves_the_higher_priority_queue_first(stack: Stack) -> None:
    """Redis unreachable: the default queue claims nothing until the critical queue, of higher
    priority, has claimed everything due; then it is woken and claims."""
    dispatch = unreachable()
    source = RedisClaimSource(store=stack.store, dispatch=dispatch, clock=stack.clock,
                              worker_id="w2", priorities={"critical": 10, "default": 0})
    woken: list[str] = []
    source.start(woken.append)
    now = stack.clock.now()
    for queue in ("critical", "default"):
        for i in range(3):
            job = await add_job(stack.store, f"{queue}-{i}", now=now, queue=queue)
            await stack.store.occurrence_insert(OccurrenceInsertParams(
                occurrences=[new_occurrence(job, now)], now=now))
    try:
        assert (await source.claim("default", 2, now)).claims == []  # critical goes first
        assert source.mode == DEGRADED
        assert await source.idle_seconds("default", now) == source.probe_seconds
        assert len((await source.claim("critical", 2, now)).claims) == 2  # maybe more due
        assert (await source.claim("default", 2, now)).claims == []
        assert woken == []
        assert len((await source.claim("critical", 2, now)).claims) == 1  # caught up
        assert woken == ["default"]
        default = (await source.claim("default", 2, now)).claims
        assert len(default) == 2
        assert {c.occurrence.queue for c in default} == {"default"}
    finally:
        await source.stop()
        await dispatch.close()


async def test_a_busy_higher_queue_with_nothing_due_does_not_hold_lower_ones(
        stack: Stack) -> None:
    """Critical filled its slots with all it had: the store says nothing more is due there,
    so the default queue claims without waiting for critical's slots to free."""
    dispatch = unreachable()
    source = RedisClaimSource(store=stack.store, dispatch=dispatch, clock=stack.clock,
                              worker_id="w2", priorities={"critical": 10, "default": 0})
    source.start(lambda _q: None)
    now = stack.clock.now()
    for i, queue in enumerate(("critical", "critical", "default")):
        job = await add_job(stack.store, f"job-{i}", now=now, queue=queue)
        await stack.store.occurrence_insert(OccurrenceInsertParams(
            occurrences=[new_occurrence(job, now)], now=now))
    try:
        assert len((await source.claim("critical", 2, now)).claims) == 2  # Redis is down
        assert source.mode == DEGRADED
        (claim,) = (await source.claim("default", 2, now)).claims
        assert claim.occurrence.queue == "default"
    finally:
        await source.stop()
        await dispatch.close()


async def test_without_priorities_degraded_queues_do_not_wait(stack: Stack) -> None:
    dispatch = unreachable()
    source = RedisClaimSource(store=stack.store, dispatch=dispatch, clock=stack.clock,
                              worker_id="w2", priorities={"critical": 0, "default": 0})
    source.start(lambda _q: None)
    now = stack.clock.now()
    for queue in ("critical", "default"):
        job = await add_job(stack.store, f"{queue}-job", now=now, queue=queue)
        await stack.store.occurrence_insert(OccurrenceInsertParams(
            occurrences=[new_occurrence(job, now)], now=now))
    try:
        assert len((await source.claim("default", 2, now)).claims) == 1
        assert len((await source.claim("critical", 2, now)).claims) == 1
    finally:
        await source.stop()
        await dispatch.close()
