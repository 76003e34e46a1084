"""One-off jobs are planned further ahead than recurring ones (planner_one_off_horizon_seconds),
on both drivers: a burst of them due at one instant is planned before that instant."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.drivers.base import (
    JobDueParams,
    JobListParams,
    JobUpdateParams,
    OccurrenceListParams,
    Store,
)
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.models import Job, ScheduleSpec
from tickwork.scheduler.planner import Planner
from tickwork.testing.factories import (
    NOW,
    add_job,
    claim,
    complete,
    completion,
    job_spec,
    seconds,
)


def once(after: float) -> ScheduleSpec:
    return ScheduleSpec(type="at", at=NOW + seconds(after))


def every(seconds_: float, start_after: float) -> ScheduleSpec:
    return ScheduleSpec(type="every", every_seconds=seconds_,
                        start_at=NOW + seconds(start_after))


async def planned(store: Store, job: Job) -> list[float]:
    runs = await store.occurrence_list(OccurrenceListParams(job_id=job.id))
    return sorted((o.scheduled_at - NOW).total_seconds() for o in runs)


async def test_one_off_jobs_are_planned_within_their_longer_horizon(each_store: Store) -> None:
    soon = await add_job(each_store, "soon", schedule=once(3), next_run_at=NOW + seconds(3))
    later = await add_job(each_store, "later", schedule=once(40), next_run_at=NOW + seconds(40))
    beyond = await add_job(each_store, "beyond", schedule=once(90), next_run_at=NOW + seconds(90))
    recurring = await add_job(each_store, "recurring", schedule=every(10, 40),
                              next_run_at=NOW + seconds(40))
    planner = Planner(store=each_store, clock=FakeClock(NOW), horizon_seconds=5,
                      one_off_horizon_seconds=60)
    assert (await planner.run_once(NOW))[0] == 2
    assert [await planned(each_store, j) for j in (soon, later, beyond, recurring)] == [
        [3.0], [40.0], [], []]
    # The recurring job comes within its own horizon, and only its runs within it.
    await planner.run_once(NOW + seconds(36))
    assert await planned(each_store, recurring) == [40.0]
    assert await planned(each_store, beyond) == [90.0]


async def test_without_a_longer_horizon_one_off_jobs_wait_for_the_common_one(
        each_store: Store) -> None:
    later = await add_job(each_store, "later", schedule=once(40), next_run_at=NOW + seconds(40))
    for longer in (None, 5.0, 2.0):  # unset, or not longer: the common horizon
        planner = Planner(store=each_store, clock=FakeClock(NOW), horizon_seconds=5,
                          one_off_horizon_seconds=longer)
        assert (await planner.run_once(NOW))[0] == 0
    assert await planned(each_store, later) == []


async def test_the_longer_horizon_reads_no_recurring_job_and_honours_the_limit(
        each_store: Store) -> None:
    """Recurring jobs due between the two horizons are not returned, however many: the one-off
    part walks its own index. Due jobs come first, then the one-off ones, the batch bounded."""
    for i in range(30):
        await add_job(each_store, f"r{i}", schedule=every(10, 20), next_run_at=NOW + seconds(20))
    for i in range(5):
        await add_job(each_store, f"o{i}", schedule=once(30 + i), next_run_at=NOW + seconds(30 + i))
    await add_job(each_store, "due", schedule=every(10, 1), next_run_at=NOW + seconds(1))
    due = await each_store.job_due(JobDueParams(until=NOW + seconds(5), limit=4,
                                           until_one_off=NOW + seconds(60)))
    assert [j.spec.name for j in due] == ["due", "o0", "o1", "o2"]
    assert [j.spec.name for j in await each_store.job_due(JobDueParams(
        until=NOW + seconds(5), until_one_off=NOW + seconds(32)))] == ["due", "o0", "o1", "o2"]


async def test_an_updated_schedule_moves_a_job_between_the_horizons(each_store: Store) -> None:
    """The each_store keeps which jobs are one-off with the spec: a one-off job made recurring
    is planned within the common horizon only, and back."""
    job = await add_job(each_store, "changing", schedule=once(30), next_run_at=NOW + seconds(30))
    params = JobDueParams(until=NOW + seconds(5), until_one_off=NOW + seconds(60))
    assert [j.id for j in await each_store.job_due(params)] == [job.id]
    for schedule, found in ((every(10, 30), []), (once(30), [job.id])):
        await each_store.job_update(JobUpdateParams(
            id=job.id, spec=replace(job.spec, schedule=schedule),
            next_run_at=NOW + seconds(30), now=NOW, replan=True))
        assert [j.id for j in await each_store.job_due(params)] == found
    assert [j.id for j in await each_store.job_due(params)] == [job.id]


@pytest.mark.parametrize("driver", ["sqlite", "postgres"])
async def test_the_migration_marks_the_one_off_jobs_already_stored(
        driver: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Jobs stored before the column existed: the one-off ones are marked from their spec,
    so the planner finds them within the longer horizon after the upgrade."""
    store: Store
    if driver == "postgres":
        url = request.getfixturevalue("postgres_url")
        store = PostgresStore(url)
    else:
        store = SqliteStore(f"sqlite:///{tmp_path}/tickwork.db")
    await store.migrate()
    one_off = await add_job(store, "one-off", schedule=once(30), next_run_at=NOW + seconds(30))
    await add_job(store, "recurring", schedule=every(10, 30), next_run_at=NOW + seconds(30))
    before = ["DROP INDEX jobs_due_once", "ALTER TABLE jobs DROP COLUMN once",
              "DELETE FROM tickwork_migrations WHERE name LIKE '%one_off_horizon%'"]
    if driver == "postgres":
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in before:
                conn.execute(statement)  # type: ignore[call-overload]
    else:
        await store.close()
        with sqlite3.connect(tmp_path / "tickwork.db") as conn:
            for statement in before:
                conn.execute(statement)
        conn.close()
        store = SqliteStore(f"sqlite:///{tmp_path}/tickwork.db")
    try:
        await store.migrate()
        due = await store.job_due(JobDueParams(until=NOW + seconds(5),
                                               until_one_off=NOW + seconds(60)))
        assert [j.id for j in due] == [one_off.id]
    finally:
        await store.close()


async def test_a_planned_run_moves_with_its_jobs_queue_and_priority(each_store: Store) -> None:
    """A run planned and not due yet carries its job's queue, priority and attempts: an
    update of those plans it again with the new ones (a one-off job's is planned up to a
    minute ahead, a recurring job's within the common horizon). A run already due stays."""
    clock = FakeClock(NOW)
    client = AsyncClient(each_store, clock=clock)
    one_off, recurring = await client.create_jobs([
        job_spec("one-off", schedule=once(40)), job_spec("recurring", schedule=every(2, 0))])
    planner = Planner(store=each_store, clock=clock, horizon_seconds=5,
                      one_off_horizon_seconds=60)
    await planner.run_once(clock.now())
    clock.advance(1)  # the recurring job's runs at 0 and 1 s are due now, 2 and 4 s are not
    for job in (one_off, recurring):
        await client.update_job(job.id, {"queue": "mail", "priority": 5,
                                         "retry": {"max_attempts": 7}})
    await planner.run_once(clock.now())

    async def runs(job: Job) -> list[tuple[float, str, int, int]]:
        found = await each_store.occurrence_list(OccurrenceListParams(job_id=job.id))
        return sorted(((o.scheduled_at - NOW).total_seconds(), o.queue, o.priority,
                       o.max_attempts) for o in found)

    assert await runs(one_off) == [(40.0, "mail", 5, 7)]
    assert await runs(recurring) == [(0.0, "default", 0, 3), (2.0, "mail", 5, 7),
                                      (4.0, "mail", 5, 7), (6.0, "mail", 5, 7)]


async def test_a_planned_one_off_job_still_shows_its_next_run(each_store: Store) -> None:
    """Planned up to a minute ahead, a one-off job's stored next_run_at is empty; read by id,
    by name or in a listing it shows the time of its run until that run starts."""
    job = await add_job(each_store, "soon", schedule=once(40), next_run_at=NOW + seconds(40))
    planner = Planner(store=each_store, clock=FakeClock(NOW), horizon_seconds=5,
                      one_off_horizon_seconds=60)
    await planner.run_once(NOW)
    assert (await each_store.job_due(JobDueParams(until=NOW + seconds(90)))) == []  # planned

    async def shown() -> set[datetime | None]:
        listed = await each_store.job_list(JobListParams())
        return {(await each_store.job_get(job.id)).next_run_at,
                (await each_store.job_get("soon")).next_run_at,
                *(j.next_run_at for j in listed)}

    assert await shown() == {NOW + seconds(40)}
    (running,) = (await claim(each_store, NOW + seconds(40))).claims
    assert await shown() == {None}
    await complete(each_store, NOW + seconds(41), completion(running))
    assert await shown() == {None}
