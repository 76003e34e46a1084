"""Enqueue and purge on SQLite (the seam is ``drivers/enqueue.py``).

Each call is one ``BEGIN IMMEDIATE`` transaction: writers take the database's write lock in
turn, so two enqueues with one dedupe key run one after the other, and the second finds the
key held. The key's primary key holds the rule all the same.
"""

from __future__ import annotations

import json
import sqlite3

from tickwork.drivers.enqueue import (
    Enqueued,
    EnqueueItem,
    JobEnqueueParams,
    JobPurgeParams,
    JobsPurged,
)
from tickwork.drivers.rows import SpecCache
from tickwork.drivers.sqlite.connection import Connection, write_transaction
from tickwork.drivers.sqlite.rows import job_from_row, to_us
from tickwork.errors import StoreError
from tickwork.models import Job

TAKE_TRIES = 3


class SqliteEnqueueMethods:
    _conn: Connection
    _specs: SpecCache

    async def job_enqueue(self, p: JobEnqueueParams) -> list[Enqueued]:
        from tickwork.drivers.sqlite.store import Q, _name_conflict, job_rows  # noqa: PLC0415  (it imports this module)

        if not p.items:
            return []
        made, rows, audits = job_rows([item.create for item in p.items])

        def run(conn: sqlite3.Connection) -> list[Enqueued]:
            pending = {job.id: job for job in made}
            results: list[Enqueued] = []
            keep: list[int] = []
            try:
                with write_transaction(conn):
                    for index, (item, job) in enumerate(zip(p.items, made, strict=True)):
                        held = None if item.dedupe_key is None else self._take(
                            conn, Q, item, job_id=job.id, p=p, pending=pending)
                        if held is None:
                            results.append(Enqueued(job=job, created=True))
                            keep.append(index)
                        else:
                            del pending[job.id]
                            results.append(Enqueued(job=held, created=False))
                    conn.executemany(Q["job_insert"], [rows[i] for i in keep])
                    conn.executemany(Q["audit_insert"], [audits[i] for i in keep])
            except sqlite3.IntegrityError as exc:
                raise _name_conflict(conn, [made[i].spec.name for i in keep]) from exc
            return results

        return await self._conn.run(run)

    def _take(self, conn: sqlite3.Connection, q: dict[str, str], item: EnqueueItem, *,
              job_id: str, p: JobEnqueueParams, pending: dict[str, Job]) -> Job | None:
        """None if the key is now this job's; else the live job holding it."""
        args = {"key": item.dedupe_key, "job_id": job_id, "now": to_us(p.now),
                "until": to_us(item.dedupe_until or p.now)}
        for _ in range(TAKE_TRIES):
            if conn.execute(q["dedupe_take"], args).fetchone() is not None:
                return None
            row = conn.execute(q["dedupe_holder"], args).fetchone()
            if row is None:
                continue
            holder = row["job_id"]
            if holder in pending:  # an earlier item of this batch
                return pending[holder]
            live = conn.execute(q["job_by_id"], (holder,)).fetchone()
            if live is not None:
                return job_from_row(live, self._specs)
            if conn.execute(q["dedupe_take_over"], {**args, "holder": holder}).fetchone():
                return None
        raise StoreError(f"dedupe key {item.dedupe_key!r}: could not be taken")

    async def job_purge(self, p: JobPurgeParams) -> JobsPurged:
        from tickwork.drivers.sqlite.store import Q  # noqa: PLC0415  (it imports this module)

        args = {"before": to_us(p.before), "now": to_us(p.now), "limit": p.limit}

        def run(conn: sqlite3.Connection) -> JobsPurged:
            with write_transaction(conn):
                finished = [r[0] for r in conn.execute(Q["jobs_purge_finished"], args)]
                deleted = [r[0] for r in conn.execute(Q["jobs_purge_deleted"], args)]
                keys = conn.execute(Q["dedupe_purge_jobs"],
                                    {"ids": json.dumps(finished + deleted)}).rowcount
                keys += conn.execute(Q["dedupe_purge_expired"], args).rowcount
            return JobsPurged(finished=len(finished), deleted=len(deleted), dedupe_keys=keys)

        return await self._conn.run(run)
