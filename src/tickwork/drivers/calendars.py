"""The calendar part of the Store seam: named calendars, the jobs that name them, re-planning.

A driver keeps a calendar as its JSON document (``schedules.calendars`` parses and checks it;
the store stores what it is given) with a version that each update bumps. Every driver passes
``tickwork.testing.conformance.calendars``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from tickwork.errors import Conflict, TickworkError, ValidationError
from tickwork.models import Job
from tickwork.schedules.calendars import Calendar, parse_calendar

log = logging.getLogger("tickwork.calendars")

MAX_CALENDARS = 1000  # listed at once; the planner reads them all
IN_USE_NAMED = 10  # jobs named in the error that refuses a delete


class CalendarNotFound(TickworkError, LookupError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no calendar {name!r}")


class CalendarInUse(Conflict):
    def __init__(self, name: str, jobs: Sequence[str]) -> None:
        self.name = name
        self.jobs = list(jobs)
        more = " and maybe more" if len(jobs) >= IN_USE_NAMED else ""
        super().__init__(f"calendar {name!r} is used by job(s) "
                         f"{', '.join(repr(j) for j in jobs)}{more}; change their schedules "
                         "first")


@dataclass(frozen=True, slots=True)
class StoredCalendar:
    name: str
    document: dict[str, Any]
    version: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class CalendarWriteParams:
    """Create (Conflict if the name is taken) or replace (CalendarNotFound if it is not)."""

    name: str
    document: str  # JSON text
    now: datetime


@dataclass(frozen=True, slots=True)
class CalendarDeleteParams:
    """Refused with CalendarInUse (naming up to IN_USE_NAMED jobs) while a job names it."""

    name: str
    now: datetime


@dataclass(frozen=True, slots=True)
class CalendarJobsParams:
    """Jobs (not deleted) whose schedule names the calendar, by id, after ``after_id``."""

    name: str
    after_id: str | None = None
    limit: int = 1000


@dataclass(frozen=True, slots=True)
class CalendarReplanParams:
    """After a calendar changed: drop the job's occurrences at ``drop`` that have not started
    (scheduled or queued, attempt 0, trigger schedule; any other is left as it is) and set its
    next run, in one transaction. Returns how many were dropped."""

    job_id: str
    drop: Sequence[datetime]
    next_run_at: datetime | None
    now: datetime


class CalendarStore(Protocol):
    async def calendar_create(self, p: CalendarWriteParams) -> StoredCalendar: ...
    async def calendar_update(self, p: CalendarWriteParams) -> StoredCalendar: ...
    async def calendar_get(self, name: str) -> StoredCalendar:
        """Raises CalendarNotFound."""
        ...
    async def calendar_list(self) -> list[StoredCalendar]:
        """Every calendar by name, at most MAX_CALENDARS."""
        ...
    async def calendar_delete(self, p: CalendarDeleteParams) -> None: ...
    async def calendar_jobs(self, p: CalendarJobsParams) -> list[Job]: ...
    async def calendar_replan(self, p: CalendarReplanParams) -> int: ...


class CalendarCache:
    """The store's calendars, parsed: each is parsed again only when it changed (its version
    and update time). ``load`` reads the list (one small query) each time it is called."""

    def __init__(self) -> None:
        self._parsed: dict[str, tuple[tuple[int, datetime], Calendar]] = {}

    async def load(self, store: CalendarStore) -> dict[str, Calendar]:
        parsed: dict[str, tuple[tuple[int, datetime], Calendar]] = {}
        for stored in await store.calendar_list():
            stamp = (stored.version, stored.updated_at)
            known = self._parsed.get(stored.name)
            if known is None or known[0] != stamp:
                try:
                    known = (stamp, parse_calendar(stored.document, name=stored.name))
                except ValidationError as exc:  # stored before a rule tightened: say so
                    log.error("calendar %s no longer reads: %s", stored.name, exc)
                    known = (stamp, Calendar(name=stored.name))
            parsed[stored.name] = known
        self._parsed = parsed
        return {name: cal for name, (_, cal) in parsed.items()}

    def stamp(self, name: str) -> tuple[int, datetime] | None:
        """The version and update time of the calendar as last loaded, or None."""
        known = self._parsed.get(name)
        return None if known is None else known[0]
