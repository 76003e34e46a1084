"""Fault suite, Redis Cluster and Sentinel: a master killed with ``kill -9`` mid-run while its
replica takes over (the cluster's own failover; Sentinel's). PostgreSQL decides and Redis only
delivers, so nothing may be lost: while the slot (or the master) has no master, workers claim
from the store (degraded mode) and the scheduler's promoter waits; after the promotion both go
back to Redis, and what ran twice is only what was in flight at the kill.

One scheduler and two workers share the test's PostgreSQL database and a private deployment
(``tickwork.testing.faults.rediscluster``: 3 masters with a replica each;
``tickwork.testing.faults.redissentinel``: a master, a replica and 3 sentinels). Jobs tick
every second and a burst of one-offs lands near the kill, as in test_faults_redis.py.
CI-sized by default; TICKWORK_FAULTS_FULL=1 runs more jobs and longer windows. The faults
every deployment has (flushed, restarted empty, hung, the after_ack failpoint) run on a
cluster and on Sentinel in test_faults_redis.py.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tickwork.drivers.dispatch import (
    DueAddParams,
    DueItem,
    DuePromoteParams,
    EntryAckParams,
    EntryReadParams,
    QueueStatsParams,
)
from tickwork.drivers.redis import RedisDispatch
from tickwork.drivers.redis.keys import Keyspace
from tickwork.errors import DispatchUnavailable
from tickwork.models import rfc3339
from tickwork.testing.faults import rediscluster, redissentinel
from tickwork.testing.faults.classify import Execution, in_flight
from tickwork.testing.faults.procs import Proc
from tickwork.testing.faults.rediscluster import PrivateCluster
from tickwork.testing.faults.redissentinel import PrivateSentinel
from tickwork.testing.faults.run import FaultRun, full, next_second, until_then
from tickwork.testing.redis import new_prefix

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180 if full() else 120)]

TICKS = 20 if full() else 6  # jobs ticking every second
BURST = 1000 if full() else 120  # one-offs due in one second near the kill
AFTER = 10  # seconds of ticks after the kill
PROMOTED_WITHIN = 30.0
SHARD_DOWN = 4.0  # seconds a whole shard stays down
DEGRADED = "DEGRADED MODE"
REBUILT = r"queue default reconciled \((epoch|outage|nogroup|empty)\): \d+ waiting in the store"
BACK = "leaving degraded mode"
DUE_KEY = Keyspace().due("default")  # the processes' default prefix and queue

cluster = rediscluster.private_cluster
sentinel = redissentinel.private_sentinel


def workload(run: FaultRun, t0: datetime, window: float, burst_at: datetime
             ) -> list[dict[str, Any]]:
    schedule = {"cron": "* * * * * *", "start_at": rfc3339(t0),
                "end_at": rfc3339(t0 + timedelta(seconds=window - 0.5))}
    ticks = [run.doc(f"tick-{i:02d}", schedule, sleep=0.3, overlap="allow_all",
                     timeout_seconds=2) for i in range(TICKS)]
    once = [run.doc(f"once-{i:04d}", {"at": rfc3339(burst_at)}, sleep=0.1, timeout_seconds=2)
            for i in range(BURST)]
    return ticks + once


async def deploy(run: FaultRun) -> tuple[Proc, Proc, Proc]:
    s1, w1, w2 = run.scheduler("s1"), run.worker("w1", "default:16"), run.worker("w2",
                                                                                  "default:16")
    await run.start(s1, w1, w2)
    assert all("dispatch redis" in " ".join(p.lines) for p in (s1, w1, w2))
    return s1, w1, w2


def reruns(executions: list[Execution]) -> list[Execution]:
    seen: set[str] = set()
    out = []
    for e in sorted(executions, key=lambda e: e.started):
        if e.occurrence in seen:
            out.append(e)
        seen.add(e.occurrence)
    return out


async def kill_master_mid_run(run: FaultRun, kill: Any, promoted: Any) -> tuple[float, float]:
    """The whole run around one kill: returns (seconds to promotion, ticks after)."""
    s1, w1, w2 = await deploy(run)
    t0 = next_second(after=2)
    kill_in = 3 + run.rng.uniform(-0.5, 1.5)  # around the burst, which lands at t0 + 3
    window = kill_in + AFTER
    jobs = await run.create(workload(run, t0, window, t0 + timedelta(seconds=3)))
    run.expect(jobs, t0, t0 + timedelta(seconds=window))
    await run.pause(until_then(t0) + kill_in)
    node, at = await kill()
    assert node.proc is not None
    fault = run.record_outside("kill -9 master", f"redis-server :{node.port}", node.proc.pid,
                               at)
    took = await promoted(node) - at
    await run.settle(run.all_settled, within=window + 40)
    codes = await asyncio.gather(*(run.stop_cleanly(p) for p in (s1, w1, w2) if p.running))
    assert codes == [0] * len(codes), "every process stops cleanly"
    report = await run.check()
    for w in (w1, w2):
        went = w.seen_at(DEGRADED, at)
        assert went is None or w.seen_at(BACK, went) is not None, \
            f"{w.name} went degraded at the kill and read from Redis again after the promotion"
    degraded = [w.name for w in (w1, w2) if w.seen_at(DEGRADED, at) is not None]
    cut_off = in_flight(run.executions(), fault)
    again = reruns(run.executions())
    print(f"  replica promoted {took:.2f}s after the kill; degraded meanwhile: "
          f"{', '.join(degraded) or 'none'}; {len(cut_off)} executions in flight, "
          f"{len(again)} ran again, {len(report.explained)} explained")
    for e in again:
        first = min((x for x in run.executions() if x.occurrence == e.occurrence),
                    key=lambda x: x.started)
        assert first in cut_off, f"{e.occurrence} ran again, not in flight at the kill"
    return took, time.time() - at


async def test_cluster_master_killed_its_replica_takes_over(
        tmp_path: Path, postgres_url: str, cluster: PrivateCluster) -> None:
    async with FaultRun(tmp_path, postgres_url, name="cluster: kill -9 a master",
                        redis=cluster.url) as run:

        async def kill() -> Any:
            return await cluster.kill_master_of(DUE_KEY)

        async def promoted(old: Any) -> float:
            return await cluster.wait_promoted(DUE_KEY, old, within=PROMOTED_WITHIN)

        took, _ = await kill_master_mid_run(run, kill, promoted)
    assert took < PROMOTED_WITHIN


async def test_cluster_shard_lost_whole_the_reconciler_rebuilds_it(
        tmp_path: Path, postgres_url: str, cluster: PrivateCluster) -> None:
    """The master owning the queue and its replica die together and come back empty: the
    cluster is down meanwhile (every process degraded), and after it the queue's keys are
    gone. The reconciler re-adds the store's waiting occurrences; nothing is lost."""
    async with FaultRun(tmp_path, postgres_url, name="cluster: a whole shard restarted empty",
                        redis=cluster.url) as run:
        s1 = run.scheduler("s1")
        w1, w2 = run.worker("w1", "default:16"), run.worker("w2", "default:16")
        await run.start(s1, w1, w2)
        t0 = next_second(after=2)
        kill_in = 3 + run.rng.uniform(-0.5, 1.0)
        window = kill_in + SHARD_DOWN + AFTER
        # The burst is due while the shard is down: only the store knows of it then.
        jobs = await run.create(workload(run, t0, window, t0 + timedelta(
            seconds=round(kill_in) + 1)))
        run.expect(jobs, t0, t0 + timedelta(seconds=window))
        await run.pause(until_then(t0) + kill_in)
        shard, at = await cluster.kill_shard_of(DUE_KEY)
        run.record_outage("kill -9 a master and its replica", at, at + SHARD_DOWN)
        await run.pause(at + SHARD_DOWN - time.time())
        healthy = await cluster.restart(shard)
        await run.settle(lambda: s1.seen_at(REBUILT, at) is not None, within=30,
                         what="the reconciler's rebuild of the queue")
        await run.settle(run.all_settled, within=window + 40)
        codes = await asyncio.gather(*(run.stop_cleanly(p) for p in (s1, w1, w2) if p.running))
        assert codes == [0] * len(codes), "every process stops cleanly"
        report = await run.check()
    rebuilt = [line for t, line in zip(s1.stamps, s1.lines, strict=True)
               if t >= at and re.search(REBUILT, line)]
    print(f"  cluster healthy {healthy - at:.2f}s after the kill; {rebuilt[0].strip()}; "
          f"{len(report.explained)} explained duplicates")
    assert all(w.seen_at(DEGRADED, at) is not None for w in (w1, w2)), \
        "with the cluster down, both workers claimed from the store"


async def test_sentinel_master_killed_the_replica_is_promoted(
        tmp_path: Path, postgres_url: str, sentinel: PrivateSentinel) -> None:
    async with FaultRun(tmp_path, postgres_url, name="sentinel: kill -9 the master",
                        redis=sentinel.url) as run:
        took, _ = await kill_master_mid_run(
            run, sentinel.kill_master,
            lambda old: sentinel.wait_promoted(old, within=PROMOTED_WITHIN))
    assert took < PROMOTED_WITHIN


async def test_a_manual_cluster_failover_is_followed_with_nothing_lost(
        cluster: PrivateCluster) -> None:
    """CLUSTER FAILOVER on the replica (graceful: it catches up first) while a dispatch holds
    due keys, ready and pending entries: the client follows the new slot owner (MOVED), and
    every key is still where it was."""
    d = RedisDispatch.from_url(cluster.url, prefix=new_prefix())
    try:
        await d.check_settings()
        now = (await d.due_promote(DuePromoteParams("clock-probe"))).now_ms
        items = [DueItem("default", f"k{i}", now - 1) for i in range(30)]
        items += [DueItem("default", f"later{i}", now + 3_600_000) for i in range(5)]
        await d.due_add(DueAddParams(items))
        await d.due_promote(DuePromoteParams("default"))
        held = (await d.entry_read(EntryReadParams("default", "c1", 10))).entries
        before = await d.queue_stats(QueueStatsParams("default"))
        assert (before.due, before.ready, before.pending) == (5, 20, 10)
        master, replica, *_ = await cluster.shard_of(d.keys.due("default"))
        node = Redis(port=replica.port)
        try:
            assert await node.execute_command("CLUSTER", "FAILOVER")
        finally:
            await node.aclose()
        await cluster.wait_promoted(d.keys.due("default"), master, within=PROMOTED_WITHIN)
        deadline = time.monotonic() + 10
        while True:  # the first command after the switch may meet a stale connection
            try:
                after = await d.queue_stats(QueueStatsParams("default"))
                break
            except DispatchUnavailable:
                assert time.monotonic() < deadline, "the client never found the new master"
                await asyncio.sleep(0.1)
        # The group's lag is not known on a promoted replica, so "ready" may read as the
        # stream's length; what was delivered and what was not is kept, as the read shows.
        assert (after.due, after.pending) == (5, 10)
        rest = (await d.entry_read(EntryReadParams("default", "c1", 100))).entries
        assert len(rest) == 20, "exactly the undelivered ones, none delivered twice"
        assert sorted(e.key for e in held + rest) == sorted(f"k{i}" for i in range(30))
        assert await d.entry_ack(EntryAckParams("default", held + rest)) == 30
    finally:
        await d.close()
