"""Transactional enqueue: create a job inside your own psycopg transaction.

The job exists only if your transaction commits, together with whatever else it wrote (the
order row that needs a follow-up email, say)::

    async with await psycopg.AsyncConnection.connect(url) as conn:
        async with conn.transaction():
            await conn.execute("INSERT INTO orders ...")
            await create_job_in(conn, {"name": f"receipt-{order_id}", ...}, now=now)

The insert runs in a savepoint, so a duplicate name raises ``Conflict`` and leaves your
transaction usable. The planner picks the job up once it is committed.
"""

from __future__ import annotations

import getpass
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from tickwork.document import check_runs, first_run, to_spec
from tickwork.drivers.postgres.connection import Q, translate
from tickwork.drivers.postgres.rows import DEFAULT_SHARD_COUNT, shard_of
from tickwork.drivers.postgres.store import job_row
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
        next_run = first_run(spec, now, job_id)
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
