"""Calendars on SQLite: a mixin of ``SqliteStore`` (the seam: ``drivers/calendars.py``)."""

from __future__ import annotations

import json
import sqlite3

from tickwork.drivers import calendars as c
from tickwork.drivers.rows import SpecCache
from tickwork.drivers.sqlfiles import load_queries
from tickwork.drivers.sqlite.connection import Connection, write_transaction
from tickwork.drivers.sqlite.rows import from_us, job_from_row, to_us, to_us_or_none
from tickwork.errors import Conflict
from tickwork.models import Job

Q = load_queries("tickwork.drivers.sqlite")


def _calendar(row: sqlite3.Row) -> c.StoredCalendar:
    return c.StoredCalendar(name=row["name"], document=json.loads(row["document"]),
                            version=row["version"], created_at=from_us(row["created_at"]),
                            updated_at=from_us(row["updated_at"]))


class SqliteCalendarMethods:
    _conn: Connection
    _specs: SpecCache

    async def calendar_create(self, p: c.CalendarWriteParams) -> c.StoredCalendar:
        def run(conn: sqlite3.Connection) -> c.StoredCalendar:
            with write_transaction(conn):
                try:
                    conn.execute(Q["calendar_insert"], (p.name, p.document, to_us(p.now),
                                                        to_us(p.now)))
                except sqlite3.IntegrityError:
                    raise Conflict(f"a calendar named {p.name!r} already exists") from None
                return _calendar(conn.execute(Q["calendar_get"], (p.name,)).fetchone())

        return await self._conn.run(run)

    async def calendar_update(self, p: c.CalendarWriteParams) -> c.StoredCalendar:
        def run(conn: sqlite3.Connection) -> c.StoredCalendar:
            with write_transaction(conn):
                cur = conn.execute(Q["calendar_update"], (p.document, to_us(p.now), p.name))
                if cur.rowcount == 0:
                    raise c.CalendarNotFound(p.name)
                return _calendar(conn.execute(Q["calendar_get"], (p.name,)).fetchone())

        return await self._conn.run(run)

    async def calendar_get(self, name: str) -> c.StoredCalendar:
        def run(conn: sqlite3.Connection) -> c.StoredCalendar:
            row = conn.execute(Q["calendar_get"], (name,)).fetchone()
            if row is None:
                raise c.CalendarNotFound(name)
            return _calendar(row)

        return await self._conn.run(run)

    async def calendar_list(self) -> list[c.StoredCalendar]:
        def run(conn: sqlite3.Connection) -> list[c.StoredCalendar]:
            return [_calendar(r) for r in conn.execute(Q["calendar_list"], (c.MAX_CALENDARS,))]

        return await self._conn.run(run)

    async def calendar_delete(self, p: c.CalendarDeleteParams) -> None:
        def run(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                if conn.execute(Q["calendar_get"], (p.name,)).fetchone() is None:
                    raise c.CalendarNotFound(p.name)
                users = conn.execute(Q["calendar_jobs"], ("", p.name, p.name, c.IN_USE_NAMED))
                names = sorted(row["name"] for row in users)
                if names:
                    raise c.CalendarInUse(p.name, names)
                conn.execute(Q["calendar_delete"], (p.name,))

        await self._conn.run(run)

    async def calendar_jobs(self, p: c.CalendarJobsParams) -> list[Job]:
        def run(conn: sqlite3.Connection) -> list[Job]:
            rows = conn.execute(Q["calendar_jobs"], (p.after_id or "", p.name, p.name,
                                                     min(p.limit, c.MAX_CALENDARS)))
            return [job_from_row(r, self._specs) for r in rows]

        return await self._conn.run(run)

    async def calendar_replan(self, p: c.CalendarReplanParams) -> int:
        def run(conn: sqlite3.Connection) -> int:
            with write_transaction(conn):
                dropped = sum(conn.execute(Q["calendar_drop_occurrence"],
                                           (p.job_id, to_us(t))).rowcount for t in p.drop)
                conn.execute(Q["calendar_job_next_run"], (to_us_or_none(p.next_run_at),
                                                          p.job_id))
            return dropped

        return await self._conn.run(run)
