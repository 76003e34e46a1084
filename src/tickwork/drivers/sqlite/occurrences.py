"""Occurrences after the claim: insert, complete, heartbeat, release, rescue, cancel, read.

A mixin of ``SqliteStore``. Each call is one transaction on the connection's thread (a write
transaction for every change), and a batch is applied item by item inside it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from tickwork.drivers import base as b
from tickwork.drivers.rows import SpecCache
from tickwork.drivers.sqlfiles import load_queries
from tickwork.drivers.sqlite.connection import Connection, write_transaction
from tickwork.drivers.sqlite.rows import (
    attempt_from_row,
    from_us,
    occurrence_from_row,
    to_us,
    to_us_or_none,
)
from tickwork.errors import OccurrenceNotFound
from tickwork.models import (
    TERMINAL_STATES,
    Attempt,
    AttemptOutcome,
    Delivery,
    Occurrence,
    OccurrenceState,
)

Q = load_queries("tickwork.drivers.sqlite")


class SqliteOccurrenceMethods:
    _conn: Connection
    _specs: SpecCache

    async def occurrence_insert(self, p: b.OccurrenceInsertParams) -> list[Occurrence]:
        def run(conn: sqlite3.Connection) -> list[Occurrence]:
            with write_transaction(conn):
                self._insert_occurrences(conn, p.occurrences, to_us(p.now))
            return [self._occurrence_row(conn, o.job_id, o.scheduled_at) for o in p.occurrences]

        return await self._conn.run(run)

    def _insert_occurrences(
        self, conn: sqlite3.Connection, items: Sequence[b.NewOccurrence], now: int
    ) -> int:
        rows = [(
            o.job_id, to_us(o.scheduled_at), to_us(o.due_at), o.queue, o.priority, o.state.value,
            o.max_attempts, o.trigger.value, now, now,
            now if o.state in TERMINAL_STATES else None,
        ) for o in items]
        before = conn.total_changes
        conn.executemany(Q["occurrence_insert"], rows)
        return conn.total_changes - before

    async def occurrence_complete(self, p: b.OccurrenceCompleteParams) -> list[bool]:
        def run(conn: sqlite3.Connection) -> list[bool]:
            now = to_us(p.now)
            applied = []
            with write_transaction(conn):
                for c in p.completions:
                    finished = to_us(c.finished_at) if c.state in TERMINAL_STATES else None
                    error = c.error if c.state is not OccurrenceState.SUCCEEDED else None
                    cur = conn.execute(Q["occurrence_complete"], (
                        c.state.value, to_us_or_none(c.due_at), now, finished, error,
                        c.job_id, to_us(c.scheduled_at), c.attempt,
                    ))
                    ok = cur.rowcount == 1
                    if ok:
                        conn.execute(Q["attempt_finish"], (
                            to_us(c.started_at), to_us(c.finished_at), c.outcome.value,
                            c.output, c.error, c.job_id, to_us(c.scheduled_at), c.attempt,
                        ))
                    applied.append(ok)
            return applied

        return await self._conn.run(run)

    async def occurrence_heartbeat(self, p: b.OccurrenceHeartbeatParams) -> list[b.LeaseRef]:
        def run(conn: sqlite3.Connection) -> list[b.LeaseRef]:
            now = to_us(p.now)
            lost = []
            with write_transaction(conn):
                for ref in p.refs:
                    cur = conn.execute(Q["occurrence_heartbeat"], (
                        now, p.extend_seconds, now,
                        ref.job_id, to_us(ref.scheduled_at), ref.attempt, p.worker))
                    if cur.rowcount == 0:
                        lost.append(ref)
            return lost

        return await self._conn.run(run)

    async def occurrence_release(self, p: b.OccurrenceReleaseParams) -> int:
        def run(conn: sqlite3.Connection) -> int:
            now = to_us(p.now)
            released = 0
            with write_transaction(conn):
                for ref in p.refs:
                    key = (ref.job_id, to_us(ref.scheduled_at))
                    cur = conn.execute(Q["occurrence_release"], (
                        now, now, *key, ref.attempt, p.worker))
                    if cur.rowcount == 1:
                        conn.execute(Q["attempt_delete"], (*key, ref.attempt))
                        released += 1
            return released

        return await self._conn.run(run)

    async def occurrence_rescue(self, p: b.OccurrenceRescueParams) -> list[b.Rescued]:
        def run(conn: sqlite3.Connection) -> list[b.Rescued]:
            now = to_us(p.now)
            rescued = []
            with write_transaction(conn):
                rows = conn.execute(Q["occurrence_expired"], (
                    now, int(p.all_but_worker is not None), p.all_but_worker,
                    min(p.limit, b.MAX_BATCH))).fetchall()
                for row in rows:
                    spec = self._specs.get(row["job_id"], row["job_version"], row["job_spec"])
                    retry = (spec.delivery is Delivery.AT_LEAST_ONCE
                             and row["attempt"] < row["max_attempts"])
                    state = OccurrenceState.RETRYING if retry else OccurrenceState.CRASHED
                    error = f"lease expired: worker {row['worker']} stopped before finishing"
                    conn.execute(Q["occurrence_rescue"], (
                        state.value, now, now, None if retry else now, error,
                        row["job_id"], row["scheduled_at"], row["attempt"]))
                    conn.execute(Q["attempt_finish"], (
                        None, now, AttemptOutcome.CRASHED.value, None, error,
                        row["job_id"], row["scheduled_at"], row["attempt"]))
                    rescued.append(b.Rescued(
                        job_id=row["job_id"], scheduled_at=from_us(row["scheduled_at"]),
                        attempt=row["attempt"], worker=row["worker"], state=state))
            return rescued

        return await self._conn.run(run)

    async def occurrence_cancel(self, p: b.OccurrenceCancelParams) -> int:
        def run(conn: sqlite3.Connection) -> int:
            now = to_us(p.now)
            with write_transaction(conn):
                conn.execute(Q["attempt_close_running_of_job"], (now, p.reason, p.job_id))
                return conn.execute(
                    Q["occurrence_cancel_job"], (now, now, p.reason, p.job_id)).rowcount

        return await self._conn.run(run)

    async def occurrence_get(self, job_id: str, scheduled_at: datetime) -> Occurrence:
        return await self._conn.run(lambda conn: self._occurrence_row(conn, job_id, scheduled_at))

    async def occurrence_list(self, p: b.OccurrenceListParams) -> list[Occurrence]:
        where: list[str] = []
        args: list[object] = []
        if p.job_id is not None:
            where.append("job_id = ?")
            args.append(p.job_id)
        if p.queue is not None:
            where.append("queue = ?")
            args.append(p.queue)
        if p.states:
            where.append(f"state IN ({','.join('?' * len(p.states))})")
            args.extend(s.value for s in p.states)
        if p.since is not None:
            where.append("scheduled_at >= ?")
            args.append(to_us(p.since))
        if p.until is not None:
            where.append("scheduled_at < ?")
            args.append(to_us(p.until))
        order = "DESC" if p.newest_first else "ASC"
        if p.before is not None:
            where.append(f"(scheduled_at, job_id) {'<' if p.newest_first else '>'} (?, ?)")
            args.extend((to_us(p.before[0]), p.before[1]))
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        sql = (f"SELECT * FROM occurrences {clause} "  # noqa: S608  (fixed fragments only)
               f"ORDER BY scheduled_at {order}, job_id {order} LIMIT ?")
        args.append(min(p.limit, b.MAX_BATCH))

        def run(conn: sqlite3.Connection) -> list[Occurrence]:
            return [occurrence_from_row(r) for r in conn.execute(sql, args)]

        return await self._conn.run(run)

    async def occurrence_next_due(self, queue: str, now: datetime) -> datetime | None:
        def run(conn: sqlite3.Connection) -> datetime | None:
            value = conn.execute(Q["occurrence_next_due"], (queue,)).fetchone()[0]
            return None if value is None else from_us(value)

        return await self._conn.run(run)

    async def attempt_list(self, job_id: str, scheduled_at: datetime) -> list[Attempt]:
        def run(conn: sqlite3.Connection) -> list[Attempt]:
            rows = conn.execute(Q["attempt_list"], (job_id, to_us(scheduled_at)))
            return [attempt_from_row(r) for r in rows]

        return await self._conn.run(run)

    # -- helpers (on the connection's thread) ------------------------------------------------

    def _occurrence_row(
        self, conn: sqlite3.Connection, job_id: str, scheduled_at: datetime
    ) -> Occurrence:
        row = conn.execute(Q["occurrence_get"], (job_id, to_us(scheduled_at))).fetchone()
        if row is None:
            raise OccurrenceNotFound(f"{job_id}@{scheduled_at.isoformat()}")
        return occurrence_from_row(row)
