"""Transactional enqueue: create a job inside your own psycopg transaction.

The job exists only if your transaction commits, together with whatever else it wrote (the
order row that needs a follow-up email, say)::

    async with await psycopg.AsyncConnection.connect(url) as conn:
        async with conn.transaction():
            await conn.execute("INSERT INTO orders ...")
            await create_job_in(conn, {"name": f"receipt-{order_id}", ...}, now=now)

The insert runs in a savepoint, so a duplicate name raises ``Conflict`` and leaves your
transaction usable. The planner picks the job up once it is committed.

The job goes to ``namespace`` (default ``default``), and meets its quotas as every other way
of creating one does (client/quotas.py: ``max_payload_bytes``, ``max_jobs``; QuotaExceeded,
with your transaction still usable); its secret references are checked in that namespace. With
a ``max_jobs`` quota, the namespace's creation lock is taken on your connection and held until
your transaction ends, so two transactions racing for the last place cannot both take it:
keep such transactions short.

``enqueue_in`` does the same for a one-off job without a name (``AsyncClient.enqueue``'s
arguments), dedupe key included: a second transaction enqueueing the same key waits for yours
and, once it commits, gets your job back.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from tickwork.client.namespaces import check_namespace
from tickwork.client.oneoff import enqueue_document, enqueue_params, parse_requests
from tickwork.client.owners import owner_check
from tickwork.client.quotas import CreateGuard
from tickwork.client.references import check_many
from tickwork.document import check_runs, first_run, to_spec
from tickwork.drivers.codec import new_job_id
from tickwork.drivers.enqueue import Enqueued
from tickwork.drivers.limits import LimitOwners, limit_owners_of
from tickwork.drivers.namespaces import DEFAULT_NAMESPACE, NamespaceInfo, Quotas
from tickwork.drivers.postgres.connection import Q, translate
from tickwork.drivers.postgres.enqueue import enqueue_on
from tickwork.drivers.postgres.rows import DEFAULT_SHARD_COUNT, shard_of
from tickwork.drivers.postgres.store import job_row
from tickwork.drivers.rows import SpecCache
from tickwork.errors import Conflict
from tickwork.models import Job, JobSpec, utc


async def create_job_in(conn: psycopg.AsyncConnection[Any], job: Mapping[str, Any] | JobSpec,
                        *, now: datetime, id: str | None = None,
                        actor: str | None = None,
                        namespace: str = DEFAULT_NAMESPACE) -> Job:
    """Create ``job`` (a job document or a JobSpec) on ``conn``, in its current transaction,
    in ``namespace`` (within its quotas: QuotaExceeded).

    ``actor`` (default: the OS user) is its ``created_by`` and its audit entry's actor."""
    spec = to_spec(job)
    namespace = check_namespace(namespace)
    now = utc(now)
    job_id = id or new_job_id()
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
                      created_by=who, updated_by=who, namespace=namespace)
        async with conn.transaction():  # a savepoint inside the caller's transaction
            (await _quota_guard(cur, namespace)).check(spec)
            (await _owner_check(cur, namespace))(spec)
            await _check_secrets(cur, namespace, [spec], indexed=False)
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
                     actor: str | None = None, namespace: str = DEFAULT_NAMESPACE,
                     **fields: Any) -> Enqueued:
    """``AsyncClient.enqueue`` on ``conn``, in its current transaction, into ``namespace``."""
    doc = enqueue_document(kind, payload, at=at, queue=queue, retry=retry,
                           dedupe_key=dedupe_key, dedupe_window=dedupe_window, **fields)
    return (await enqueue_many_in(conn, [doc], now=now, actor=actor, indexed=False,
                                  namespace=namespace))[0]


async def enqueue_many_in(conn: psycopg.AsyncConnection[Any],
                          requests: list[Mapping[str, Any]], *, now: datetime,
                          actor: str | None = None, indexed: bool = True,
                          namespace: str = DEFAULT_NAMESPACE) -> list[Enqueued]:
    """``AsyncClient.enqueue_many`` on ``conn``, in its current transaction, into
    ``namespace`` (within its quotas: QuotaExceeded)."""
    namespace = check_namespace(namespace)
    now = utc(now)
    who = actor if actor is not None else getpass.getuser()
    try:
        cur = conn.cursor(row_factory=dict_row)
        guard = await _quota_guard(cur, namespace)
        owned = await _owner_check(cur, namespace)

        def check(spec: JobSpec) -> None:
            guard.check(spec)
            owned(spec)

        parsed = parse_requests(requests, now, check, indexed=indexed)
        await _check_secrets(cur, namespace, [r.spec for r in parsed], indexed=indexed)
        await cur.execute(Q["meta_get"], ("shard_count",))
        row = await cur.fetchone()
        shards = int(row["value"]) if row else DEFAULT_SHARD_COUNT
        return await enqueue_on(conn, enqueue_params(parsed, now, who, namespace), shards,
                                SpecCache())
    except psycopg.Error as exc:
        raise translate(exc, "(your connection)") from exc


async def _quota_guard(cur: psycopg.AsyncCursor[dict[str, Any]], namespace: str) -> CreateGuard:
    """The namespace's job quotas, read on the caller's connection, as the client reads them
    (client/quotas.py). With ``max_jobs``, the namespace's creation lock comes first: the
    count stays true until the caller's transaction ends."""
    await cur.execute(Q["namespace_quotas"], (namespace,))
    row = await cur.fetchone()
    quotas = Quotas() if row is None else Quotas(
        max_jobs=row["max_jobs"], max_runs_per_hour=row["max_runs_per_hour"],
        max_payload_bytes=row["max_payload_bytes"])
    jobs = 0
    if quotas.max_jobs is not None:
        await cur.execute(Q["namespace_lock"], (namespace,))
        await cur.execute(Q["jobs_in_namespace"], (namespace,))
        counted = await cur.fetchone()
        jobs = int(counted["count"]) if counted else 0
    return CreateGuard(NamespaceInfo(name=namespace, quotas=quotas, jobs=jobs, runs_this_hour=0))


async def _owner_check(cur: psycopg.AsyncCursor[dict[str, Any]],
                       namespace: str) -> Callable[[JobSpec], None]:
    """The queues and keys the specs name, owned by ``namespace`` or shared
    (client/owners.py), read on the caller's connection."""
    async def owners() -> LimitOwners:
        await cur.execute(Q["limit_owners"])
        return limit_owners_of(await cur.fetchall())

    return await owner_check(namespace, owners)


async def _check_secrets(cur: psycopg.AsyncCursor[dict[str, Any]], namespace: str,
                         specs: list[JobSpec], *, indexed: bool) -> None:
    """The specs' secret references, checked in ``namespace`` (client/references.py)."""
    async def names(space: str) -> set[str]:
        await cur.execute(Q["secret_names"], (space,))
        return {str(r["name"]) for r in await cur.fetchall()}

    await check_many(specs, namespace, names, indexed=indexed)
