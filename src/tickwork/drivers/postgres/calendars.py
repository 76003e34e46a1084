"""Calendars on PostgreSQL: a mixin of ``PostgresStore`` (the seam: ``drivers/calendars.py``)."""

from __future__ import annotations

import json
from typing import Any

from tickwork.drivers import calendars as c
from tickwork.drivers.postgres.connection import Pool, Q, fetch_all, fetch_one
from tickwork.drivers.postgres.rows import instant, job_from_row
from tickwork.drivers.rows import SpecCache
from tickwork.errors import Conflict
from tickwork.models import Job


def _calendar(row: Any) -> c.StoredCalendar:
    return c.StoredCalendar(name=row["name"], document=json.loads(row["document"]),
                            version=row["version"], created_at=instant(row["created_at"]),
                            updated_at=instant(row["updated_at"]))


class CalendarMethods:
    pool: Pool
    _specs: SpecCache

    async def calendar_create(self, p: c.CalendarWriteParams) -> c.StoredCalendar:
        async with self.pool.transaction() as conn:
            row = await fetch_one(conn, Q["calendar_insert"],
                                  {"name": p.name, "document": p.document, "now": p.now})
        if row is None:
            raise Conflict(f"a calendar named {p.name!r} already exists")
        return _calendar(row)

    async def calendar_update(self, p: c.CalendarWriteParams) -> c.StoredCalendar:
        async with self.pool.transaction() as conn:
            row = await fetch_one(conn, Q["calendar_update"],
                                  {"name": p.name, "document": p.document, "now": p.now})
        if row is None:
            raise c.CalendarNotFound(p.name)
        return _calendar(row)

    async def calendar_get(self, name: str) -> c.StoredCalendar:
        async with self.pool.transaction() as conn:
            row = await fetch_one(conn, Q["calendar_get"], (name,))
        if row is None:
            raise c.CalendarNotFound(name)
        return _calendar(row)

    async def calendar_list(self) -> list[c.StoredCalendar]:
        async with self.pool.transaction() as conn:
            rows = await fetch_all(conn, Q["calendar_list"], (c.MAX_CALENDARS,))
        return [_calendar(r) for r in rows]

    async def calendar_delete(self, p: c.CalendarDeleteParams) -> None:
        async with self.pool.transaction() as conn:
            if await fetch_one(conn, Q["calendar_lock"], (p.name,)) is None:
                raise c.CalendarNotFound(p.name)
            users = await fetch_all(conn, Q["calendar_jobs"], {
                "after": "", "name": p.name, "limit": c.IN_USE_NAMED})
            if users:
                raise c.CalendarInUse(p.name, sorted(str(r["name"]) for r in users))
            await conn.execute(Q["calendar_delete"], (p.name,))

    async def calendar_jobs(self, p: c.CalendarJobsParams) -> list[Job]:
        async with self.pool.transaction() as conn:
            rows = await fetch_all(conn, Q["calendar_jobs"], {
                "after": p.after_id or "", "name": p.name,
                "limit": min(p.limit, c.MAX_CALENDARS)})
        return [job_from_row(r, self._specs) for r in rows]

    async def calendar_replan(self, p: c.CalendarReplanParams) -> int:
        async with self.pool.transaction() as conn:
            dropped = 0
            if p.drop:
                cur = await conn.execute(Q["calendar_drop_occurrences"],
                                         {"job_id": p.job_id, "drop": list(p.drop)})
                dropped = cur.rowcount
            await conn.execute(Q["calendar_job_next_run"],
                               {"job_id": p.job_id, "next_run_at": p.next_run_at})
        return dropped
