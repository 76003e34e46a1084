"""Burst smoothing: with ``burst_threshold``, a job's jitter delays its run only at a burst.

A top-of-the-minute crowd of jobs that allow jitter spreads over their jitter, each run by
the same delay on every planner (a hash of the occurrence), never before its scheduled time;
a run alone at its instant, or of a job without jitter, starts on time. Without a threshold
every run of a job with jitter is delayed, as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import pytest

from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.config import Settings
from tickwork.drivers.base import JobCreateManyParams, JobCreateParams, OccurrenceListParams
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import ConfigError
from tickwork.models import Occurrence, ScheduleSpec
from tickwork.scheduler.planner import BurstSmoother, Planner
from tickwork.schedules import jitter_offset
from tickwork.testing.factories import NOW, job_spec, seconds

TOP_OF_MINUTE = ScheduleSpec(type="cron", cron="* * * * *", jitter_seconds=60)
HALF_PAST = ScheduleSpec(type="every", every_seconds=3600, offset_seconds=1830,
                         jitter_seconds=60)  # alone, at 00:30:30
CROWD = 40


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(f"sqlite:///{tmp_path}/tickwork.db")
    await store.migrate()
    yield store
    await store.close()


async def plan(store: SqliteStore, threshold: int, *, until_minutes: int = 40,
               batch_size: int = 500) -> dict[tuple[str, datetime], Occurrence]:
    """Create the crowd, a lone job and a crowd member without jitter, plan on a FakeClock
    minute by minute up to ``until_minutes`` past NOW, and return every occurrence."""
    clock = FakeClock(NOW - seconds(1))
    client = AsyncClient(store, clock=clock)
    await client.create_jobs([job_spec(f"crowd-{i}", schedule=TOP_OF_MINUTE)
                              for i in range(CROWD)])
    await client.create_job(job_spec("lone", schedule=HALF_PAST))
    await client.create_job(job_spec("steady", schedule=ScheduleSpec(type="cron",
                                                                     cron="* * * * *")))
    planner = Planner(store=store, clock=clock, horizon_seconds=90, batch_size=batch_size,
                      burst_threshold=threshold)
    for _ in range(until_minutes):
        while (await planner.run_once(clock.now()))[1]:
            pass
        clock.advance(60)
    found = []
    for job in await client.list_jobs(limit=100):
        found += await store.occurrence_list(OccurrenceListParams(job_id=job.id, limit=1000))
    return {(o.job_id, o.scheduled_at): o for o in found}


async def test_a_burst_spreads_over_the_jitter_and_a_lone_run_starts_on_time(
        store: SqliteStore) -> None:
    occurrences = await plan(store, threshold=10)
    jobs = {j.spec.name: j.id for j in await AsyncClient(store).list_jobs(limit=100)}
    crowd_ids = {jobs[f"crowd-{i}"] for i in range(CROWD)}
    burst = [o for o in occurrences.values() if o.job_id in crowd_ids]
    assert len(burst) >= CROWD * 30
    for o in burst:  # delayed by the occurrence's own hash, never early
        assert o.due_at == o.scheduled_at + jitter_offset(o.job_id, o.scheduled_at, 60)
        assert o.due_at >= o.scheduled_at
    first = min(o.scheduled_at for o in burst)
    one_minute = sorted(o.due_at for o in burst if o.scheduled_at == first)
    assert len(one_minute) == CROWD
    assert one_minute[-1] - one_minute[0] > seconds(30)  # spread over the minute
    assert len(set(one_minute)) == CROWD
    lone = [o for o in occurrences.values() if o.job_id == jobs["lone"]]
    assert lone
    assert all(o.due_at == o.scheduled_at for o in lone)  # alone at :30: on time
    steady = [o for o in occurrences.values() if o.job_id == jobs["steady"]]
    assert steady
    assert all(o.due_at == o.scheduled_at for o in steady)  # no jitter: never delayed


async def test_bursts_are_found_across_small_batches(store: SqliteStore) -> None:
    """Batches of 8 jobs plan a crowd of 40 over several passes: counted together, every
    crowd run after the first pass of each instant is smoothed."""
    occurrences = await plan(store, threshold=10, batch_size=8, until_minutes=5)
    jobs = {j.spec.name: j.id for j in await AsyncClient(store).list_jobs(limit=100)}
    crowd_ids = {jobs[f"crowd-{i}"] for i in range(CROWD)}
    burst = [o for o in occurrences.values() if o.job_id in crowd_ids]
    delayed = [o for o in burst if o.due_at > o.scheduled_at]
    assert len(delayed) >= len(burst) * 0.7
    assert all(o.due_at >= o.scheduled_at for o in burst)


async def test_without_a_threshold_every_run_of_a_job_with_jitter_is_delayed(
        store: SqliteStore) -> None:
    occurrences = await plan(store, threshold=0, until_minutes=40)
    jobs = {j.spec.name: j.id for j in await AsyncClient(store).list_jobs(limit=100)}
    lone = [o for o in occurrences.values() if o.job_id == jobs["lone"]]
    assert lone
    assert all(o.due_at == o.scheduled_at + jitter_offset(o.job_id, o.scheduled_at, 60)
               for o in lone)


async def test_two_planners_agree_on_every_delay(tmp_path: Path) -> None:
    """The same jobs (same ids) planned by two planners into two stores: the same due
    times, spread rather than all at the minute."""
    results = []
    for name in ("a", "b"):
        store = SqliteStore(f"sqlite:///{tmp_path}/{name}.db")
        await store.migrate()
        clock = FakeClock(NOW - seconds(1))
        await store.job_create_many(JobCreateManyParams(jobs=[
            JobCreateParams(spec=job_spec(f"crowd-{i}", schedule=TOP_OF_MINUTE),
                            next_run_at=NOW, now=clock.now(), id=f"crowd-{i}")
            for i in range(CROWD)]))
        planner = Planner(store=store, clock=clock, horizon_seconds=90, burst_threshold=10)
        await planner.run_once(clock.now())
        found = await store.occurrence_list(OccurrenceListParams(limit=1000))
        results.append({(o.job_id, o.scheduled_at): o.due_at for o in found})
        await store.close()
    assert len(results[0]) == CROWD * 2
    assert results[0] == results[1]
    assert len(set(results[0].values())) == CROWD * 2


def test_the_smoother_counts_only_instants_to_come_and_refuses_a_zero_threshold() -> None:
    with pytest.raises(ValueError, match="threshold"):
        BurstSmoother(0)
    smoother = BurstSmoother(2, size=1)
    assert not smoother.is_burst(NOW)


def test_a_negative_threshold_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="planner_burst_threshold"):
        Settings(planner_burst_threshold=-1).validate()
