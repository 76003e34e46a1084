"""Enqueue and purge on PostgreSQL (the seam is ``drivers/enqueue.py``).

``enqueue_on`` runs on any connection inside its current transaction: the store's own
(``job_enqueue``) or a caller's (``client/enqueue.py``, transactional enqueue). A dedupe key is
taken with ``INSERT ... ON CONFLICT``: of two enqueues racing on one key, the second waits on
the first's row and, once it commits, finds the key held and returns the first's job.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, LiteralString

import psycopg
from psycopg.rows import DictRow, dict_row

from tickwork.drivers.enqueue import (
    Enqueued,
    EnqueueItem,
    JobEnqueueParams,
    JobPurgeParams,
    JobsPurged,
)
from tickwork.drivers.postgres.connection import Pool, Q, fetch_all
from tickwork.drivers.postgres.rows import job_from_row
from tickwork.drivers.rows import SpecCache
from tickwork.errors import Conflict, StoreError
from tickwork.models import Job

Cursor = psycopg.AsyncCursor[DictRow]
TAKE_TRIES = 5  # a key's holder may be purged or taken over between two statements


async def enqueue_on(conn: psycopg.AsyncConnection[Any], p: JobEnqueueParams, shards: int,
                     specs: SpecCache) -> list[Enqueued]:
    """Create the jobs of ``p`` on ``conn`` (no commit): a savepoint, so a name conflict
    raises ``Conflict`` and leaves the caller's transaction usable."""
    from tickwork.drivers.postgres.store import _new_jobs, job_row  # noqa: PLC0415  (it imports this module)

    made = _new_jobs([item.create for item in p.items], shards)
    pending = {job.id: job for job in made}
    results: list[Enqueued] = []
    cur = conn.cursor(row_factory=dict_row)  # the caller's connection may hand out tuples
    try:
        async with conn.transaction():
            for item, job in zip(p.items, made, strict=True):
                held = None if item.dedupe_key is None else await _take(
                    cur, item, job.id, p, pending=pending, specs=specs)
                if held is None:
                    results.append(Enqueued(job=job, created=True))
                else:
                    del pending[job.id]
                    results.append(Enqueued(job=held, created=False))
            new = [r.job for r in results if r.created]
            if new:
                await cur.executemany(Q["job_insert"], [job_row(job) for job in new])
                await cur.execute(Q["audit_insert_created"], {"ids": [j.id for j in new]})
    except psycopg.errors.UniqueViolation as exc:
        raise Conflict(f"a job with {_clash(exc)} already exists") from exc
    return results


def _clash(exc: psycopg.errors.UniqueViolation) -> str:
    """``name 'x'`` from the violation's detail, ``Key (name)=(x) already exists.``"""
    detail = exc.diag.message_detail or ""
    column, _, rest = detail.removeprefix("Key (").partition(")=(")
    value = rest.rpartition(") already exists")[0]
    return f"{column} {value!r}" if column and value else "this name"


async def _one(cur: Cursor, query: LiteralString, args: Any) -> DictRow | None:
    await cur.execute(query, args)
    return await cur.fetchone()


async def _take(cur: Cursor, item: EnqueueItem, job_id: str, p: JobEnqueueParams, *,
                pending: dict[str, Job], specs: SpecCache) -> Job | None:
    """None if the key is now this job's; else the live job holding it."""
    args = {"key": item.dedupe_key, "job_id": job_id, "now": p.now,
            "until": item.dedupe_until or p.now}
    for _ in range(TAKE_TRIES):
        if await _one(cur, Q["dedupe_take"], args):
            return None
        row = await _one(cur, Q["dedupe_holder"], args)
        if row is None:
            continue  # purged since: try again
        holder = row["job_id"]
        if holder in pending:  # an earlier item of this batch, not written yet
            return pending[holder]
        live = await _one(cur, Q["job_by_id"], (holder,))
        if live is not None:
            return job_from_row(live, specs)
        if await _one(cur, Q["dedupe_take_over"], {**args, "holder": holder}):
            return None
    raise StoreError(f"dedupe key {item.dedupe_key!r} changed hands {TAKE_TRIES} times "
                     "during one enqueue; try again")


class EnqueueMethods:
    pool: Pool
    _specs: SpecCache

    shard_count: Callable[[], Awaitable[int]]

    async def job_enqueue(self, p: JobEnqueueParams) -> list[Enqueued]:
        if not p.items:
            return []
        shards = await self.shard_count()
        async with self.pool.transaction() as conn:
            return await enqueue_on(conn, p, shards, self._specs)

    async def job_purge(self, p: JobPurgeParams) -> JobsPurged:
        args = {"before": p.before, "now": p.now, "limit": p.limit}
        async with self.pool.transaction() as conn:
            finished = [r["id"] for r in await fetch_all(conn, Q["jobs_purge_finished"], args)]
            deleted = [r["id"] for r in await fetch_all(conn, Q["jobs_purge_deleted"], args)]
            keys = (await conn.execute(Q["dedupe_purge_jobs"],
                                       {"ids": finished + deleted})).rowcount
            keys += (await conn.execute(Q["dedupe_purge_expired"], args)).rowcount
        return JobsPurged(finished=len(finished), deleted=len(deleted), dedupe_keys=keys)
