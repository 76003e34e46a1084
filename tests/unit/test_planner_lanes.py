"""A scheduler plans the shards it holds in lanes (planner_lanes): disjoint parts of them,
each read, planned and written at once with the others, every job planned once."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from tickwork.clock import FakeClock
from tickwork.drivers.base import JobDueParams, OccurrenceListParams, Store
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.models import Job, ScheduleSpec
from tickwork.scheduler.planner import Planner, lanes_of
from tickwork.testing.factories import NOW, add_job, seconds

ALL_SHARDS = frozenset(range(64))


def test_shards_are_dealt_into_disjoint_parts_of_nearly_one_size() -> None:
    parts = lanes_of(ALL_SHARDS, 3)
    assert [len(p) for p in parts if p is not None] == [22, 21, 21]
    assert frozenset().union(*(p for p in parts if p is not None)) == ALL_SHARDS
    assert sum(len(p) for p in parts if p is not None) == len(ALL_SHARDS)


@pytest.mark.parametrize(("shards", "lanes", "sizes"), [
    (frozenset({5}), 2, [1]), (frozenset({1, 2, 3}), 8, [1, 1, 1]), (ALL_SHARDS, 1, [64])])
def test_no_lane_is_empty_and_one_lane_is_all_shards(
        shards: frozenset[int], lanes: int, sizes: list[int]) -> None:
    assert sorted(len(p) for p in lanes_of(shards, lanes) if p is not None) == sizes


def test_every_shard_stays_one_part() -> None:
    assert lanes_of(None, 4) == [None]


class Overlapping:
    """The store, whose job_due reads wait for ``lanes`` of them to be in flight at once (a
    planner that read one part after the other would never get past the first)."""

    def __init__(self, store: Store, lanes: int) -> None:
        self.store = store
        self.reads: list[frozenset[int] | None] = []
        self._in_flight = 0
        self._lanes = lanes
        self._all_in = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def job_due(self, p: JobDueParams) -> list[Job]:
        self.reads.append(p.shards)
        self._in_flight += 1
        if self._in_flight == self._lanes:
            self._all_in.set()
        try:
            await asyncio.wait_for(self._all_in.wait(), timeout=10)
            return await self.store.job_due(p)
        finally:
            self._in_flight -= 1


async def _one_offs(store: Store, count: int) -> list[Job]:
    return [await add_job(store, f"once-{n}", schedule=ScheduleSpec(
        type="at", at=NOW + seconds(3)), next_run_at=NOW + seconds(3)) for n in range(count)]


async def test_lanes_read_disjoint_shards_at_once_and_plan_every_job_once(
        postgres_store: PostgresStore) -> None:
    jobs = await _one_offs(postgres_store, 40)
    assert len({j.shard for j in jobs}) > 2  # the jobs fall in several shards
    store = Overlapping(postgres_store, lanes=2)
    planner = Planner(store=cast(Store, store), clock=FakeClock(NOW), horizon_seconds=5,
                      batch_size=15, shards=lambda: ALL_SHARDS, lanes=2)
    inserted, more = await planner.run_once(NOW)
    first, second = store.reads
    assert first is not None
    assert second is not None
    assert not first & second
    assert first | second == ALL_SHARDS
    total = inserted
    while more:
        inserted, more = await planner.run_once(NOW)
        total += inserted
    runs = await postgres_store.occurrence_list(OccurrenceListParams(limit=100))
    assert total == len(runs) == len(jobs)
    assert sorted(r.job_id for r in runs) == sorted(j.id for j in jobs)


class FailingPart:
    """The store, whose job_due fails for the part holding shard 0."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def job_due(self, p: JobDueParams) -> list[Job]:
        if p.shards is not None and 0 in p.shards:
            raise RuntimeError("this part's read failed")
        return await self.store.job_due(p)


async def test_a_failing_lane_fails_the_pass_after_the_other_lanes_planned(
        postgres_store: PostgresStore) -> None:
    jobs = await _one_offs(postgres_store, 40)
    planner = Planner(store=cast(Store, FailingPart(postgres_store)), clock=FakeClock(NOW),
                      horizon_seconds=5, shards=lambda: ALL_SHARDS, lanes=2)
    with pytest.raises(RuntimeError, match="this part's read failed"):
        await planner.run_once(NOW)
    odd = {j.id for j in jobs if j.shard % 2 == 1}  # the other lane's part: 1, 3, 5, ...
    runs = await postgres_store.occurrence_list(OccurrenceListParams(limit=100))
    assert odd
    assert {r.job_id for r in runs} == odd


def test_a_planner_needs_a_lane() -> None:
    with pytest.raises(ValueError, match="lanes must be at least 1"):
        Planner(store=cast(Store, None), clock=FakeClock(NOW), lanes=0)
