"""Fault suite, publish jobs (PostgreSQL deployment): a worker killed with ``kill -9`` in the
middle of publishing, and the broker killed and restarted. Neither may lose a message.

Delivery is at least once: a publish whose result died with its worker runs again with the
same idempotency key, so the consumer (``tickwork.bench.consumers``) dedupes by that key and
must count every expected occurrence. The broker is a private server on a port of its own
(the shared ones are never restarted): a redis-server with an append-only file synced on every
write, or a nats-server whose JetStream stores its streams in the test's directory, so what
either acknowledged survives its restart.

CI-sized by default; TICKWORK_FAULTS_FULL=1 runs longer windows and more jobs.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tickwork.bench.consumers import Consumer, NatsConsumer, RedisConsumer
from tickwork.drivers.base import OccurrenceListParams
from tickwork.models import Job, idempotency_key, rfc3339
from tickwork.schedules import compile_schedule
from tickwork.testing.faults.natsserver import PrivateNats
from tickwork.testing.faults.redisserver import PrivateRedis
from tickwork.testing.faults.run import (
    FINAL_STATES,
    FaultRun,
    expected_of,
    full,
    next_second,
    until_then,
)

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120 if full() else 90)]

WINDOW = 30 if full() else 8  # seconds of one-second ticks
JOBS = 20 if full() else 6  # publish jobs ticking every second
BROKER = "events"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[PrivateRedis]:
    """A private redis-server as the broker, durable across its own restart."""
    data = tmp_path / "broker"
    data.mkdir()
    server = await PrivateRedis(persist=data).start()
    try:
        yield server
    finally:
        await server.kill()


@pytest.fixture
async def consumer(broker: PrivateRedis) -> AsyncIterator[RedisConsumer]:
    found = RedisConsumer(broker.url)
    await found.start()
    try:
        yield found
    finally:
        await found.close()


def publish_ticks(consumer: Consumer, t0: datetime, **extra: Any) -> list[dict[str, Any]]:
    """``JOBS`` publish jobs every second for ``WINDOW`` seconds from ``t0``; allow_all, so a
    tick behind a killed one still runs."""
    schedule = {"cron": "* * * * * *", "start_at": rfc3339(t0),
                "end_at": rfc3339(t0 + timedelta(seconds=WINDOW - 0.5))}
    return [{"name": f"pub-{i:02d}", "schedule": schedule, "kind": "publish",
             "payload": {"broker": BROKER, **consumer.destination(), "body": {"n": i}},
             "overlap": "allow_all", "timeout_seconds": 2, **extra} for i in range(JOBS)]


def expected_keys(jobs: list[Job], t0: datetime) -> set[str]:
    keys = set()
    for job in jobs:
        schedule = compile_schedule(job.spec.schedule)
        t = schedule.first_at_or_after(t0)
        while t is not None and t <= t0 + timedelta(seconds=WINDOW):
            keys.add(idempotency_key(job.id, t))
            t = schedule.next_after(t)
    return keys


class Received:
    """What the consumer counted: each key once (the dedupe), and the copies beyond."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.keys: set[str] = set()
        self.copies = 0
        self.early = 0

    def read(self) -> None:
        """Take what the consumer received since the last read."""
        for e in self.consumer.drain():
            if e.key in self.keys:
                self.copies += 1
            self.keys.add(e.key)
            self.early += e.started < e.scheduled

    def has(self, expected: set[str]) -> Callable[[], bool]:
        def done() -> bool:
            self.read()
            return expected <= self.keys
        return done


def fault_run(tmp_path: Path, postgres_url: str, broker: PrivateRedis | PrivateNats,
              name: str) -> FaultRun:
    return FaultRun(tmp_path, postgres_url, name=name,
                    settings={"TICKWORK_BROKERS": json.dumps({BROKER: broker.url})})


def store_settled(run: FaultRun, runs: set[str]) -> Callable[[], Awaitable[bool]]:
    """Whether the store ended each of ``runs`` (occurrence ids) in a final state."""
    async def done() -> bool:
        states = await run.final_states()
        return all(states.get(o) in FINAL_STATES for o in runs)
    return done


async def retried(run: FaultRun, jobs: list[Job]) -> int:
    """How many runs of ``jobs`` took more than one attempt."""
    store = (await run.client()).store
    found = 0
    for job in jobs:
        page = await store.occurrence_list(OccurrenceListParams(job_id=job.id, limit=1000))
        found += sum(o.attempt > 1 for o in page)
    return found


async def assert_delivered(run: FaultRun, received: Received, expected: set[str],
                           runs: set[str]) -> None:
    """Every expected message arrived, none of another key, none early; the store ended
    every occurrence of the window ``succeeded``."""
    assert received.keys == expected, (
        f"seed {run.seed}: {len(expected - received.keys)} missing, "
        f"{len(received.keys - expected)} unexpected")
    assert received.early == 0
    states = await run.final_states()
    assert {o: states.get(o) for o in runs} == dict.fromkeys(runs, "succeeded")


async def test_kill_9_of_a_worker_mid_publish_loses_no_message(
        tmp_path: Path, postgres_url: str, broker: PrivateRedis,
        consumer: RedisConsumer) -> None:
    """w1 dies right after its third publish was acknowledged, before the result reached the
    store: that occurrence is published again (same key) by w2 once w1's lease expires."""
    async with fault_run(tmp_path, postgres_url, broker, "kill -9 worker mid-publish") as run:
        s1 = run.scheduler("s1")
        w1 = run.worker("w1", "default:4", failpoints="after_execute=kill@3")
        w2 = run.worker("w2", "default:4")
        await run.start(s1, w1, w2)
        t0 = next_second(after=2)
        jobs = await run.create(publish_ticks(consumer, t0))
        expected = expected_keys(jobs, t0)
        assert len(expected) == JOBS * WINDOW
        received = Received(consumer)
        await w1.wait_for(r"failpoint after_execute hit \d+: killing process",
                          within=WINDOW + 10)
        await run.settle(received.has(expected), within=WINDOW + 30,
                         what="every expected message at the consumer")
        runs = set(expected_of(jobs, t0, t0 + timedelta(seconds=WINDOW)))
        await run.settle(store_settled(run, runs), within=20,
                         what="the store to settle every run")
        await assert_delivered(run, received, expected, runs)
        # The killed publishes reached the broker before w1 died, and again as attempt 2
        # (the store settled after those were acknowledged): the consumer saw copies.
        await run.settle(lambda: received.read() or received.copies >= 1, within=10,
                         what="a second copy of a message w1 published before it died")
        assert await run.stop_cleanly(w2) == 0
        assert await run.stop_cleanly(s1) == 0


async def restart_broker_mid_window(run: FaultRun, broker: PrivateRedis | PrivateNats,
                                    consumer: Consumer) -> None:
    """Publish jobs tick while the broker is killed mid-window and started again after a
    seeded outage: publishes meanwhile fail as retriable and are retried with backoff until
    it is back, and every message arrives."""
    s1 = run.scheduler("s1")
    w1, w2 = run.worker("w1", "default:4"), run.worker("w2", "default:4")
    await run.start(s1, w1, w2)
    t0 = next_second(after=2)
    retry = {"max_attempts": 20, "backoff_base_seconds": 0.2, "backoff_max_seconds": 1}
    jobs = await run.create(publish_ticks(consumer, t0, retry=retry))
    expected = expected_keys(jobs, t0)
    received = Received(consumer)
    await run.pause(until_then(t0) + run.rng.uniform(1, WINDOW / 2))
    killed = await broker.kill()
    await run.pause(run.rng.uniform(1, 3))  # the outage: a seeded span, not a wait
    await broker.start()
    run.record_outage("broker restart", killed, time.time())
    await run.settle(received.has(expected), within=WINDOW + 40,
                     what="every expected message at the consumer")
    runs = set(expected_of(jobs, t0, t0 + timedelta(seconds=WINDOW)))
    await run.settle(store_settled(run, runs), within=20, what="the store to settle every run")
    await assert_delivered(run, received, expected, runs)
    assert await retried(run, jobs) >= 1, "no publish failed while the broker was down"
    assert await run.stop_cleanly(w1) == 0
    assert await run.stop_cleanly(w2) == 0
    assert await run.stop_cleanly(s1) == 0


async def test_a_redis_restart_loses_no_message(
        tmp_path: Path, postgres_url: str, broker: PrivateRedis,
        consumer: RedisConsumer) -> None:
    async with fault_run(tmp_path, postgres_url, broker, "redis broker restart") as run:
        await restart_broker_mid_window(run, broker, consumer)


async def test_a_nats_restart_loses_no_message(tmp_path: Path, postgres_url: str) -> None:
    """JetStream keeps what it acknowledged on disk; a publish retried after the restart
    carries the same Nats-Msg-Id, so the stream stores it once."""
    data = tmp_path / "nats"
    data.mkdir()
    nats = await PrivateNats(data).start()
    consumer = NatsConsumer(nats.url, reconnects=-1)  # rides out the restart
    try:
        await consumer.start()
        async with fault_run(tmp_path, postgres_url, nats, "nats broker restart") as run:
            await restart_broker_mid_window(run, nats, consumer)
    finally:
        await consumer.close()
        await nats.kill()
