"""Run control and the audit trail: cancel or retry one run, deleted jobs, audit entries.

A mixin of ``PostgresStore``. Every change writes its audit entry in its own transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from psycopg import sql

from tickwork.drivers import base as b
from tickwork.drivers.postgres.connection import Conn, Pool, Q, fetch_all, fetch_one
from tickwork.drivers.postgres.occurrences import notify
from tickwork.drivers.postgres.rows import job_from_row, occurrence_from_row
from tickwork.drivers.rows import SpecCache
from tickwork.errors import Conflict, JobNotFound, OccurrenceNotFound
from tickwork.models import AuditAction, AuditEntry, Job, Occurrence, OccurrenceState, utc


def cancel_reason(actor: str | None) -> str:
    return f"cancelled by {actor}" if actor else "cancelled"


async def audit(conn: Conn, now: datetime, actor: str | None, action: AuditAction,
                job_id: str, *, name: str | None = None, scheduled_at: datetime | None = None,
                details: Mapping[str, Any] | None = None) -> None:
    """One audit entry, inside the caller's transaction."""
    await conn.execute(Q["audit_insert"], {
        "now": now, "actor": actor, "action": action.value, "job_id": job_id, "name": name,
        "scheduled_at": scheduled_at,
        "details": None if details is None else json.dumps(details, sort_keys=True, default=str),
    })


class ControlMethods:
    pool: Pool
    _specs: SpecCache

    async def job_get_deleted(self, ref: str, namespace: str | None = None) -> list[Job]:
        async with self.pool.transaction() as conn:
            rows = await fetch_all(conn, Q["jobs_deleted_by_ref"],
                                   {"ref": ref, "namespace": namespace})
        return [job_from_row(r, self._specs) for r in rows]

    async def occurrence_cancel_one(self, p: b.OccurrenceCancelOneParams) -> Occurrence:
        key = {"job_id": p.job_id, "scheduled_at": p.scheduled_at}
        reason = cancel_reason(p.actor)
        async with self.pool.transaction() as conn:
            before = await _locked(conn, p.job_id, p.scheduled_at)
            if before.state is OccurrenceState.RUNNING:
                await conn.execute(Q["attempt_close_running"], {
                    **key, "now": p.now, "reason": reason, "attempt": before.attempt})
            row = await fetch_one(conn, Q["occurrence_cancel_one"], {
                **key, "now": p.now, "reason": reason})
            if row is None:
                raise Conflict(f"the run is {before.state.value}: only a waiting or running "
                               "run can be cancelled")
            await audit(conn, p.now, p.actor, AuditAction.CANCEL, p.job_id,
                        scheduled_at=p.scheduled_at,
                        details={"state": before.state.value, "attempt": before.attempt})
        return occurrence_from_row(row)

    async def attempt_note(self, p: b.AttemptNoteParams) -> bool:
        async with self.pool.statement() as conn:
            row = await fetch_one(conn, Q["attempt_note"], {
                "job_id": p.ref.job_id, "scheduled_at": p.ref.scheduled_at,
                "attempt": p.ref.attempt, "note": p.note})
        return bool(row and row["noted"])

    async def occurrence_retry(self, p: b.OccurrenceRetryParams) -> Occurrence:
        key = {"job_id": p.job_id, "scheduled_at": p.scheduled_at}
        async with self.pool.transaction() as conn:
            before = await _locked(conn, p.job_id, p.scheduled_at)
            row = await fetch_one(conn, Q["occurrence_retry"], {**key, "now": p.now})
            if row is None:
                if before.state in b.RETRYABLE_STATES:
                    raise JobNotFound(p.job_id)  # the state fits: the job is deleted
                raise Conflict(f"the run is {before.state.value}: only a dead, crashed or "
                               "cancelled run can be retried")
            await audit(conn, p.now, p.actor, AuditAction.RETRY, p.job_id,
                        scheduled_at=p.scheduled_at,
                        details={"state": before.state.value, "attempt": before.attempt})
            await notify(conn, [row["queue"]])
        return occurrence_from_row(row)

    async def audit_list(self, p: b.AuditListParams) -> list[AuditEntry]:
        where: list[sql.Composable] = []
        args: list[Any] = []
        for clause, value in (("job_id = %s", p.job_id), ("created_at >= %s", p.since),
                              ("id > %s", p.after_id)):
            if value is not None:
                where.append(sql.SQL(clause))
                args.append(value)
        query = sql.SQL("SELECT * FROM audit_log {} ORDER BY id LIMIT %s").format(
            sql.SQL("WHERE ") + sql.SQL(" AND ").join(where) if where else sql.SQL(""))
        args.append(min(p.limit, b.MAX_BATCH))
        async with self.pool.transaction() as conn:
            rows = await (await conn.execute(query, args)).fetchall()
        return [AuditEntry(
            id=r["id"], at=utc(r["created_at"]), actor=r["actor"],
            action=AuditAction(r["action"]), job_id=r["job_id"], job_name=r["job_name"],
            scheduled_at=None if r["scheduled_at"] is None else utc(r["scheduled_at"]),
            details=None if r["details"] is None else json.loads(r["details"]),
        ) for r in rows]


async def _locked(conn: Conn, job_id: str, scheduled_at: datetime) -> Occurrence:
    row = await fetch_one(conn, Q["occurrence_for_control"],
                          {"job_id": job_id, "scheduled_at": scheduled_at})
    if row is None:
        raise OccurrenceNotFound(f"{job_id} @ {scheduled_at.isoformat()}")
    return occurrence_from_row(row)
