"""The SQLite store: the embedded deployment's source of truth.

Jobs and the store's lifecycle here; occurrences (``occurrences.py``) and claims (``claims.py``)
in mixins. Every method runs on the connection's own thread as one transaction;
writes take the write lock up front with ``BEGIN IMMEDIATE``, which is also what makes claims
exclusive.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tickwork.drivers import base as b
from tickwork.drivers.claiming import Margins
from tickwork.drivers.codec import new_job_ids, spec_to_json, specs_to_json
from tickwork.drivers.namespaces import check_max_jobs
from tickwork.drivers.rows import SpecCache
from tickwork.drivers.sqlfiles import load_migrations, load_queries, split_statements
from tickwork.drivers.sqlite.alerts import SqliteAlertMethods
from tickwork.drivers.sqlite.calendars import SqliteCalendarMethods
from tickwork.drivers.sqlite.claims import SqliteKeyMethods
from tickwork.drivers.sqlite.connection import Connection, path_from_url, write_transaction
from tickwork.drivers.sqlite.control import SqliteControlMethods, audit
from tickwork.drivers.sqlite.enqueue import SqliteEnqueueMethods
from tickwork.drivers.sqlite.history import SqliteHistoryMethods
from tickwork.drivers.sqlite.occurrences import SqliteOccurrenceMethods
from tickwork.drivers.sqlite.rows import from_us, job_from_row, job_shown, to_us, to_us_or_none
from tickwork.drivers.sqlite.versions import SqliteVersionMethods, take_version
from tickwork.errors import Conflict, JobNotFound, StoreError
from tickwork.models import AuditAction, Job, JobSpec

Q = load_queries("tickwork.drivers.sqlite")
MIGRATIONS = load_migrations("tickwork.drivers.sqlite")

if TYPE_CHECKING:
    from tickwork.drivers.sqlite.admin import SqliteAdmin


class SqliteStore(SqliteOccurrenceMethods, SqliteKeyMethods, SqliteCalendarMethods,
                  SqliteAlertMethods, SqliteControlMethods, SqliteHistoryMethods,
                  SqliteEnqueueMethods, SqliteVersionMethods):
    """``SqliteStore("sqlite:///tickwork.db")``; call ``migrate()`` once before use."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = path_from_url(url)
        self._conn = Connection(self.path)
        self._specs = SpecCache()
        self._margins = Margins()  # per queue: whether a claim reads past its limit

    # -- lifecycle ---------------------------------------------------------------------------

    async def migrate(self) -> None:
        def run(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS tickwork_migrations ("
                    "version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
                )
                done = {r[0] for r in conn.execute("SELECT version FROM tickwork_migrations")}
                for version, name, sql in MIGRATIONS:
                    if version in done:
                        continue
                    for statement in split_statements(sql):
                        conn.execute(statement)
                    conn.execute("INSERT INTO tickwork_migrations VALUES (?, ?)", (version, name))

        await self._conn.run(run)

    def admin(self) -> SqliteAdmin:
        """The AdminStore on this store's connection."""
        from tickwork.drivers.sqlite.admin import SqliteAdmin  # noqa: PLC0415  (it imports this module)

        return SqliteAdmin.for_store(self)

    async def migrations_pending(self) -> list[int]:
        """Read through a read-only connection of its own: the store's connection would
        create a missing file and switch an existing one to WAL."""
        if self.path == ":memory:":
            return [version for version, _, _ in MIGRATIONS]

        def run() -> list[int]:
            if not Path(self.path).exists():
                return [version for version, _, _ in MIGRATIONS]
            uri = f"{Path(self.path).absolute().as_uri()}?mode=ro"
            try:
                conn = sqlite3.connect(uri, uri=True)
                try:
                    table = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                                         "AND name = 'tickwork_migrations'").fetchone()
                    done = {r[0] for r in conn.execute(
                        "SELECT version FROM tickwork_migrations")} if table else set()
                finally:
                    conn.close()
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"SQLite database {self.path}: {exc}") from exc
            return [version for version, _, _ in MIGRATIONS if version not in done]

        return await asyncio.to_thread(run)

    async def close(self) -> None:
        await self._conn.close()

    # -- jobs --------------------------------------------------------------------------------

    async def job_create(self, p: b.JobCreateParams) -> Job:
        return (await self.job_create_many(b.JobCreateManyParams(jobs=[p])))[0]

    async def job_create_many(self, p: b.JobCreateManyParams) -> list[Job]:
        """One ``executemany``; the jobs returned are the ones built here, as they read back
        (instants in UTC), not read back row by row. Rows are encoded before the write lock."""
        items = list(p.jobs)  # all of them (and any error producing them) before the lock
        if not items:
            return []
        jobs, rows, audits = job_rows(items)
        versions = [(item.version, item.now) for item in items if item.version is not None]

        def run(conn: sqlite3.Connection) -> None:
            try:
                with write_transaction(conn):
                    for version, now in versions:
                        take_version(conn, version, now)
                    conn.executemany(Q["job_insert"], rows)
                    conn.executemany(Q["audit_insert"], audits)
                    if p.max_jobs is not None:
                        space = items[0].namespace
                        held = conn.execute(Q["jobs_in_namespace"], (space,)).fetchone()[0]
                        check_max_jobs(space, p.max_jobs, held, len(items))
            except sqlite3.IntegrityError as exc:
                # Named after the rollback: inside the transaction, the batch's own rows count
                # as taken and the error would name the wrong job.
                raise _name_conflict(
                    conn, [(item.namespace, item.spec.name) for item in items]) from exc

        await self._conn.run(run)
        return jobs

    async def job_get(self, ref: str, namespace: str | None = None) -> Job:
        def run(conn: sqlite3.Connection) -> Job:
            row = conn.execute(Q["job_by_id"], (ref,)).fetchone()
            if row is not None and namespace is not None and row["namespace"] != namespace:
                row = None  # another namespace's job is not found, whatever its id
            row = row or conn.execute(Q["job_by_name"], (ref, namespace, namespace)).fetchone()
            if row is None:
                raise JobNotFound(ref)
            return job_shown(row, self._specs)

        return await self._conn.run(run)

    async def job_list(self, p: b.JobListParams) -> list[Job]:
        where: list[str] = ["deleted_at IS NULL"]
        args: list[object] = []
        if p.namespace is not None:
            where.append("namespace = ?")
            args.append(p.namespace)
        if p.queue is not None:
            where.append("queue = ?")
            args.append(p.queue)
        if p.kind is not None:
            where.append("kind = ?")
            args.append(p.kind)
        if p.paused is not None:
            where.append("paused = ?")
            args.append(int(p.paused))
        if p.name_contains:
            where.append("instr(lower(name), lower(?)) > 0")
            args.append(p.name_contains)
        if p.tag is not None:
            where.append("EXISTS (SELECT 1 FROM json_each(jobs.tags) WHERE value = ?)")
            args.append(p.tag)
        if p.after_name is not None:
            where.append("name > ?")
            args.append(p.after_name)
        sql = (f"SELECT *, {PLANNED_RUN_AT} FROM jobs "  # noqa: S608  (only fixed fragments; values are parameters)
               f"WHERE {' AND '.join(where)} ORDER BY name LIMIT ?")
        args.append(min(p.limit, b.MAX_BATCH))

        def run(conn: sqlite3.Connection) -> list[Job]:
            return [job_shown(r, self._specs) for r in conn.execute(sql, args)]

        return await self._conn.run(run)

    async def job_update(self, p: b.JobUpdateParams) -> Job:
        def run(conn: sqlite3.Connection) -> Job:
            s = p.spec
            with write_transaction(conn):
                take_version(conn, p.version, p.now)
                try:
                    cur = conn.execute(Q["job_update"], (
                        s.name, s.queue, s.priority, s.kind, s.overlap.value, spec_to_json(s),
                        json.dumps(s.tags), int(s.paused), to_us_or_none(p.next_run_at),
                        to_us(p.now), p.actor, int(s.schedule.one_off), p.id,
                    ))
                except sqlite3.IntegrityError as exc:
                    row = conn.execute(Q["job_by_id"], (p.id,)).fetchone()
                    raise _name_conflict(conn, [(row["namespace"] if row else None, s.name)]
                                         ) from exc
                if cur.rowcount == 0:
                    raise JobNotFound(p.id)
                if p.replan:
                    conn.execute(Q["occurrence_unplan"], {"id": p.id, "now": to_us(p.now)})
                audit(conn, p.now, p.actor, AuditAction.UPDATE, p.id, name=s.name,
                      details=p.diff)
            return self._job_row(conn, p.id)

        return await self._conn.run(run)

    async def job_set_paused(self, p: b.JobSetPausedParams) -> Job:
        def run(conn: sqlite3.Connection) -> Job:
            with write_transaction(conn):
                current = self._job_row(conn, p.id)
                spec = _with_paused(current.spec, p.paused)
                conn.execute(Q["job_set_paused"], (
                    int(p.paused), spec_to_json(spec), to_us_or_none(p.next_run_at),
                    to_us(p.now), p.actor, p.id,
                ))
                audit(conn, p.now, p.actor,
                      AuditAction.PAUSE if p.paused else AuditAction.RESUME, p.id,
                      name=spec.name)
            return self._job_row(conn, p.id)

        return await self._conn.run(run)

    async def job_delete(self, p: b.JobDeleteParams) -> None:
        def run(conn: sqlite3.Connection) -> None:
            now = to_us(p.now)
            with write_transaction(conn):
                take_version(conn, p.version, p.now)
                if conn.execute(Q["job_delete"], (now, now, p.actor, p.id)).rowcount == 0:
                    raise JobNotFound(p.id)
                conn.execute(Q["attempt_close_running_of_job"], (now, "job deleted", p.id))
                cancelled = conn.execute(
                    Q["occurrence_cancel_job"], (now, now, "job deleted", p.id)).rowcount
                audit(conn, p.now, p.actor, AuditAction.DELETE, p.id,
                      details={"cancelled_runs": cancelled})

        await self._conn.run(run)

    async def job_due(self, p: b.JobDueParams) -> list[Job]:
        def run(conn: sqlite3.Connection) -> list[Job]:
            shards = None if p.shards is None else json.dumps(sorted(p.shards))
            rows = conn.execute(Q["job_due"], {
                "until": to_us(p.until), "until_once": to_us_or_none(p.until_one_off),
                "shards": shards, "limit": min(p.limit, b.MAX_BATCH)})
            return [job_from_row(r, self._specs) for r in rows]

        return await self._conn.run(run)

    async def job_advance_many(self, p: b.JobAdvanceManyParams) -> int:
        def run(conn: sqlite3.Connection) -> int:
            now = to_us(p.now)
            inserted = 0
            with write_transaction(conn):
                for adv in p.advances:
                    cur = conn.execute(Q["job_advance"], (
                        to_us_or_none(adv.next_run_at), adv.job_id, to_us(adv.expected_next_run_at),
                    ))
                    if cur.rowcount == 0:
                        continue  # another planner moved it, or it was paused or deleted
                    inserted += self._insert_occurrences(conn, adv.occurrences, now)
            return inserted

        return await self._conn.run(run)

    # -- helpers (on the connection's thread) ------------------------------------------------

    def _job_row(self, conn: sqlite3.Connection, job_id: str) -> Job:
        row = conn.execute(Q["job_by_id"], (job_id,)).fetchone()
        if row is None:
            raise JobNotFound(job_id)
        return job_from_row(row, self._specs)


def _with_paused(spec: JobSpec, paused: bool) -> JobSpec:
    return replace(spec, paused=paused)


Row = tuple[object, ...]


# A one-off job's run planned and not started yet (job_by_id and job_by_name have it too).
PLANNED_RUN_AT = """(CASE WHEN once = 1 AND next_run_at IS NULL THEN (
    SELECT min(o.scheduled_at) FROM occurrences o
    WHERE o.job_id = jobs.id AND o.trigger = 'schedule' AND o.state IN ('scheduled', 'queued'))
  END) AS planned_run_at"""


def job_rows(items: list[b.JobCreateParams]) -> tuple[list[Job], list[Row], list[Row]]:
    """The jobs ``items`` create, their rows for ``job_insert`` and for ``audit_insert``."""
    jobs: list[Job] = []
    rows: list[Row] = []
    instants: dict[datetime, tuple[datetime, int]] = {}
    specs = specs_to_json(item.spec for item in items)
    for item, new_id, spec in zip(items, new_job_ids(len(items)), specs, strict=True):
        s = item.spec
        now, now_us = _stored(instants, item.now)
        next_run, next_us = (None, None) if item.next_run_at is None else _stored(
            instants, item.next_run_at)
        job = Job(id=item.id or new_id, spec=s, next_run_at=next_run, created_at=now,
                  updated_at=now, created_by=item.actor, updated_by=item.actor,
                  namespace=item.namespace)
        jobs.append(job)
        rows.append((job.id, s.name, s.queue, s.priority, s.kind, s.overlap.value,
                     spec, json.dumps(s.tags) if s.tags else "[]", int(s.paused),
                     next_us, now_us, now_us, item.actor, item.actor, item.namespace,
                     int(s.schedule.one_off)))
    audits: list[Row] = [(row[10], row[12], AuditAction.CREATE.value, row[0], row[1], None,
                          None) for row in rows]
    return jobs, rows, audits


def _stored(seen: dict[datetime, tuple[datetime, int]],
            instant: datetime) -> tuple[datetime, int]:
    """``instant`` as read back (UTC, microseconds) and as stored; a batch shares a few (and
    equal instants in other offsets read back the same)."""
    known = seen.get(instant)
    if known is None:
        stored = to_us(instant)
        known = seen[instant] = (from_us(stored), stored)
    return known


def _name_conflict(conn: sqlite3.Connection, names: list[tuple[str | None, str]]) -> Conflict:
    """``names``: (namespace, name) of each job written."""
    taken = [n for n in names
             if conn.execute(Q["job_by_name"], (n[1], n[0], n[0])).fetchone() is not None]
    if taken:
        name = taken[0][1]
    else:  # the clash is inside the batch itself
        seen: set[tuple[str | None, str]] = set()
        name = next((n for n in names if n in seen or _add(seen, n)), names[0])[1]
    return Conflict(f"a job named {name!r} already exists")


def _add(seen: set[tuple[str | None, str]], name: tuple[str | None, str]) -> bool:
    seen.add(name)
    return False
