"""Fault suite, run control (PostgreSQL, and PostgreSQL + Redis): kill -9 of the worker during
a cancel.

The store decides a cancel: the run ends ``cancelled`` in the cancelling transaction, and the
rescuer only takes back runs still ``running``. So a worker killed while a cancel commits,
or right after it (before its next heartbeat), leaves the run cancelled (or succeeded, had it
finished first), never running; a new worker does not start it again. Judged from the
ledger the job writes and the store's final state. With Redis dispatch (a private
redis-server), the dead worker's stream entry is reclaimed by the new worker and acked, so
nothing stays pending in the stream. CI runs the Redis variant for the kill during the cancel
only (about 11 s): after the commit it adds nothing the PostgreSQL variant does not show.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from tickwork.drivers.dispatch import QueueStatsParams
from tickwork.drivers.redis.dispatch import RedisDispatch
from tickwork.errors import Conflict
from tickwork.models import rfc3339
from tickwork.testing.faults import ledger
from tickwork.testing.faults.redisserver import PrivateRedis
from tickwork.testing.faults.run import FAST, FaultRun, next_second

pytestmark = [pytest.mark.faults, pytest.mark.timeout(90)]

LEASE = float(FAST["TICKWORK_LEASE_SECONDS"]) + float(FAST["TICKWORK_RESCUE_INTERVAL_SECONDS"])

@pytest.fixture
async def redis(request: pytest.FixtureRequest) -> AsyncIterator[PrivateRedis | None]:
    """A private redis-server for the ``redis`` deployment; None for ``postgres``."""
    if request.param != "redis":
        yield None
        return
    server = await PrivateRedis().start()
    try:
        yield server
    finally:
        await server.kill()


@pytest.mark.parametrize(("redis", "when"), [
    ("postgres", "during"), ("postgres", "after_commit"), ("redis", "during")],
    indirect=["redis"])
async def test_kill_9_of_the_worker_during_a_cancel(
        tmp_path: Path, postgres_url: str, redis: PrivateRedis | None, when: str) -> None:
    deployment = "postgres + redis" if redis else "postgres"
    async with FaultRun(tmp_path, postgres_url, name=f"kill -9 worker, cancel {when}, "
                        f"{deployment}", redis=redis.url if redis else None) as run:
        s1, w1 = run.scheduler("s1"), run.worker("w1", "default:2")
        await run.start(s1, w1)
        if redis is not None:
            assert all("dispatch redis" in " ".join(p.lines) for p in (s1, w1))
        t0 = next_second(after=2)
        at = t0 + timedelta(seconds=1)
        [job] = await run.create([run.doc("long", {"at": rfc3339(at)}, sleep=8,
                                          timeout_seconds=30)])

        def running_on_w1() -> bool:
            return any(r.worker == "w1" and r.outcome is None for r in ledger.read(run.ledger))

        await run.settle(running_on_w1, within=15, what="the long job running on w1")
        await run.pause(run.rng.uniform(0, 1))
        client = await run.client()
        if when == "during":  # the kill lands while the cancel is in flight
            cancel = asyncio.create_task(client.cancel_run(job.id, at, actor="ops"))
            await run.pause(run.rng.uniform(0, 0.02))
            run.kill9(w1)
            ended = await asyncio.gather(cancel, return_exceptions=True)
            assert not isinstance(ended[0], BaseException) or isinstance(ended[0], Conflict)
        else:  # committed, then the worker dies before its next heartbeat learns of it
            await client.cancel_run(job.id, at, actor="ops")
            run.kill9(w1)
        cancelled_at = time.time()
        w2 = run.worker("w2", "default:2")
        await run.start(w2)

        async def state() -> str:
            return (await client.store.occurrence_get(job.id, at)).state.value

        async def ended() -> bool:
            return await state() in ("cancelled", "succeeded")

        took = await run.settle(ended, within=LEASE + 3, what="the run to end")
        assert took <= LEASE + 3
        await run.pause(LEASE * 2)  # a rescue pass and a new worker's claims: it stays ended
        final = await state()
        assert final in ("cancelled", "succeeded"), final
        assert await asyncio.gather(run.stop_cleanly(s1), run.stop_cleanly(w2)) == [0, 0]
    if redis is not None:  # w1's entry was reclaimed by w2 and acked (or acked by w1)
        dispatch = RedisDispatch.from_url(redis.url)
        try:
            stats = await dispatch.queue_stats(QueueStatsParams("default"))
            stream = dispatch.keys.stream("default", dispatch.keys.band_of(0))
            read = sum(g["entries-read"] or 0 for g in await dispatch.client.xinfo_groups(stream))
        finally:
            await dispatch.close()
        assert read >= 1, "the run went through the stream"
        assert (stats.ready, stats.pending) == (0, 0), stats
    starts = [r for r in ledger.read(run.ledger) if r.job_id == job.id]
    assert [(r.worker, r.attempt) for r in starts] == [("w1", 1)], "one start, on w1"
    assert all(r.started_mono + run.mono_offset < cancelled_at for r in starts), \
        "nothing started after the cancel"
