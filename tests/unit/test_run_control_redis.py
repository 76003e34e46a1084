"""Cancel on PostgreSQL + Redis: a cancelled waiting run never starts though its key is in the
due set or the stream, a cancelled running one is stopped by its worker and ends
``cancelled``, and every entry of both is acked (nothing stays pending in the stream)."""

from __future__ import annotations

import asyncio
import threading

from test_redis_worker import Stack, record, stack  # noqa: F401  (stack: a fixture)

from tickwork.drivers.dispatch import QueueStatsParams
from tickwork.models import OccurrenceState, rfc3339
from tickwork.testing import ledger
from tickwork.testing.jobs import EVENTS

S = OccurrenceState


async def test_cancelled_waiting_runs_never_start_and_a_running_one_is_stopped(
        stack: Stack) -> None:  # noqa: F811
    name = "cancel-redis"
    EVENTS[f"{name}:started"] = threading.Event()
    EVENTS[name] = threading.Event()
    stack.client.on_cancel = stack.pool.heartbeat_soon
    path = stack.tmp / "ledger.jsonl"
    at = stack.clock.now()
    await stack.client.create_jobs([
        record("in-due-set", path, at), record("in-stream", path, at),
        {"name": "hangs", "schedule": {"at": rfc3339(at)}, "kind": "python",
         "payload": {"callable": "tickwork.testing.jobs:wait_forever", "args": [name]},
         "timeout_seconds": 300}])
    assert (await stack.planner.run_once(at))[0] == 3
    await stack.client.cancel_run("in-due-set", at, actor="alice")  # its key is due
    assert (await stack.redis.promoter.run_once()).moved == 3
    await stack.client.cancel_run("in-stream", at, actor="alice")  # its entry is ready
    stats = await stack.dispatch.queue_stats(QueueStatsParams("default"))
    assert (stats.due, stats.ready) == (0, 3)

    stack.start()
    assert await asyncio.to_thread(EVENTS[f"{name}:started"].wait, 10)
    [task] = [r.task for q in stack.pool.queues.values() for r in q.running.values()]
    run = await stack.client.cancel_run("hangs", at, actor="alice")
    assert (run.state, run.last_error) == (S.CANCELLED, "cancelled by alice")
    assert await asyncio.to_thread(EVENTS[name].wait, 10)  # the coroutine was cancelled
    await asyncio.gather(task, return_exceptions=True)
    assert stack.pool.running_count == 0
    await stack.stop()  # flushes the batched acks

    stats = await stack.dispatch.queue_stats(QueueStatsParams("default"))
    assert (stats.due, stats.ready, stats.pending) == (0, 0, 0)
    assert ledger.read(path) == []  # neither waiting run started
    for job in ("in-due-set", "in-stream"):
        waited, attempts = await stack.client.get_run(job, at)
        assert (waited.state, waited.attempt, waited.last_error, attempts) == (
            S.CANCELLED, 0, "cancelled by alice", [])
    ran, attempts = await stack.client.get_run("hangs", at)
    assert (ran.state, ran.last_error) == (S.CANCELLED, "cancelled by alice")
    assert [(a.number, a.error) for a in attempts] == [(1, "cancelled by alice")]
