"""The calendar part of the Store conformance suite (``drivers/calendars.py``).

A driver's test module subclasses ``CalendarConformance`` and defines a ``store`` fixture: a
fresh, migrated store of its own. Instants come from ``factories.NOW``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from tickwork.drivers.base import JobDeleteParams, OccurrenceInsertParams, Store
from tickwork.drivers.calendars import (
    CalendarDeleteParams,
    CalendarInUse,
    CalendarJobsParams,
    CalendarNotFound,
    CalendarReplanParams,
    CalendarWriteParams,
)
from tickwork.errors import Conflict
from tickwork.models import OccurrenceState, ScheduleSpec, Trigger
from tickwork.testing.factories import (
    NOW,
    add_job,
    add_occurrences,
    claim_one,
    new_occurrence,
    seconds,
)

__all__ = ["CalendarConformance"]

HOLIDAYS: dict[str, object] = {"name": "holidays", "dates": ["2030-12-25"]}


def _write(name: str, doc: Mapping[str, object], offset: float = 0) -> CalendarWriteParams:
    return CalendarWriteParams(name=name, document=json.dumps(doc), now=NOW + seconds(offset))


def _schedule(*, exclude: tuple[str, ...] = (), only: tuple[str, ...] = ()) -> ScheduleSpec:
    return ScheduleSpec(type="cron", cron="0 9 * * *", exclude=exclude, only=only)


class CalendarConformance:
    async def test_create_get_list(self, store: Store) -> None:
        created = await store.calendar_create(_write("holidays", HOLIDAYS))
        assert (created.name, created.document, created.version) == ("holidays", HOLIDAYS, 1)
        assert created.created_at == created.updated_at == NOW
        await store.calendar_create(_write("b-days", {"name": "b-days"}))
        assert await store.calendar_get("holidays") == created
        assert [c.name for c in await store.calendar_list()] == ["b-days", "holidays"]

    async def test_create_twice_is_a_conflict(self, store: Store) -> None:
        await store.calendar_create(_write("holidays", HOLIDAYS))
        with pytest.raises(Conflict, match="holidays"):
            await store.calendar_create(_write("holidays", HOLIDAYS))

    async def test_update_bumps_the_version(self, store: Store) -> None:
        await store.calendar_create(_write("holidays", HOLIDAYS))
        changed = {"name": "holidays", "dates": ["2030-12-26"]}
        updated = await store.calendar_update(_write("holidays", changed, 60))
        assert (updated.document, updated.version) == (changed, 2)
        assert (updated.created_at, updated.updated_at) == (NOW, NOW + seconds(60))

    async def test_missing_calendar(self, store: Store) -> None:
        with pytest.raises(CalendarNotFound):
            await store.calendar_get("nope")
        with pytest.raises(CalendarNotFound):
            await store.calendar_update(_write("nope", HOLIDAYS))
        with pytest.raises(CalendarNotFound):
            await store.calendar_delete(CalendarDeleteParams(name="nope", now=NOW))

    async def test_jobs_that_name_a_calendar(self, store: Store) -> None:
        await store.calendar_create(_write("holidays", HOLIDAYS))
        a = await add_job(store, "a", schedule=_schedule(exclude=("holidays",)))
        b = await add_job(store, "b", schedule=_schedule(only=("other", "holidays")))
        await add_job(store, "c", schedule=_schedule(exclude=("holidays-2",)))
        await add_job(store, "d")
        found = await store.calendar_jobs(CalendarJobsParams(name="holidays"))
        assert sorted(j.spec.name for j in found) == ["a", "b"]
        assert {j.id for j in found} == {a.id, b.id}
        first = min(a.id, b.id)
        rest = await store.calendar_jobs(CalendarJobsParams(name="holidays", after_id=first))
        assert [j.id for j in rest] == [max(a.id, b.id)]
        assert found[0].spec.schedule.exclude or found[0].spec.schedule.only

    async def test_delete_is_refused_while_a_job_names_it(self, store: Store) -> None:
        await store.calendar_create(_write("holidays", HOLIDAYS))
        job = await add_job(store, "payroll", schedule=_schedule(exclude=("holidays",)))
        with pytest.raises(CalendarInUse, match="payroll") as refused:
            await store.calendar_delete(CalendarDeleteParams(name="holidays", now=NOW))
        assert refused.value.jobs == ["payroll"]
        assert await store.calendar_get("holidays")
        await store.job_delete(JobDeleteParams(id=job.id, now=NOW))
        await store.calendar_delete(CalendarDeleteParams(name="holidays", now=NOW))
        with pytest.raises(CalendarNotFound):
            await store.calendar_get("holidays")

    async def test_replan_drops_only_unstarted_scheduled_runs(self, store: Store) -> None:
        job = await add_job(store, "j", schedule=_schedule(exclude=("holidays",)),
                            next_run_at=NOW + seconds(40))
        await add_occurrences(store, job, NOW, NOW + seconds(10), NOW + seconds(20))
        running = await claim_one(store, NOW)  # the one at NOW starts
        assert running.occurrence.scheduled_at == NOW
        await store.occurrence_insert(OccurrenceInsertParams(occurrences=[new_occurrence(
            job, NOW + seconds(30), trigger=Trigger.MANUAL)], now=NOW))
        dropped = await store.calendar_replan(CalendarReplanParams(
            job_id=job.id, now=NOW, next_run_at=NOW + seconds(50),
            drop=[NOW, NOW + seconds(10), NOW + seconds(30)]))
        assert dropped == 1  # the running one and the manual one stay
        assert (await store.occurrence_get(job.id, NOW)).state == OccurrenceState.RUNNING
        assert (await store.occurrence_get(job.id, NOW + seconds(20))).state == \
            OccurrenceState.SCHEDULED
        assert (await store.occurrence_get(job.id, NOW + seconds(30))).trigger == Trigger.MANUAL
        with pytest.raises(LookupError):
            await store.occurrence_get(job.id, NOW + seconds(10))
        assert (await store.job_get(job.id)).next_run_at == NOW + seconds(50)

    async def test_replan_with_nothing_to_drop_sets_the_next_run(self, store: Store) -> None:
        job = await add_job(store, "j", next_run_at=NOW + seconds(40))
        assert await store.calendar_replan(CalendarReplanParams(
            job_id=job.id, drop=[], next_run_at=None, now=NOW)) == 0
        assert (await store.job_get(job.id)).next_run_at is None
