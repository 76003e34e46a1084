"""Run control and the audit trail: cancel or retry one run, deleted jobs, audit entries.

A mixin of ``SqliteStore``. Every change writes its audit entry in its own transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tickwork.drivers import base as b
from tickwork.drivers.rows import SpecCache
from tickwork.drivers.sqlfiles import load_queries
from tickwork.drivers.sqlite.connection import Connection, write_transaction
from tickwork.drivers.sqlite.rows import (
    from_us,
    from_us_or_none,
    job_from_row,
    occurrence_from_row,
    to_us,
    to_us_or_none,
)
from tickwork.errors import Conflict, JobNotFound, OccurrenceNotFound
from tickwork.models import AuditAction, AuditEntry, Job, Occurrence

Q = load_queries("tickwork.drivers.sqlite")


def cancel_reason(actor: str | None) -> str:
    return f"cancelled by {actor}" if actor else "cancelled"


def audit(conn: sqlite3.Connection, now: datetime, actor: str | None, action: AuditAction,
          job_id: str, *, name: str | None = None, scheduled_at: datetime | None = None,
          details: Mapping[str, Any] | None = None) -> None:
    """One audit entry, inside the caller's write transaction."""
    if name is None:
        row = conn.execute(Q["job_name_any"], (job_id,)).fetchone()
        name = None if row is None else row[0]
    conn.execute(Q["audit_insert"], (
        to_us(now), actor, action.value, job_id, name, to_us_or_none(scheduled_at),
        None if details is None else json.dumps(details, sort_keys=True, default=str)))


class SqliteControlMethods:
    _conn: Connection
    _specs: SpecCache

    async def job_get_deleted(self, ref: str, namespace: str | None = None) -> list[Job]:
        def run(conn: sqlite3.Connection) -> list[Job]:
            rows = conn.execute(Q["jobs_deleted_by_ref"], (ref, ref, namespace, namespace))
            return [job_from_row(r, self._specs) for r in rows]

        return await self._conn.run(run)

    async def occurrence_cancel_one(self, p: b.OccurrenceCancelOneParams) -> Occurrence:
        def run(conn: sqlite3.Connection) -> Occurrence:
            now = to_us(p.now)
            key = (p.job_id, to_us(p.scheduled_at))
            reason = cancel_reason(p.actor)
            with write_transaction(conn):
                before = _occurrence(conn, p.job_id, p.scheduled_at)
                conn.execute(Q["attempt_close_running"], (now, reason, *key, *key))
                if conn.execute(Q["occurrence_cancel_one"], (now, now, reason, *key)).rowcount == 0:
                    raise Conflict(f"the run is {before.state.value}: only a waiting or running "
                                   "run can be cancelled")
                audit(conn, p.now, p.actor, AuditAction.CANCEL, p.job_id,
                      scheduled_at=p.scheduled_at,
                      details={"state": before.state.value, "attempt": before.attempt})
                return _occurrence(conn, p.job_id, p.scheduled_at)

        return await self._conn.run(run)

    async def attempt_note(self, p: b.AttemptNoteParams) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            key = (p.ref.job_id, to_us(p.ref.scheduled_at), p.ref.attempt)
            with write_transaction(conn):
                if conn.execute(Q["attempt_note"], (p.note, p.note, *key)).rowcount == 0:
                    return False
                conn.execute(Q["occurrence_note"], (p.note, p.note, *key))
                return True

        return await self._conn.run(run)

    async def occurrence_retry(self, p: b.OccurrenceRetryParams) -> Occurrence:
        def run(conn: sqlite3.Connection) -> Occurrence:
            now = to_us(p.now)
            with write_transaction(conn):
                before = _occurrence(conn, p.job_id, p.scheduled_at)
                cur = conn.execute(Q["occurrence_retry"], (
                    now, now, p.job_id, to_us(p.scheduled_at)))
                if cur.rowcount == 0:
                    if before.state in b.RETRYABLE_STATES:
                        raise JobNotFound(p.job_id)  # the state fits: the job is deleted
                    raise Conflict(f"the run is {before.state.value}: only a dead, crashed or "
                                   "cancelled run can be retried")
                audit(conn, p.now, p.actor, AuditAction.RETRY, p.job_id,
                      scheduled_at=p.scheduled_at,
                      details={"state": before.state.value, "attempt": before.attempt})
                return _occurrence(conn, p.job_id, p.scheduled_at)

        return await self._conn.run(run)

    async def audit_list(self, p: b.AuditListParams) -> list[AuditEntry]:
        where: list[str] = []
        args: list[object] = []
        if p.job_id is not None:
            where.append("job_id = ?")
            args.append(p.job_id)
        if p.since is not None:
            where.append("created_at >= ?")
            args.append(to_us(p.since))
        if p.after_id is not None:
            where.append("id > ?")
            args.append(p.after_id)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        sql = f"SELECT * FROM audit_log {clause} ORDER BY id LIMIT ?"  # noqa: S608  (fixed fragments only)
        args.append(min(p.limit, b.MAX_BATCH))

        def run(conn: sqlite3.Connection) -> list[AuditEntry]:
            return [AuditEntry(
                id=r["id"], at=from_us(r["created_at"]), actor=r["actor"],
                action=AuditAction(r["action"]), job_id=r["job_id"], job_name=r["job_name"],
                scheduled_at=from_us_or_none(r["scheduled_at"]),
                details=None if r["details"] is None else json.loads(r["details"]),
            ) for r in conn.execute(sql, args)]

        return await self._conn.run(run)


def _occurrence(conn: sqlite3.Connection, job_id: str, scheduled_at: datetime) -> Occurrence:
    row = conn.execute(Q["occurrence_get"], (job_id, to_us(scheduled_at))).fetchone()
    if row is None:
        raise OccurrenceNotFound(f"{job_id}@{scheduled_at.isoformat()}")
    return occurrence_from_row(row)
