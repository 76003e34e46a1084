"""Schedulers on PostgreSQL: shard leases, planners racing, history partitions and pruning."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tickwork.clock import FakeClock
from tickwork.drivers.base import OccurrenceListParams
from tickwork.drivers.postgres.notify import SHARDS_CHANNEL, NotifyListener
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.models import OccurrenceState, ScheduleSpec
from tickwork.scheduler.planner import Planner
from tickwork.scheduler.pruner import Pruner
from tickwork.scheduler.shards import ShardLeaser
from tickwork.testing.factories import (
    NOW,
    add_job,
    add_occurrences,
    claim,
    complete,
    completion,
    seconds,
)


@pytest.fixture
async def stores(postgres_url: str) -> AsyncIterator[list[PostgresStore]]:
    """Three stores on one database, as three scheduler processes would open it."""
    opened = [PostgresStore(postgres_url) for _ in range(3)]
    yield opened
    for s in opened:
        await s.close()


def leaser(store: PostgresStore, clock: FakeClock, owner: str) -> ShardLeaser:
    return ShardLeaser(store=store, clock=clock, owner=owner, lease_seconds=10,
                       interval_seconds=3)


async def test_schedulers_share_the_shards_and_take_over_a_dead_ones(
    stores: list[PostgresStore],
) -> None:
    clock = FakeClock(NOW)
    a, b, c = (leaser(s, clock, n) for s, n in zip(stores, "abc", strict=True))
    assert await a.run_once(clock.now()) == frozenset(range(64))
    await b.run_once(clock.now())  # a holds everything: b takes its share from a at once
    await a.run_once(clock.now())  # a finds it holds the rest
    await b.run_once(clock.now())
    assert (len(a.held), len(b.held)) == (32, 32)
    await c.run_once(clock.now())
    for lsr in (a, b, c, a, b, c):
        await lsr.run_once(clock.now())
    assert sorted(len(x.held) for x in (a, b, c)) == [20, 22, 22]
    assert a.held | b.held | c.held == frozenset(range(64))
    assert len(a.held) + len(b.held) + len(c.held) == 64  # no shard held twice

    # c dies (no more renewals). Within the lease its shards stay its own; after it, the two
    # survivors take them over, and say so at once (their planners plan them now).
    gains: list[str] = []
    a.on_gained, b.on_gained = (lambda: gains.append("a")), (lambda: gains.append("b"))
    dead = c.held
    clock.advance(6)
    for lsr in (a, b):
        await lsr.run_once(clock.now())
    assert not (a.held | b.held) & dead
    assert gains == []  # renewals alone take nothing new
    clock.advance(5)  # c's leases have expired
    for lsr in (a, b, a, b):
        await lsr.run_once(clock.now())
    assert set(gains) == {"a", "b"}
    assert a.held | b.held == frozenset(range(64))
    assert (len(a.held), len(b.held)) == (32, 32)
    assert c.shards() == frozenset(), "a scheduler whose leases lapsed plans nothing"

    await a.stop()  # a graceful stop gives the shards back at once
    await b.run_once(clock.now())
    assert b.held == frozenset(range(64))


ALL = frozenset(range(64))


class Leases:
    """The store's view of the shard leases, read over a connection of its own."""

    def __init__(self, conn: psycopg.AsyncConnection[tuple[Any, ...]]) -> None:
        self.conn = conn

    async def owners(self, now: datetime) -> dict[int, str]:
        """Each shard whose lease is live at ``now``, with its owner."""
        cur = await self.conn.execute(
            "SELECT shard, owner FROM shard_leases WHERE owner IS NOT NULL AND expires_at > %s",
            (now,))
        return dict(await cur.fetchall())

    async def check(self, now: datetime, leasers: list[ShardLeaser]) -> dict[int, str]:
        """No gap: every shard is held in the store and planned by a scheduler holding it."""
        owners = await self.owners(now)
        assert set(owners) == ALL, f"held by no one: {sorted(ALL - set(owners))}"
        for lsr in leasers:  # it may still plan shards taken from it, never miss its own
            assert {s for s, o in owners.items() if o == lsr.owner} <= lsr.shards()
        assert frozenset().union(*(lsr.shards() for lsr in leasers)) == ALL
        return owners


@pytest.fixture
async def leases(postgres_url: str) -> AsyncIterator[Leases]:
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        yield Leases(conn)


def counts(*leasers: ShardLeaser) -> list[int]:
    return [len(lsr.held) for lsr in leasers]


def disjoint(leasers: list[ShardLeaser]) -> bool:
    return sum(len(lsr.held) for lsr in leasers) == len(frozenset().union(
        *(lsr.held for lsr in leasers)))


async def test_a_new_scheduler_takes_its_share_at_once_leaving_no_shard_unplanned(
    stores: list[PostgresStore], leases: Leases,
) -> None:
    """The start-up gap: b must not wait for a to give shards back (planned by no one until
    b's next pass): b's first pass takes its share from a; a finds it holds the rest."""
    clock = FakeClock(NOW)
    a, b = leaser(stores[0], clock, "a"), leaser(stores[1], clock, "b")
    assert await a.run_once(clock.now()) == ALL
    clock.advance(1)
    await b.run_once(clock.now())
    assert len(b.held) == 32, "a newcomer holds its fair share after its first pass"
    owners = await leases.check(clock.now(), [a, b])
    assert sorted(owners.values()).count("a") == 32
    assert a.shards() == ALL, "a plans b's new shards until its next pass: overlap, no gap"

    clock.advance(2)
    assert await a.run_once(clock.now()) == ALL - b.held
    await leases.check(clock.now(), [a, b])

    # Balanced: further passes move nothing (no ping-pong), in either order.
    held = (a.held, b.held)
    for order in ((a, b), (b, a), (a, b), (a, a, b, b)):
        clock.advance(3)
        for lsr in order:
            await lsr.run_once(clock.now())
            assert await leases.check(clock.now(), [a, b]) == owners
        assert (a.held, b.held) == held


class Watched(ShardLeaser):
    """A leaser that says when a pass is done."""

    passed: asyncio.Event

    async def run_once(self, now: datetime) -> frozenset[int]:
        held = await super().run_once(now)
        self.passed.set()
        return held


async def test_shards_given_back_at_a_graceful_stop_are_taken_at_once(
    stores: list[PostgresStore], postgres_url: str,
) -> None:
    """Not at the others' next lease pass: the clock never moves here, so only the stopping
    scheduler's notification can make b look again."""
    clock = FakeClock(NOW)
    a = leaser(stores[0], clock, "a")
    b = Watched(store=stores[1], clock=clock, owner="b", lease_seconds=10, interval_seconds=3)
    b.passed = asyncio.Event()
    await a.run_once(clock.now())
    await b.run_once(clock.now())
    assert len(b.held) == 32
    given_back: list[str] = []

    def on_wake(owner: str | None) -> None:  # None: the listener (re)connected
        if owner is not None:
            given_back.append(owner)
            b.wake()

    listener = NotifyListener(postgres_url, on_wake, clock=clock, channel=SHARDS_CHANNEL)
    b.start()
    try:
        await asyncio.wait_for(b.passed.wait(), 10)  # its first pass; then it waits 3 s
        listener.start()
        await asyncio.wait_for(listener.listening.wait(), 10)
        await a.stop()  # gives its 32 shards back, and says so
        while b.held != ALL:
            b.passed.clear()
            await asyncio.wait_for(b.passed.wait(), 10)
        assert given_back == ["a"]
    finally:
        await listener.stop()
        await b.stop()


async def test_three_schedulers_starting_one_after_another_or_together(
    stores: list[PostgresStore], leases: Leases,
) -> None:
    clock = FakeClock(NOW)
    a, b, c = (leaser(s, clock, n) for s, n in zip(stores, "abc", strict=True))
    everyone = [a, b, c]
    await a.run_once(clock.now())
    await b.run_once(clock.now())
    await a.run_once(clock.now())
    assert counts(a, b) == [32, 32]
    # c takes what a and b hold above the new share (22), from the busier first: 10 from each.
    await c.run_once(clock.now())
    owners = await leases.check(clock.now(), everyone)
    assert len(c.held) == 20
    assert sorted(owners.values()).count("a") == sorted(owners.values()).count("b") == 22
    for lsr in (a, b):
        await lsr.run_once(clock.now())
    assert counts(a, b, c) == [22, 22, 20]
    assert disjoint(everyone)
    assert await leases.check(clock.now(), everyone) == owners
    for lsr in everyone * 3:  # stable: c stays below 22 (none is above it to take from)
        clock.advance(1)
        await lsr.run_once(clock.now())
        assert await leases.check(clock.now(), everyone) == owners

    # All stop; then b and c start before a's next pass: each takes its share from a at once.
    for lsr in everyone:
        await lsr.stop()
    clock.advance(1)
    assert await a.run_once(clock.now()) == ALL
    await b.run_once(clock.now())
    assert len(b.held) == 32
    await leases.check(clock.now(), everyone)
    await c.run_once(clock.now())
    assert len(c.held) == 20
    await leases.check(clock.now(), everyone)
    for lsr in (a, b):
        await lsr.run_once(clock.now())
        await leases.check(clock.now(), everyone)
    assert counts(a, b, c) == [22, 22, 20]
    assert disjoint(everyone)


@pytest.mark.parametrize("schedulers", [2, 3, 4])
async def test_random_starts_and_passes_never_leave_a_shard_unplanned_and_settle(
    stores: list[PostgresStore], leases: Leases, schedulers: int,
) -> None:
    """Schedulers start at random points between each other's passes. After every pass each
    shard is held and planned; once all run, one round settles the store, the next one every
    scheduler's view; from then on no shard changes owner."""
    fair = -(-64 // schedulers)
    clock = FakeClock(NOW)
    for seed in range(12):
        rnd = random.Random(seed)
        everyone = [leaser(stores[i % len(stores)], clock, f"s{seed}-{i}")
                    for i in range(schedulers)]
        started = everyone[:1]
        await started[0].run_once(clock.now())
        while len(started) < schedulers or rnd.random() < 0.5:
            if len(started) < schedulers and rnd.random() < 0.4:
                started.append(everyone[len(started)])
                lsr = started[-1]
            else:
                lsr = rnd.choice(started)
            clock.advance(0.2)
            await lsr.run_once(clock.now())
            await leases.check(clock.now(), started)
        for _ in range(2):
            for lsr in rnd.sample(everyone, schedulers):
                clock.advance(0.2)
                await lsr.run_once(clock.now())
                owners = await leases.check(clock.now(), everyone)
        assert disjoint(everyone), f"seed {seed}"
        assert max(counts(*everyone)) <= fair
        assert all(owners[s] == lsr.owner for lsr in everyone for s in lsr.held)
        for lsr in [rnd.choice(everyone) for _ in range(3 * schedulers)]:
            clock.advance(0.2)
            held = lsr.held
            assert await lsr.run_once(clock.now()) == held, f"seed {seed}: {lsr.owner} moved"
            assert await leases.check(clock.now(), everyone) == owners
        for lsr in everyone:
            await lsr.stop()


async def test_planners_on_disjoint_shards_plan_every_job_once(
    stores: list[PostgresStore],
) -> None:
    clock = FakeClock(NOW)
    every = ScheduleSpec(type="every", every_seconds=1.0)
    for i in range(200):
        await add_job(stores[0], f"j{i:03d}", next_run_at=NOW, schedule=every)
    leasers = [leaser(s, clock, f"s{i}") for i, s in enumerate(stores)]
    for lsr in leasers * 3:
        await lsr.run_once(clock.now())
    planners = [Planner(store=s, clock=clock, horizon_seconds=2, shards=lsr.shards)
                for s, lsr in zip(stores, leasers, strict=True)]
    inserted = await asyncio.gather(*(p.run_once(clock.now()) for p in planners))
    assert sum(n for n, _ in inserted) == 200 * 3  # NOW, +1 s, +2 s for each job
    assert all(n > 0 for n, _ in inserted), "each scheduler planned its own share"
    occs = await stores[0].occurrence_list(OccurrenceListParams(limit=1000))
    assert len(occs) == 600


async def test_planners_racing_on_the_same_jobs_never_duplicate_or_go_back(
    stores: list[PostgresStore],
) -> None:
    """No leases at all (every planner plans every shard): keys and the CAS keep it right."""
    clock = FakeClock(NOW)
    every = ScheduleSpec(type="every", every_seconds=1.0)
    jobs = [await add_job(stores[0], f"j{i:03d}", next_run_at=NOW, schedule=every)
            for i in range(100)]
    planners = [Planner(store=s, clock=clock, horizon_seconds=3) for s in stores]
    for _ in range(5):
        await asyncio.gather(*(p.run_once(clock.now()) for p in planners))
        clock.advance(1)
    occs = await stores[0].occurrence_list(OccurrenceListParams(limit=1000))
    keys = [(o.job_id, o.scheduled_at) for o in occs]
    assert len(keys) == len(set(keys)) == 100 * 8  # NOW .. NOW + 7 s
    for job in jobs:
        assert (await stores[0].job_get(job.id)).next_run_at == NOW + seconds(8)


async def test_pruner_partitions_attempts_and_drops_old_history(
    stores: list[PostgresStore], postgres_url: str,
) -> None:
    store = stores[0]
    day0 = datetime(2030, 1, 1, tzinfo=UTC)
    job = await add_job(store, "j")
    # An attempt lands in the default partition before any daily partition exists.
    await add_occurrences(store, job, day0 + seconds(60))
    (c,) = (await claim(store, day0 + seconds(60))).claims
    await complete(store, day0 + seconds(61), completion(c, started_at=day0 + seconds(60)))

    clock = FakeClock(day0 + seconds(3600))
    pruner = Pruner(store=store, clock=clock, retention_days=2, days_ahead=2)
    await pruner.run_once(clock.now())
    assert await store.history_partitions() == [
        "attempts_p20300101", "attempts_p20300102", "attempts_p20300103"]
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        rows = await (await conn.execute(
            "SELECT tableoid::regclass::text FROM attempts")).fetchall()
    assert rows == [("attempts_p20300101",)], "moved out of the default partition"
    assert len(await store.attempt_list(job.id, day0 + seconds(60))) == 1

    # Four days on, with retention 2 days: the first two days go, whole.
    clock.advance(timedelta(days=4).total_seconds())
    pruned = await pruner.run_once(clock.now())
    assert pruned.partitions_dropped == ["attempts_p20300101", "attempts_p20300102"]
    assert pruned.occurrences_deleted == 1
    assert (await store.history_partitions())[0] == "attempts_p20300103"
    assert await store.attempt_list(job.id, day0 + seconds(60)) == []
    assert await store.occurrence_list(OccurrenceListParams(job_id=job.id)) == []


async def test_pruner_keeps_unfinished_runs(stores: list[PostgresStore]) -> None:
    store = stores[0]
    job = await add_job(store, "j")
    await add_occurrences(store, job, NOW)
    pruner = Pruner(store=store, clock=FakeClock(NOW), retention_days=1)
    pruned = await pruner.run_once(NOW + timedelta(days=30))
    assert pruned.occurrences_deleted == 0
    assert (await store.occurrence_get(job.id, NOW)).state is OccurrenceState.SCHEDULED
