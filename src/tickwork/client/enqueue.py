"""Transactional enqueue: create a job inside your own psycopg transaction.

The job exists only if your transaction commits, together with whatever else it wrote (the
order row that needs a follow-up email, say)::

    async with await psycopg.AsyncConnection.connect(url) as conn:
        async with conn.transaction():
            await conn.execute("INSERT INTO orders ...")
            await create_job_in(conn, {"name": f"receipt-{order_id}", ...}, now=now)

The insert runs in a savepoint, so a duplicate name raises ``Conflict`` and leaves your
transaction usable. The planner picks the job up once it is committed.

``enqueue_in`` does the same for a one-off job without a name (``AsyncClient.enqueue``'s
arguments), dedupe key included: a second transaction enqueueing the same key waits for yours
and, once it commits, gets your job back.
"""

from __future__ import annotations

import getpass
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from tickwork.client.oneoff import enqueue_document, enqueue_params, parse_requests
from tickwork.document import check_runs, first_run, to_spec
from tickwork.drivers.enqueue import Enqueued
from tickwork.drivers.postgres.connection import Q, translate
from tickwork.drivers.postgres.enqueue import enqueue_on
from tickwork.drivers.postgres.rows import DEFAULT_SHARD_COUNT, shard_of
from tickwork.drivers.postgres.store import job_row
from tickwork.drivers.rows import SpecCache
from tickwork.errors import Conflict
from tickwork.models import Job, JobSpec, utc


async def create_job_in(conn: psycopg.AsyncConnection[Any], job: Mapping[str, Any] | JobSpec,
                        *, now: datetime, id: str | None = None,
                        actor: str | None = None) -> Job:
    """Create ``job`` (a job document or a JobSpec) on ``conn``, in its current transaction.

    ``actor`` (default: the OS user) is its ``created_by`` and its audit entry's actor."""
    spec = to_spec(job)
    now = utc(now)
    job_id = id or uuid.uuid4().hex
    try:
        # Outside a transaction block, this first statement opens the caller's own (implicit)
        # transaction, so the savepoint below nests in it instead of committing on its own.
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(Q["meta_get"], ("shard_count",))
        row = await cur.fetchone()
        shards = int(row["value"]) if row else DEFAULT_SHARD_COUNT
        next_run = first_run(spec, now)
        check_runs(spec, next_run, now)
        who = actor if actor is not None else getpass.getuser()
        created = Job(id=job_id, spec=spec, next_run_at=next_run,
                      created_at=now, updated_at=now, shard=shard_of(job_id, shards),
                      created_by=who, updated_by=who)
        async with conn.transaction():  # a savepoint inside the caller's transaction
            await cur.execute(Q["job_insert"], job_row(created))
            await cur.execute(Q["audit_insert_created"], {"ids": [job_id]})
    except psycopg.errors.UniqueViolation as exc:
        what = (f"id {job_id!r}" if exc.diag.constraint_name == "jobs_pkey"
                else f"name {spec.name!r}")
        raise Conflict(f"a job with {what} already exists") from exc
    except psycopg.Error as exc:
        raise translate(exc, "(your connection)") from exc
    return created


async def enqueue_in(conn: psycopg.AsyncConnection[Any], kind: str,
                     payload: Mapping[str, Any], *, now: datetime,
                     at: datetime | None = None, queue: str | None = None,
                     retry: Mapping[str, Any] | None = None, dedupe_key: str | None = None,
                     dedupe_window: float | str | timedelta | None = None,
                     actor: str | None = None, **fields: Any) -> Enqueued:
    """``AsyncClient.enqueue`` on ``conn``, in its current transaction."""
    doc = enqueue_document(kind, payload, at=at, queue=queue, retry=retry,
                           dedupe_key=dedupe_key, dedupe_window=dedupe_window, **fields)
    return (await enqueue_many_in(conn, [doc], now=now, actor=actor, indexed=False))[0]


async def enqueue_many_in(conn: psycopg.AsyncConnection[Any],
                          requests: list[Mapping[str, Any]], *, now: datetime,
                          actor: str | None = None, indexed: bool = True) -> list[Enqueued]:
    """``AsyncClient.enqueue_many`` on ``conn``, in its current transaction."""
    now = utc(now)
    parsed = parse_requests(requests, now, indexed=indexed)
    who = actor if actor is not None else getpass.getuser()
    try:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(Q["meta_get"], ("shard_count",))
        row = await cur.fetchone()
        shards = int(row["value"]) if row else DEFAULT_SHARD_COUNT
        return await enqueue_on(conn, enqueue_params(parsed, now, who), shards, SpecCache())
    except psycopg.Error as exc:
        raise translate(exc, "(your connection)") from exc
