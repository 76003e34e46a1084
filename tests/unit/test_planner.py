"""The planner's memory is bounded by its caches' bounds, never by how many jobs exist.

The schedule cache holds one entry per distinct recurring schedule (none for one-off jobs),
the spec cache is bounded in entries and in size, and every ``job_due`` call is one bounded
batch. Memory itself is measured by ``tickwork bench w3 --idle-jobs N``; these tests catch
a regression without timing anything.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.drivers.base import JobDueParams
from tickwork.drivers.codec import spec_to_json
from tickwork.drivers.rows import SpecCache
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.models import Job, ScheduleSpec
from tickwork.scheduler.planner import Planner, ScheduleCache
from tickwork.testing.factories import NOW, job_spec, seconds

EVERY_MINUTE = ScheduleSpec(type="cron", cron="* * * * *")


def test_jobs_sharing_a_schedule_share_one_compiled_schedule() -> None:
    cache = ScheduleCache()
    first = cache.get(EVERY_MINUTE)
    assert all(cache.get(ScheduleSpec(type="cron", cron="* * * * *")) is first
               for _ in range(100))
    assert len(cache) == 1


def test_a_changed_schedule_is_a_new_entry() -> None:
    cache = ScheduleCache()
    every_five = cache.get(ScheduleSpec(type="cron", cron="*/5 * * * *"))
    every_ten = cache.get(ScheduleSpec(type="cron", cron="*/10 * * * *"))
    assert every_five.next_after(NOW) == NOW + seconds(300)
    assert every_ten.next_after(NOW) == NOW + seconds(600)
    assert len(cache) == 2


def test_one_off_schedules_are_never_kept() -> None:
    cache = ScheduleCache()
    for i in range(1000):
        assert cache.get(ScheduleSpec(type="at", at=NOW + seconds(i))).next_after(
            NOW - seconds(1)) == NOW + seconds(i)
    assert len(cache) == 0


def test_the_schedule_cache_holds_at_most_its_size() -> None:
    cache = ScheduleCache(size=8)
    for i in range(500):  # 500 distinct recurring schedules
        cache.get(ScheduleSpec(type="every", every_seconds=600, offset_seconds=i))
    assert len(cache) == 8
    with pytest.raises(ValueError, match="size"):
        ScheduleCache(size=0)


def test_the_spec_cache_is_bounded_in_entries_and_in_size() -> None:
    cache = SpecCache(size=50, max_chars=20_000)
    small = spec_to_json(job_spec("small"))
    for i in range(500):
        cache.get(f"small-{i}", 1, small)
        assert len(cache) <= 50
    large = spec_to_json(job_spec("large", payload={"url": "https://example.org/",
                                                     "body": "x" * 5000}))
    for i in range(500):
        spec = cache.get(f"large-{i}", 1, large)
        assert cache.chars <= 20_000
    assert spec.payload["body"] == "x" * 5000
    assert 1 <= len(cache) <= 20_000 // len(large)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(f"sqlite:///{tmp_path}/tickwork.db")
    await store.migrate()
    yield store
    await store.close()


async def test_planning_thousands_of_jobs_keeps_one_schedule_and_bounded_batches(
        store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """3,000 jobs due within the horizon, half of them one-off: each planned in batches of at
    most ``batch_size``, and the schedule cache ends with the one recurring schedule."""
    clock = FakeClock(NOW)
    client = AsyncClient(store, clock=clock)
    specs = [job_spec(f"cron-{i}", schedule=EVERY_MINUTE) for i in range(1500)]
    specs += [job_spec(f"once-{i}", schedule=ScheduleSpec(type="at", at=NOW + seconds(i % 50)))
              for i in range(1500)]
    await client.create_jobs(specs)
    batches: list[int] = []
    job_due = store.job_due

    async def recording(p: JobDueParams) -> list[Job]:
        jobs = await job_due(p)
        batches.append(len(jobs))
        return jobs

    monkeypatch.setattr(store, "job_due", recording)
    planner = Planner(store=store, clock=clock, horizon_seconds=60, batch_size=200)
    while (await planner.run_once(clock.now()))[1]:
        pass
    assert sum(batches) >= 3000  # every job was loaded once at least
    assert max(batches) <= 200
    assert await job_due(JobDueParams(until=clock.now() + seconds(59))) == []  # all planned
    assert len(planner.schedules) == 1
