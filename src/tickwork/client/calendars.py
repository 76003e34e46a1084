"""The client's calendars: create, read, change and delete them, import .ics files, and
re-plan the jobs a change concerns. A mixin of ``AsyncClient``.

A schedule that names calendars is compiled with them (``schedules.structured``); the store
knows calendars by name only, so this is where a job's calendars are checked to exist.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.clock import Clock
from tickwork.document import first_run, to_spec
from tickwork.drivers.base import MAX_BATCH, OccurrenceListParams, Store
from tickwork.drivers.calendars import (
    CalendarCache,
    CalendarDeleteParams,
    CalendarJobsParams,
    CalendarReplanParams,
    CalendarWriteParams,
    StoredCalendar,
)
from tickwork.errors import ValidationError
from tickwork.models import Job, JobSpec, OccurrenceState, Trigger
from tickwork.schedules import Schedule, compile_schedule, for_job, preview_fires
from tickwork.schedules.calendars import Calendar, calendar_document, check_name, parse_calendar
from tickwork.schedules.ics import parse_ics
from tickwork.schedules.structured import Fire


@dataclass(frozen=True, slots=True)
class CalendarChange:
    """A stored calendar and what changing it did: the jobs that name it (re-planned) and
    the not-yet-started runs it removed."""

    calendar: StoredCalendar
    jobs: int = 0
    removed: int = 0
    warnings: tuple[str, ...] = ()


def check_calendars(spec: JobSpec, known: Mapping[str, Calendar]) -> None:
    """ValidationError naming the first calendar the schedule names that does not exist."""
    for field in ("exclude", "only"):
        for index, name in enumerate(getattr(spec.schedule, field)):
            if name not in known:
                raise ValidationError(f"schedule.{field}[{index}]", f"no calendar {name!r}; "
                                      "create it first (tickwork calendars create)")


def calendar_first_run(spec: JobSpec, now: datetime,
                       calendars: Mapping[str, Calendar] | None) -> datetime | None:
    """``document.first_run`` for a schedule with its calendars."""
    if not spec.schedule.calendars or calendars is None:
        return first_run(spec, now)
    schedule = compile_schedule(spec.schedule, calendars)
    if spec.schedule.type == "at" and spec.schedule.at is not None:
        return schedule.first_at_or_after(spec.schedule.at)
    return schedule.first_at_or_after(now)


class CalendarMethods:
    store: Store
    clock: Clock
    _calendar_cache: CalendarCache
    _changed: Callable[[], None]
    _job: Callable[[str], Awaitable[Job]]
    namespace: str | None

    async def calendar_map(self) -> dict[str, Calendar]:
        """Every calendar, parsed, by name."""
        return await self._calendar_cache.load(self.store)

    async def schedule_of(self, spec: JobSpec, *, check: bool = False,
                          job_id: str | None = None) -> Schedule:
        """The job's schedule compiled with its calendars (checked to exist with ``check``);
        with ``job_id``, that job's own (an automatic offset given its value)."""
        if not spec.schedule.calendars:
            schedule = compile_schedule(spec.schedule)
            return schedule if job_id is None else for_job(schedule, job_id)
        calendars = await self.calendar_map()
        if check:
            check_calendars(spec, calendars)
        return compile_schedule(spec.schedule, calendars)

    async def preview_fires(self, job: Mapping[str, Any] | JobSpec | str, n: int = 5,
                            after: datetime | None = None) -> list[Fire]:
        """The next ``n`` fire times, with those the calendars drop (each with its reason)."""
        if isinstance(job, str):
            found = await self._job(job)
            schedule = await self.schedule_of(found.spec, job_id=found.id)
        else:
            schedule = await self.schedule_of(to_spec(job))
        return preview_fires(schedule, after or self.clock.now(), n)

    # -- calendars ---------------------------------------------------------------------------

    async def list_calendars(self) -> list[StoredCalendar]:
        return await self.store.calendar_list()

    async def get_calendar(self, name: str) -> StoredCalendar:
        return await self.store.calendar_get(check_name(name))

    async def calendar_jobs(self, name: str, limit: int = MAX_BATCH) -> list[Job]:
        """The jobs whose schedules name the calendar (up to ``limit``)."""
        jobs = await self.store.calendar_jobs(CalendarJobsParams(name=check_name(name),
                                                                 limit=limit))
        return [j for j in jobs if self.namespace is None or j.namespace == self.namespace]

    async def create_calendar(self, doc: Mapping[str, Any]) -> StoredCalendar:
        cal = parse_calendar(doc)
        return await self.store.calendar_create(CalendarWriteParams(
            name=cal.name, document=json.dumps(calendar_document(cal)), now=self.clock.now()))

    async def update_calendar(self, name: str, doc: Mapping[str, Any]) -> CalendarChange:
        """Replace the calendar's definition and re-plan the jobs that name it: their runs
        that have not started and are now ruled out are removed, and the planner creates
        the runs it now allows."""
        cal = parse_calendar(doc, name=check_name(name))
        stored = await self.store.calendar_update(CalendarWriteParams(
            name=cal.name, document=json.dumps(calendar_document(cal)), now=self.clock.now()))
        jobs, removed = await self.replan(cal.name)
        return CalendarChange(calendar=stored, jobs=jobs, removed=removed)

    async def delete_calendar(self, name: str) -> None:
        """Refused (Conflict, naming them) while jobs name the calendar."""
        await self.store.calendar_delete(CalendarDeleteParams(name=check_name(name),
                                                              now=self.clock.now()))

    async def import_calendar(self, name: str, ics: str, *, description: str | None = None,
                              replace: bool = False, source: str = "ics") -> CalendarChange:
        """A calendar from an iCalendar file's text: created, or with ``replace`` replacing
        the one of that name. Events it cannot read are left out and named in ``warnings``."""
        check_name(name)
        found = parse_ics(ics, source)
        doc: dict[str, Any] = {"name": name, "dates": found.dates, "yearly": found.yearly}
        if description is not None:
            doc["description"] = description
        if replace:
            try:
                await self.store.calendar_get(name)
            except LookupError:
                replace = False
        if replace:
            change = await self.update_calendar(name, doc)
        else:
            change = CalendarChange(calendar=await self.create_calendar(doc))
        return CalendarChange(calendar=change.calendar, jobs=change.jobs,
                              removed=change.removed, warnings=tuple(found.warnings))

    async def replan(self, name: str) -> tuple[int, int]:
        """Re-plan the jobs that name calendar ``name``: (jobs, runs removed)."""
        now = self.clock.now()
        calendars = await self.calendar_map()
        jobs = removed = 0
        after: str | None = None
        while True:
            page = await self.store.calendar_jobs(CalendarJobsParams(
                name=name, after_id=after, limit=MAX_BATCH))
            for job in page:
                removed += await self._replan_job(job, calendars, now)
            jobs += len(page)
            if len(page) < MAX_BATCH:
                break
            after = page[-1].id
        if jobs:
            self._changed()
        return jobs, removed

    async def _replan_job(self, job: Job, calendars: Mapping[str, Calendar],
                          now: datetime) -> int:
        schedule = compile_schedule(job.spec.schedule, calendars)
        waiting = await self.store.occurrence_list(OccurrenceListParams(
            job_id=job.id, states=[OccurrenceState.SCHEDULED, OccurrenceState.QUEUED],
            limit=MAX_BATCH, newest_first=False))
        drop = [o.scheduled_at for o in waiting
                if o.trigger == Trigger.SCHEDULE and o.attempt == 0
                and schedule.first_at_or_after(o.scheduled_at) != o.scheduled_at]
        next_run = job.next_run_at
        if job.spec.schedule.type == "at":
            if next_run is not None and job.spec.schedule.at is not None:
                next_run = schedule.first_at_or_after(job.spec.schedule.at)
        else:  # from the earlier of now and the next run not yet planned: none is skipped
            start = now if next_run is None else min(now, next_run)
            next_run = schedule.first_at_or_after(start)
        if not drop and next_run == job.next_run_at:
            return 0
        return await self.store.calendar_replan(CalendarReplanParams(
            job_id=job.id, drop=drop, next_run_at=next_run, now=now))
