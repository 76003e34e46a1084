"""Changing a calendar re-plans the jobs that name it: a run planned ahead that is now ruled
out disappears, one now allowed appears, started runs are never touched. The client checks
that a job's calendars exist; the planner plans with them. On a FakeClock, against SQLite and
PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.drivers.base import OccurrenceListParams, Store
from tickwork.drivers.calendars import CalendarWriteParams
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import Conflict, ValidationError
from tickwork.models import OccurrenceState
from tickwork.scheduler.planner import Planner
from tickwork.testing.factories import claim_one

START = datetime(2030, 12, 24, 0, 0, tzinfo=UTC)  # a Tuesday


def job(schedule: dict[str, Any], name: str = "daily") -> dict[str, Any]:
    return {"name": name, "kind": "http", "schedule": schedule,
            "payload": {"url": "https://example.org/"}}


class World:
    def __init__(self, store: Store, clock: FakeClock) -> None:
        self.store = store
        self.clock = clock
        self.client = AsyncClient(store, clock=clock)
        # A long horizon: the next days' runs are planned ahead, as a busy planner's would be.
        self.planner = Planner(store=store, clock=clock, horizon_seconds=4 * 86_400,
                               interval_seconds=1)

    async def plan(self) -> None:
        await self.planner.run_once(self.clock.now())

    async def planned(self, name: str = "daily") -> list[str]:
        found = await self.store.occurrence_list(OccurrenceListParams(
            job_id=(await self.client.get_job(name)).id, limit=100, newest_first=False))
        return [o.scheduled_at.strftime("%m-%d %H:%M") for o in found]


@pytest.fixture(params=["sqlite", "postgres"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    store: Store
    if request.param == "sqlite":
        store = SqliteStore(f"sqlite:///{tmp_path}/t.db")
    else:
        store = PostgresStore(request.getfixturevalue("postgres_url"))
    await store.migrate()
    yield World(store, FakeClock(START))
    await store.close()


async def test_a_calendar_change_removes_and_adds_planned_runs(world: World) -> None:
    await world.client.create_calendar({"name": "holidays", "dates": ["2030-12-25"]})
    created = await world.client.create_job(job({"cron": "0 9 * * *",
                                                 "exclude": ["holidays"]}))
    assert created.next_run_at == datetime(2030, 12, 24, 9, tzinfo=UTC)
    await world.plan()
    assert await world.planned() == ["12-24 09:00", "12-26 09:00", "12-27 09:00"]

    change = await world.client.update_calendar(
        "holidays", {"dates": ["2030-12-25", "2030-12-26"]})
    assert (change.jobs, change.removed) == (1, 1)
    assert await world.planned() == ["12-24 09:00", "12-27 09:00"]

    change = await world.client.update_calendar("holidays", {"dates": ["2030-12-26"]})
    assert (change.jobs, change.removed) == (1, 0)
    await world.plan()  # the planner creates the run the change allows again
    assert await world.planned() == ["12-24 09:00", "12-25 09:00", "12-27 09:00"]


async def test_a_started_run_is_never_touched(world: World) -> None:
    await world.client.create_calendar({"name": "holidays"})
    await world.client.create_job(job({"cron": "0 9 * * *", "exclude": ["holidays"]}))
    await world.plan()
    world.clock.advance(9 * 3600)
    running = await claim_one(world.store, world.clock.now())
    await world.client.update_calendar("holidays", {"dates": ["2030-12-24", "2030-12-25"]})
    occurrence = await world.store.occurrence_get(running.occurrence.job_id,
                                                  running.occurrence.scheduled_at)
    assert occurrence.state == OccurrenceState.RUNNING
    assert await world.planned() == ["12-24 09:00", "12-26 09:00", "12-27 09:00"]


async def test_the_planner_rechecks_a_next_run_a_calendar_now_excludes(world: World) -> None:
    await world.client.create_calendar({"name": "holidays"})
    await world.client.create_job(job({"cron": "0 9 * * *", "exclude": ["holidays"]}))
    # Changed behind the client's back (another process): the next run is still Dec 24.
    await world.store.calendar_update(CalendarWriteParams(
        name="holidays", document='{"name": "holidays", "dates": ["2030-12-24"]}',
        now=world.clock.now()))
    await world.plan()
    assert await world.planned() == ["12-25 09:00", "12-26 09:00", "12-27 09:00"]


async def test_structured_business_days_follow_a_calendar_change(world: World) -> None:
    await world.client.create_calendar({"name": "holidays"})
    await world.client.create_job(job({"monthly": {"business_day": -1, "at": "17:00"},
                                       "exclude": ["holidays"]}, "month-end"))
    world.clock.advance(5 * 86_400)  # Sunday Dec 29: the month's end is within the horizon
    await world.plan()
    assert await world.planned("month-end") == ["12-31 17:00"]
    await world.client.update_calendar("holidays", {"dates": ["2030-12-31"]})
    await world.plan()
    assert await world.planned("month-end") == ["12-30 17:00"]


async def test_unknown_calendars_are_refused_naming_the_field(world: World) -> None:
    with pytest.raises(ValidationError) as info:
        await world.client.create_job(job({"cron": "0 9 * * *", "exclude": ["nope"]}))
    assert info.value.field == "schedule.exclude[0]"
    with pytest.raises(ValidationError) as info:
        await world.client.create_jobs([job({"every": 60}, "a"),
                                        job({"every": 60, "only": ["nope"]}, "b")])
    assert info.value.field == "[1].schedule.only[0]"


async def test_a_calendar_in_use_cannot_be_deleted(world: World) -> None:
    await world.client.create_calendar({"name": "holidays"})
    await world.client.create_job(job({"cron": "0 9 * * *", "exclude": ["holidays"]}))
    with pytest.raises(Conflict, match="'daily'"):
        await world.client.delete_calendar("holidays")
    await world.client.update_job("daily", {"schedule": {"cron": "0 9 * * *"}})
    await world.client.delete_calendar("holidays")
    assert await world.client.list_calendars() == []


async def test_preview_names_the_excluded_times(world: World) -> None:
    await world.client.create_calendar({"name": "holidays", "dates": ["2030-12-25"]})
    await world.client.create_job(job({"cron": "0 9 * * *", "exclude": ["holidays"]}))
    fires = await world.client.preview_fires("daily", 2)
    assert [(f.at.day, f.excluded_by) for f in fires] == [(24, None), (25, "holidays"),
                                                          (26, None)]
    assert [t.day for t in await world.client.preview("daily", 2)] == [24, 26]


async def test_ics_import_creates_then_replaces(world: World) -> None:
    ics = ("BEGIN:VCALENDAR\nBEGIN:VEVENT\nSUMMARY:Xmas\nDTSTART;VALUE=DATE:20301225\n"
           "RRULE:FREQ=YEARLY\nEND:VEVENT\nEND:VCALENDAR\n")
    change = await world.client.import_calendar("holidays", ics)
    assert change.calendar.document["yearly"] == [{"on": "12-25", "from": "2030-12-25"}]
    with pytest.raises(Conflict):
        await world.client.import_calendar("holidays", ics)
    change = await world.client.import_calendar("holidays", ics, replace=True)
    assert change.calendar.version == 2
