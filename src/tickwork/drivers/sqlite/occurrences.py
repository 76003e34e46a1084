"""Occurrences after the claim: insert, complete, heartbeat, release, rescue, cancel, read.

A mixin of ``SqliteStore``. Each call is one transaction on the connection's thread (a write
transaction for every change), and a batch is applied item by item inside it.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from tickwork.drivers import base as b
from tickwork.drivers.chaining import MAX_PROBES, ONE_US, ChainFire, chain_fire, same_run
from tickwork.drivers.codec import upstream_from_json, upstream_to_json
from tickwork.drivers.limits import hour_start
from tickwork.drivers.rows import SpecCache
from tickwork.drivers.sqlfiles import load_queries
from tickwork.drivers.sqlite.connection import Connection, write_transaction
from tickwork.drivers.sqlite.control import audit
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
    AuditAction,
    Delivery,
    Occurrence,
    OccurrenceState,
    Trigger,
    idempotency_key,
)

Q = load_queries("tickwork.drivers.sqlite")
log = logging.getLogger("tickwork.chaining")


class SqliteOccurrenceMethods:
    _conn: Connection
    _specs: SpecCache

    async def occurrence_insert(self, p: b.OccurrenceInsertParams) -> list[Occurrence]:
        def run(conn: sqlite3.Connection) -> list[Occurrence]:
            with write_transaction(conn):
                self._insert_occurrences(conn, p.occurrences, to_us(p.now))
                if p.audit is not None and p.occurrences:
                    first = p.occurrences[0]
                    audit(conn, p.now, p.actor, p.audit, first.job_id,
                          scheduled_at=first.scheduled_at if p.audit is AuditAction.TRIGGER
                          else None, details=p.details)
            return [self._occurrence_row(conn, o.job_id, o.scheduled_at) for o in p.occurrences]

        return await self._conn.run(run)

    def _insert_occurrences(
        self, conn: sqlite3.Connection, items: Sequence[b.NewOccurrence], now: int
    ) -> int:
        rows = [(
            o.job_id, to_us(o.scheduled_at), to_us(o.due_at), o.queue, o.priority, o.state.value,
            o.max_attempts, o.trigger.value, now, now,
            now if o.state in TERMINAL_STATES else None,
            None if o.overlap is None else o.overlap.value,
        ) for o in items]
        before = conn.total_changes
        conn.executemany(Q["occurrence_insert"], rows)
        return conn.total_changes - before

    def _fire_chain(self, conn: sqlite3.Connection, fire: ChainFire,
                    now: datetime) -> list[b.NewOccurrence]:
        """One occurrence per named job, unless it exists already."""
        made: list[b.NewOccurrence] = []
        text = upstream_to_json(fire.upstream)
        for name in fire.targets:
            row = conn.execute(Q["job_by_name_live"], (name, fire.upstream.job_id)).fetchone()
            if row is None:
                log.warning("job %s ended (%s) and names %r, which no longer exists: nothing "
                            "triggered", fire.upstream.job_name, fire.upstream.event.value, name)
                continue
            spec = self._specs.get(row["id"], row["version"], row["spec"])
            at = fire.upstream.scheduled_at
            for _ in range(MAX_PROBES):
                cur = conn.execute(Q["occurrence_insert_chained"], (
                    row["id"], to_us(at), to_us(now), spec.queue, spec.priority,
                    spec.retry.max_attempts, to_us(now), to_us(now), text))
                if cur.rowcount == 1:
                    made.append(b.NewOccurrence(
                        job_id=row["id"], scheduled_at=at, due_at=now, queue=spec.queue,
                        priority=spec.priority, max_attempts=spec.retry.max_attempts,
                        trigger=Trigger.CHAIN))
                    break
                held = conn.execute(Q["occurrence_upstream"], (row["id"], to_us(at))).fetchone()
                if held is not None and held["trigger"] == Trigger.CHAIN.value and same_run(
                        upstream_from_json(held["upstream"]), fire.upstream):
                    break  # fired already
                at += ONE_US
        return made

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
                        if c.chain is not None:  # in this transaction (drivers/chaining.py)
                            p.chained.extend(self._fire_chain(conn, c.chain, p.now))
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
                    at = rescued[-1].scheduled_at
                    fire = chain_fire(
                        spec, job_id=row["job_id"], scheduled_at=at, attempt=row["attempt"],
                        state=state, idempotency_key=idempotency_key(
                            row["job_id"], at, Trigger(row["trigger"])))
                    if fire is not None:
                        p.chained.extend(self._fire_chain(conn, fire, p.now))
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
        if p.namespace is not None:
            where.append("job_id IN (SELECT id FROM jobs WHERE namespace = ?)")
            args.append(p.namespace)
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
            value = conn.execute(Q["occurrence_next_due"], {
                "queue": queue, "hour": to_us(hour_start(now))}).fetchone()[0]
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
