"""The PostgreSQL store: jobs and the store's lifecycle; occurrences and claims in mixins.

Every method is one transaction on a pooled connection, and takes ``now`` from its params:
the store never reads a clock of its own (except, with ``server_clock``, to refuse a claim the
database's clock says is early).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import datetime
from itertools import chain, islice
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import sql

from tickwork.drivers import base as b
from tickwork.drivers.claiming import Margins
from tickwork.drivers.codec import new_job_ids, spec_to_json, specs_to_json
from tickwork.drivers.namespaces import check_max_jobs
from tickwork.drivers.postgres.alerts import AlertMethods
from tickwork.drivers.postgres.calendars import CalendarMethods
from tickwork.drivers.postgres.claims import KeyClaimMethods
from tickwork.drivers.postgres.connection import Conn, Pool, Q, fetch_all, fetch_one
from tickwork.drivers.postgres.control import ControlMethods, audit
from tickwork.drivers.postgres.enqueue import EnqueueMethods
from tickwork.drivers.postgres.history import HistoryMethods
from tickwork.drivers.postgres.leases import ShardLeaseMethods
from tickwork.drivers.postgres.occurrences import OccurrenceMethods
from tickwork.drivers.postgres.rows import (
    DEFAULT_SHARD_COUNT,
    job_from_row,
    job_shown,
    shard_of,
)
from tickwork.drivers.postgres.versions import VersionMethods, take_version
from tickwork.drivers.rows import SpecCache
from tickwork.drivers.sqlfiles import load_migrations
from tickwork.errors import Conflict, JobNotFound, StoreError
from tickwork.models import AuditAction, Job, JobSpec, utc

MIGRATIONS = load_migrations("tickwork.drivers.postgres")
T = TypeVar("T")

if TYPE_CHECKING:
    from tickwork.drivers.postgres.admin import PostgresAdmin


class PostgresStore(OccurrenceMethods, KeyClaimMethods, HistoryMethods, AlertMethods,
                    ShardLeaseMethods, CalendarMethods, ControlMethods, EnqueueMethods,
                    VersionMethods):
    """``PostgresStore("postgresql://user@host/db")``; call ``migrate()`` once before use.

    ``shard_count`` applies when ``migrate()`` creates the database; afterwards the database's
    own value holds. ``server_clock``: claims also require ``due_at <= now()`` on the server.
    """

    def __init__(self, url: str, *, shard_count: int = DEFAULT_SHARD_COUNT,
                 server_clock: bool = False, min_pool_size: int = 1,
                 max_pool_size: int = 10) -> None:
        if not 1 <= shard_count <= 4096:
            raise ValueError(f"shard_count must be from 1 to 4096 (got {shard_count})")
        self.url = url
        self.pool = Pool(url, min_size=min_pool_size, max_size=max_pool_size)
        self.server_clock = server_clock
        self._initial_shard_count = shard_count
        self._shard_count: int | None = None
        self._specs = SpecCache()
        self._margins = Margins()  # per queue: whether a claim reads past its limit

    # -- lifecycle ---------------------------------------------------------------------------

    async def migrate(self) -> None:
        """Apply pending migrations; concurrent migrators wait on an advisory lock."""
        async with self.pool.transaction() as conn:
            await conn.execute(Q["migrations_lock"])
            await conn.execute(Q["migrations_table"])
            done = {r["version"] for r in await fetch_all(conn, Q["migrations_done"])}
            for version, name, text in MIGRATIONS:
                if version in done:
                    continue
                # A whole file at once (no parameters: the simple protocol runs many statements).
                await conn.execute(text)  # our own file, not user input
                await conn.execute(Q["migration_record"], (version, name))
            await conn.execute(Q["meta_init"], ("shard_count", str(self._initial_shard_count)))
            count = await self._read_shard_count(conn)
            await conn.execute(Q["shard_leases_init"], (count,))

    def admin(self) -> PostgresAdmin:
        """The AdminStore on this store's pool."""
        from tickwork.drivers.postgres.admin import PostgresAdmin  # noqa: PLC0415  (it imports this module)

        return PostgresAdmin.for_store(self)

    async def migrations_pending(self) -> list[int]:
        async with self.pool.transaction() as conn:
            row = await fetch_one(conn, Q["migrations_table_exists"])
            done = {r["version"] for r in await fetch_all(conn, Q["migrations_done"])
                    } if row and row["present"] else set()
        return [version for version, _, _ in MIGRATIONS if version not in done]

    async def close(self) -> None:
        await self.pool.close()

    async def shard_count(self) -> int:
        """How many shards this database's jobs are spread over."""
        if self._shard_count is None:
            async with self.pool.transaction() as conn:
                await self._read_shard_count(conn)
        assert self._shard_count is not None
        return self._shard_count

    async def _read_shard_count(self, conn: Conn) -> int:
        if self._shard_count is None:
            row = await fetch_one(conn, Q["meta_get"], ("shard_count",))
            self._shard_count = int(row["value"]) if row else DEFAULT_SHARD_COUNT
        return self._shard_count

    # -- jobs --------------------------------------------------------------------------------

    async def job_create(self, p: b.JobCreateParams) -> Job:
        return (await self.job_create_many(b.JobCreateManyParams(jobs=[p])))[0]

    async def job_create_many(self, p: b.JobCreateManyParams) -> list[Job]:
        """One COPY for the whole batch: 100,000 jobs are one round trip, not 100,000.

        In binary format, with the column types given: the server parses no text, and rows are
        encoded without looking up an adapter for each value. Jobs are taken COPY_CHUNK at a
        time and their rows sent as they are encoded, so the server inserts one chunk while the
        next is produced (bulk creation validates its documents then) and encoded.
        """
        chunks = _chunks(p.jobs, COPY_CHUNK)
        first = next(chunks, None)
        if first is None:
            return []
        shards = await self.shard_count()
        jobs: list[Job] = []
        versions: list[tuple[b.JobVersion, datetime]] = []
        try:
            async with self.pool.transaction() as conn:
                space = first[0].namespace
                if p.max_jobs is not None:  # creations into one namespace, one at a time
                    await conn.execute(Q["namespace_lock"], (space,))
                cur = conn.cursor()
                async with cur.copy(Q["job_copy"]) as copy:
                    copy.set_types(JOB_COPYTYPES)
                    for chunk in chain([first], chunks):
                        versions += [(i.version, i.now) for i in chunk if i.version is not None]
                        made = _new_jobs(chunk, shards)
                        jobs += made
                        specs = specs_to_json(job.spec for job in made)
                        for job, spec in zip(made, specs, strict=True):
                            await copy.write_row(job_row(job, spec))
                for version, now in versions:
                    await take_version(conn, version, now)
                async with cur.copy(Q["audit_copy_created"]) as copy:
                    copy.set_types(AUDIT_COPYTYPES)
                    for job in jobs:
                        await copy.write_row((job.created_at, job.created_by, CREATE,
                                              job.id, job.spec.name))
                if p.max_jobs is not None:
                    row = await fetch_one(conn, Q["jobs_in_namespace"], (space,))
                    assert row is not None
                    check_max_jobs(space, p.max_jobs, row["count"], len(jobs))
        except StoreError as exc:
            raise await self._conflict_of(exc, jobs) from exc
        return jobs

    async def _conflict_of(self, exc: StoreError, jobs: list[Job]) -> StoreError | Conflict:
        """Named after the rollback: inside the transaction the batch's own rows count as taken."""
        cause = exc.__cause__
        if not isinstance(cause, psycopg.errors.UniqueViolation):
            return exc
        names = [j.spec.name for j in jobs]
        spaces = [j.namespace for j in jobs]
        ids = [j.id for j in jobs]
        async with self.pool.transaction() as conn:
            taken = {(r["namespace"], r["name"]) for r in await fetch_all(
                conn, Q["job_names_taken"], (spaces, names))}
            taken_ids = {r["id"] for r in await fetch_all(conn, Q["job_ids_taken"], (ids,))}
        if cause.diag.constraint_name == "jobs_pkey":
            clash = next((i for i in ids if i in taken_ids), _first_repeat(ids))
            return Conflict(f"a job with id {clash!r} already exists")
        pairs = list(zip(spaces, names, strict=True))
        name = next((n for s, n in pairs if (s, n) in taken), _first_repeat(pairs)[1])
        return Conflict(f"a job named {name!r} already exists")

    async def job_get(self, ref: str, namespace: str | None = None) -> Job:
        async with self.pool.transaction() as conn:
            row = await fetch_one(conn, Q["job_by_id"], (ref,))
            if row is not None and namespace is not None and row["namespace"] != namespace:
                row = None  # another namespace's job is not found, whatever its id
            row = row or await fetch_one(conn, Q["job_by_name"],
                                         {"name": ref, "namespace": namespace})
        if row is None:
            raise JobNotFound(ref)
        return job_shown(row, self._specs)

    async def job_list(self, p: b.JobListParams) -> list[Job]:
        where: list[sql.Composable] = [sql.SQL("deleted_at IS NULL")]
        args: list[Any] = []
        for column, value in (("queue", p.queue), ("kind", p.kind), ("paused", p.paused),
                              ("namespace", p.namespace)):
            if value is not None:
                where.append(sql.SQL("{} = %s").format(sql.Identifier(column)))
                args.append(value)
        if p.name_contains:
            where.append(sql.SQL("strpos(lower(name), lower(%s)) > 0"))
            args.append(p.name_contains)
        if p.tag is not None:
            where.append(sql.SQL("tags @> ARRAY[%s]::text[]"))
            args.append(p.tag)
        if p.after_name is not None:
            where.append(sql.SQL('name COLLATE "C" > %s'))
            args.append(p.after_name)
        query = sql.SQL("SELECT *, {} FROM jobs WHERE {} ORDER BY name COLLATE \"C\" LIMIT %s"
                        ).format(sql.SQL(PLANNED_RUN_AT), sql.SQL(" AND ").join(where))
        args.append(min(p.limit, b.MAX_BATCH))
        async with self.pool.transaction() as conn:
            rows = await (await conn.execute(query, args)).fetchall()
        return [job_shown(r, self._specs) for r in rows]

    async def job_update(self, p: b.JobUpdateParams) -> Job:
        s = p.spec
        try:
            async with self.pool.transaction() as conn:
                await take_version(conn, p.version, p.now)
                row = await fetch_one(conn, Q["job_update"], (
                    s.name, s.queue, s.priority, s.kind, s.overlap.value, s.timeout_seconds,
                    spec_to_json(s), list(s.tags), s.paused, p.next_run_at, p.now, p.actor,
                    s.schedule.one_off, p.id))
                if row is not None:
                    if p.replan:
                        await conn.execute(Q["occurrence_unplan"], {"id": p.id, "now": p.now})
                    await audit(conn, p.now, p.actor, AuditAction.UPDATE, p.id, name=s.name,
                                details=p.diff)
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise Conflict(f"a job named {s.name!r} already exists") from exc
            raise
        if row is None:
            raise JobNotFound(p.id)
        return job_from_row(row, self._specs)

    async def job_set_paused(self, p: b.JobSetPausedParams) -> Job:
        async with self.pool.transaction() as conn:
            current = await fetch_one(conn, Q["job_for_update"], (p.id,))
            if current is None:
                raise JobNotFound(p.id)
            spec = replace(job_from_row(current, self._specs).spec, paused=p.paused)
            row = await fetch_one(conn, Q["job_set_paused"], (
                p.paused, spec_to_json(spec), p.next_run_at, p.now, p.actor, p.id))
            await audit(conn, p.now, p.actor,
                        AuditAction.PAUSE if p.paused else AuditAction.RESUME, p.id,
                        name=spec.name)
        assert row is not None
        return job_from_row(row, self._specs)

    async def job_delete(self, p: b.JobDeleteParams) -> None:
        args = {"id": p.id, "job_id": p.id, "now": p.now, "reason": "job deleted",
                "actor": p.actor}
        async with self.pool.transaction() as conn:
            await take_version(conn, p.version, p.now)
            cur = await conn.execute(Q["job_delete"], args)
            if cur.rowcount == 0:
                raise JobNotFound(p.id)
            await conn.execute(Q["attempt_close_running_of_job"], args)
            cancelled = (await conn.execute(Q["occurrence_cancel_job"], args)).rowcount
            await audit(conn, p.now, p.actor, AuditAction.DELETE, p.id,
                        details={"cancelled_runs": cancelled})

    async def job_due(self, p: b.JobDueParams) -> list[Job]:
        async with self.pool.transaction() as conn:
            rows = await fetch_all(conn, Q["job_due"], {
                "until": p.until, "until_once": p.until_one_off,
                "limit": min(p.limit, b.MAX_BATCH),
                "shards": None if p.shards is None else sorted(p.shards)})
        return [job_from_row(r, self._specs) for r in rows]

    async def job_advance_many(self, p: b.JobAdvanceManyParams) -> int:
        if not p.advances:
            return 0
        advances = sorted(p.advances, key=lambda a: a.job_id)
        async with self.pool.transaction() as conn:
            moved = {r["id"] for r in await fetch_all(conn, Q["job_advance"], {
                "ids": [a.job_id for a in advances],
                "expected": [a.expected_next_run_at for a in advances],
                "next": [a.next_run_at for a in advances]})}
            occurrences = [o for a in advances if a.job_id in moved for o in a.occurrences]
            return await self._insert_occurrences(conn, occurrences, p.now)


COPY_CHUNK = 500  # jobs taken and encoded at a time by job_create_many


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def _new_jobs(items: list[b.JobCreateParams], shards: int) -> list[Job]:
    jobs: list[Job] = []
    for item, new_id in zip(items, new_job_ids(len(items)), strict=True):
        job_id = item.id or new_id
        now, next_run = item.now, item.next_run_at
        if now.tzinfo is None or (next_run is not None and next_run.tzinfo is None):
            # Naive instants are UTC (the session's time zone); binary COPY wants them aware.
            now, next_run = utc(now), None if next_run is None else utc(next_run)
        jobs.append(Job(id=job_id, spec=item.spec, next_run_at=next_run, created_at=now,
                        updated_at=now, shard=shard_of(job_id, shards),
                        created_by=item.actor, updated_by=item.actor,
                        namespace=item.namespace))
    return jobs


# A one-off job's run planned and not started yet (job_by_id and job_by_name have it too).
PLANNED_RUN_AT = """(CASE WHEN once AND next_run_at IS NULL THEN (
    SELECT min(o.scheduled_at) FROM occurrences o
    WHERE o.job_id = jobs.id AND o.trigger = 'schedule' AND o.state IN ('scheduled', 'queued'))
  END) AS planned_run_at"""
# The columns of audit_copy_created, in order.
AUDIT_COPYTYPES = ("timestamptz", "text", "text", "text", "text")
CREATE = AuditAction.CREATE.value
# The columns of job_copy and job_insert, in order, as job_row gives them.
JOB_COPYTYPES = ("text", "text", "text", "int4", "text", "text", "float8", "text", "text[]",
                  "bool", "timestamptz", "int4", "timestamptz", "timestamptz", "text", "text",
                  "text", "bool")


def job_row(job: Job, spec_json: str | None = None) -> tuple[Any, ...]:
    s: JobSpec = job.spec
    return (job.id, s.name, s.queue, s.priority, s.kind, s.overlap.value, s.timeout_seconds,
            spec_to_json(s) if spec_json is None else spec_json, list(s.tags), s.paused,
            job.next_run_at, job.shard, job.created_at, job.updated_at, job.created_by,
            job.updated_by, job.namespace, s.schedule.one_off)


def _first_repeat(values: list[T]) -> T:
    seen: set[T] = set()
    for value in values:
        if value in seen:
            return value
        seen.add(value)
    return values[0]
