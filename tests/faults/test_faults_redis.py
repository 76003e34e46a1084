"""Fault suite, Redis (the postgres + redis deployment): Redis flushed, restarted without
persistence, hung, or cut off from one worker by a blackhole, and a worker killed right after
it acked. PostgreSQL decides and Redis only delivers, so none of these may lose an occurrence.

One scheduler and two workers share the test's PostgreSQL database and a private Redis
deployment (``tickwork.testing.faults.redistopology``; the shared Redis is never flushed or
stopped): one ``redis-server``, and, with the same test bodies, a Redis Cluster (3 masters, a
replica each) and a Sentinel set-up (a master, a replica, 3 sentinels). Jobs tick every second,
a burst of short one-offs lands near the fault, and every execution is judged from the ledger
the jobs write. A fault that loses Redis' data (FLUSHALL, a restart) may rerun only what was in
flight at that instant; Redis hung or cut off must run nothing twice: the workers switch to
claiming from PostgreSQL (degraded mode) and back. On a cluster and on Sentinel, a hung master
is replaced by its replica within seconds (node timeout, ``down-after`` 1 s): the workers come
back on the promoted replica, before the old master resumes, and still nothing runs twice.

The blackhole cut-off runs on the single server only: a proxy in front of one node does not
cut off a cluster client, which connects to the node addresses the cluster announces (CLUSTER
SLOTS, MOVED), nor a Sentinel client, which connects to the master address the sentinels give.

CI-sized by default: every case on the single server (Redis hung for the full 30 s even so),
FLUSHALL on a cluster (the data of every master gone) and the after_ack failpoint on Sentinel
(entries of a killed worker reclaimed through the master the sentinels name).
TICKWORK_FAULTS_FULL=1 runs every case on every deployment, with longer
windows, more jobs and a longer cut-off.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tickwork.models import rfc3339
from tickwork.testing.faults import redisserver, redistopology
from tickwork.testing.faults.classify import Execution, in_flight
from tickwork.testing.faults.procs import Proc
from tickwork.testing.faults.proxy import BlackholeProxy
from tickwork.testing.faults.redisserver import PrivateRedis
from tickwork.testing.faults.redistopology import Deployment
from tickwork.testing.faults.run import FaultRun, full, next_second, until_then

pytestmark = [pytest.mark.faults, pytest.mark.timeout(150 if full() else 90)]

TICKS = 20 if full() else 8  # jobs ticking every second
BURST = 1000 if full() else 150  # one-offs due in one second near the fault
OUTAGE = 30  # seconds Redis stays hung (the whole 30 s in CI too)
CUT = 20 if full() else 8  # seconds one worker stays cut off
AFTER = 8  # seconds of ticks after a fault
# What a worker's Redis client waits for a reply (RedisDispatch.from_url: a blocking read's
# 1 s plus 1 s, at least 2 s), and how often a degraded worker probes Redis.
SOCKET_TIMEOUT = 2.0
PROBE = 3.0
DEGRADED = "DEGRADED MODE"
BACK = "leaving degraded mode"
LOST = "Redis lost its data"
REBUILT = r"reconciled \(epoch\): \d+ waiting in the store, (\d+) re-added"


redis = redisserver.private_redis
target = redistopology.redis_topology
LOSSES = ("FLUSHALL", "restart without persistence")
TOPOLOGIES = ("server", "cluster", "sentinel")
# CI: every case on one server; FLUSHALL on a cluster and after_ack on Sentinel.
MORE = TOPOLOGIES if full() else ("server",)
ACK_ON = TOPOLOGIES if full() else ("server", "sentinel")


def on(*topologies: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("target", topologies, indirect=True)


def workload(run: FaultRun, t0: datetime, window: float, burst_at: datetime
             ) -> list[dict[str, Any]]:
    """``TICKS`` jobs every second for ``window`` seconds from ``t0`` (allow_all: the test asks
    for delivery, not overlap handling), and ``BURST`` one-offs due at ``burst_at``."""
    schedule = {"cron": "* * * * * *", "start_at": rfc3339(t0),
                "end_at": rfc3339(t0 + timedelta(seconds=window - 0.5))}
    ticks = [run.doc(f"tick-{i:02d}", schedule, sleep=0.3, overlap="allow_all",
                     timeout_seconds=2) for i in range(TICKS)]
    once = [run.doc(f"once-{i:04d}", {"at": rfc3339(burst_at)}, sleep=0.1, timeout_seconds=2)
            for i in range(BURST)]
    return ticks + once


async def deploy(run: FaultRun, *, w1_redis: str | None = None,
                 w1_failpoints: str = "") -> tuple[Proc, Proc, Proc]:
    s1 = run.scheduler("s1")
    w1 = run.worker("w1", "default:16", redis=w1_redis, failpoints=w1_failpoints)
    w2 = run.worker("w2", "default:16")
    await run.start(s1, w1, w2)
    assert all("dispatch redis" in " ".join(p.lines) for p in (s1, w1, w2))
    return s1, w1, w2


async def logged(run: FaultRun, proc: Proc, pattern: str, after: float, within: float) -> float:
    """Seconds from ``after`` until ``proc`` logged ``pattern``."""
    await run.settle(lambda: proc.seen_at(pattern, after) is not None, within=within,
                     what=f"{pattern!r} from {proc.name}")
    at = proc.seen_at(pattern, after)
    assert at is not None
    return at - after


async def finish(run: FaultRun, *procs: Proc, within: float) -> None:
    await run.settle(run.all_settled, within=within)
    codes = await asyncio.gather(*(run.stop_cleanly(p) for p in procs if p.running))
    assert codes == [0] * len(codes), "every process stops cleanly"


def reruns(executions: list[Execution]) -> list[Execution]:
    """Every execution after the first of its occurrence."""
    seen: set[str] = set()
    out = []
    for e in sorted(executions, key=lambda e: e.started):
        if e.occurrence in seen:
            out.append(e)
        seen.add(e.occurrence)
    return out


@pytest.mark.parametrize(("target", "loss"), [
    (t, loss) for t in TOPOLOGIES for loss in LOSSES
    if t in MORE or (t == "cluster" and loss == "FLUSHALL")],
    indirect=["target"])
async def test_redis_loses_its_data_mid_run(tmp_path: Path, postgres_url: str,
                                            target: Deployment, loss: str) -> None:
    async with FaultRun(tmp_path, postgres_url, name=f"Redis ({target.name}) {loss}",
                        redis=target.url) as run:
        s1, w1, w2 = await deploy(run)
        t0 = next_second(after=2)
        fault_in = 3 + run.rng.uniform(-0.5, 1.5)  # around the burst, which lands at t0 + 3
        window = fault_in + AFTER
        jobs = await run.create(workload(run, t0, window, t0 + timedelta(seconds=3)))
        run.expect(jobs, t0, t0 + timedelta(seconds=window))
        await run.pause(until_then(t0) + fault_in)
        at = await (target.flushall() if loss == "FLUSHALL" else target.restart())
        fault = run.record_outage(loss, at, time.time())  # until it serves again
        noticed = await logged(run, s1, LOST, at, within=10)
        rebuilt = await logged(run, s1, REBUILT, at, within=15)
        (readded,) = [int(m[1]) for t, line in zip(s1.stamps, s1.lines, strict=True)
                      if t >= at and (m := re.search(REBUILT, line))][:1]
        await finish(run, s1, w1, w2, within=window + 30)
        report = await run.check()
    in_flight_then = in_flight(run.executions(), fault)
    assert readded, "the loss took due keys with it, which the reconciler put back"
    print(f"  the reconciler noticed after {noticed:.2f}s and re-added {readded} keys after "
          f"{rebuilt:.2f}s;"
          f" {len(in_flight_then)} executions in flight at the fault, "
          f"{len(report.explained)} ran again")
    for again in reruns(run.executions()):
        first = min((e for e in run.executions() if e.occurrence == again.occurrence),
                    key=lambda e: e.started)
        assert first in in_flight_then, f"{again.occurrence} ran again, not in flight then"
        assert (again.key, again.attempt > first.attempt) == (first.key, True), \
            "a rerun has the same idempotency key and a new attempt number"


@on(*MORE)
@pytest.mark.timeout(150)
async def test_redis_hung_workers_go_degraded_and_run_nothing_twice(
        tmp_path: Path, postgres_url: str, target: Deployment) -> None:
    async with FaultRun(tmp_path, postgres_url, name=f"Redis ({target.name}) SIGSTOP {OUTAGE}s",
                        redis=target.url) as run:
        s1, w1, w2 = await deploy(run)
        t0 = next_second(after=2)
        fault_in = run.rng.uniform(2, 4)
        window = fault_in + OUTAGE + AFTER
        # The burst comes while Redis is hung: only the store's claims can run it.
        jobs = await run.create(workload(run, t0, window,
                                         t0 + timedelta(seconds=round(fault_in) + 4)))
        run.expect(jobs, t0, t0 + timedelta(seconds=window))
        await run.pause(until_then(t0) + fault_in)
        node, at = await target.hang()
        assert node.proc is not None
        run.record_outside(f"SIGSTOP {OUTAGE}s", f"redis-server :{node.port}", node.proc.pid,
                           at)
        await run.pause(at + OUTAGE - time.time())
        resumed = node.resume()
        # A cluster's client retries a timed-out command on the promoted replica, so there a
        # worker may never go degraded; one that did is back before the resume, or after it.
        went = [w.seen_at(DEGRADED, at) for w in (w1, w2)]
        came = [None if g is None else g + await logged(
            run, w, BACK, g, within=PROBE + SOCKET_TIMEOUT + 5)
            for w, g in zip((w1, w2), went, strict=True)]
        await finish(run, s1, w1, w2, within=window + 30)
        serving = await target.master()  # asked late: a resumed old master learns it lost
        report = await run.check(explained_budget=0)
    during = {w: [e for e in run.executions() if e.worker == w and g is not None
                  and c is not None and g < e.started < c]
              for w, g, c in zip(("w1", "w2"), went, came, strict=True)}
    failover = f"its replica :{serving.port} took over" if serving is not node else "no failover"
    print(f"  {failover}; degraded after "
          f"{', '.join('never' if g is None else f'{g - at:.2f}s' for g in went)}; back to "
          f"Redis {', '.join(f'{c - resumed:+.2f}s' for c in came if c is not None)} from its "
          f"resume; {', '.join(f'{w} ran {len(d)}' for w, d in during.items())} from the "
          f"store meanwhile")
    assert report.explained == [], "nothing ran twice across the mode switches"
    if serving is node:
        degraded = [g - at for g in went if g is not None]
        assert len(degraded) == 2, "both workers went degraded"
        assert max(degraded) <= SOCKET_TIMEOUT + 3, "a hung Redis is noticed within its timeout"
        assert min(c for c in came if c is not None) >= resumed, \
            "no worker reads from Redis while it is hung"
        assert all(during.values()), "both workers ran jobs from the store"


async def test_a_worker_cut_off_from_redis_keeps_working_from_the_store(
        tmp_path: Path, postgres_url: str, redis: PrivateRedis) -> None:
    proxy = await BlackholeProxy(redis.port).start()
    try:
        async with FaultRun(tmp_path, postgres_url, name=f"blackhole w1-Redis {CUT}s",
                            redis=redis.url) as run:
            s1, w1, w2 = await deploy(run, w1_redis=proxy.url)
            t0 = next_second(after=2)
            fault_in = run.rng.uniform(2, 4)
            window = fault_in + CUT + AFTER
            jobs = await run.create(workload(run, t0, window,
                                             t0 + timedelta(seconds=round(fault_in) + 3)))
            run.expect(jobs, t0, t0 + timedelta(seconds=window))
            await run.pause(until_then(t0) + fault_in)
            at = proxy.blackhole()
            run.record_outside(f"blackhole {CUT}s", "the proxy between w1 and Redis",
                               os.getpid(), at)
            degraded = await logged(run, w1, DEGRADED, at, within=SOCKET_TIMEOUT + 8)
            await run.pause(at + CUT - time.time())
            healed, forwarded = proxy.heal(), proxy.forwarded
            back = await logged(run, w1, BACK, healed, within=PROBE + SOCKET_TIMEOUT + 5)
            await finish(run, s1, w1, w2, within=window + 30)
            report = await run.check(explained_budget=0)
    finally:
        await proxy.close()
    executions = run.executions()
    during = [e for e in executions if e.worker == "w1" and at + degraded < e.started < healed]
    print(f"  w1 degraded {degraded:.2f}s after the cut, ran {len(during)} jobs from the store "
          f"while cut off, and read from Redis again {back:.2f}s after the heal")
    assert report.explained == [], "nothing ran twice"
    assert degraded <= SOCKET_TIMEOUT + 3, "the cut is noticed within the socket timeout"
    assert during, "the cut-off worker kept executing through PostgreSQL"
    assert not any(DEGRADED in line for line in w2.lines), "w2 never lost Redis"
    assert proxy.forwarded > forwarded, "w1 talks to Redis again after the heal"


@on(*ACK_ON)
async def test_failpoint_after_ack_kills_the_worker(tmp_path: Path, postgres_url: str,
                                                    target: Deployment) -> None:
    async with FaultRun(tmp_path, postgres_url, name=f"failpoint after_ack ({target.name})",
                        redis=target.url) as run:
        hit = run.rng.randint(8, 20)  # some acked work first
        s1, w1, w2 = await deploy(run, w1_failpoints=f"after_ack=kill@{hit}")
        t0 = next_second(after=2)
        window = 4 + AFTER
        jobs = await run.create(workload(run, t0, window, t0 + timedelta(seconds=2)))
        run.expect(jobs, t0, t0 + timedelta(seconds=window))
        await w1.wait_for(r"failpoint after_ack hit \d+: killing process", within=window + 10)
        await finish(run, s1, w2, within=window + 30)
        report = await run.check()
    (fault,) = run.faults
    assert fault.kind == "failpoint after_ack"
    cut_off = in_flight(run.executions(), fault)
    acked_before = [e for e in run.executions() if e.worker == "w1" and e not in cut_off]
    print(f"  w1 died at its ack batch {hit}: {len(acked_before)} executions finished before, "
          f"{len(cut_off)} in flight, {len(report.explained)} ran again")
    assert acked_before, "w1 had completed and acked work before it died"
    for again in reruns(run.executions()):
        first = min((e for e in run.executions() if e.occurrence == again.occurrence),
                    key=lambda e: e.started)
        assert first in cut_off, f"{again.occurrence}: finished on w1, yet ran again"
