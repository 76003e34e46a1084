"""The SQLite store: the embedded deployment's source of truth.

Every method runs on the connection's own thread as one transaction; writes take the write lock
up front with ``BEGIN IMMEDIATE``, which is also what makes claims exclusive.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from tickwork.drivers import base as b
from tickwork.drivers.claiming import Candidate, plan_claims
from tickwork.drivers.codec import new_job_ids, spec_to_json, specs_to_json
from tickwork.drivers.rows import STATES, TRIGGERS, SpecCache
from tickwork.drivers.sqlfiles import load_migrations, load_queries, split_statements
from tickwork.drivers.sqlite.connection import Connection, path_from_url, write_transaction
from tickwork.drivers.sqlite.keys import SqliteKeyMethods
from tickwork.drivers.sqlite.rows import (
    attempt_from_row,
    from_us,
    job_from_row,
    occurrence_from_row,
    to_us,
    to_us_or_none,
)
from tickwork.errors import Conflict, JobNotFound, OccurrenceNotFound
from tickwork.models import (
    TERMINAL_STATES,
    Attempt,
    AttemptOutcome,
    Claim,
    Delivery,
    Job,
    JobSpec,
    Occurrence,
    OccurrenceState,
)

Q = load_queries("tickwork.drivers.sqlite")
MIGRATIONS = load_migrations("tickwork.drivers.sqlite")
RUNNING = OccurrenceState.RUNNING.value


class SqliteStore(SqliteKeyMethods):
    """``SqliteStore("sqlite:///tickwork.db")``; call ``migrate()`` once before use."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = path_from_url(url)
        self._conn = Connection(self.path)
        self._specs = SpecCache()

    # -- lifecycle ---------------------------------------------------------------------------

    async def migrate(self) -> None:
        def run(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS tickwork_migrations ("
                    "version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
                )
                done = {r[0] for r in conn.execute("SELECT version FROM tickwork_migrations")}
                for version, name, sql in MIGRATIONS:
                    if version in done:
                        continue
                    for statement in split_statements(sql):
                        conn.execute(statement)
                    conn.execute("INSERT INTO tickwork_migrations VALUES (?, ?)", (version, name))

        await self._conn.run(run)

    async def close(self) -> None:
        await self._conn.close()

    # -- jobs --------------------------------------------------------------------------------

    async def job_create(self, p: b.JobCreateParams) -> Job:
        return (await self.job_create_many(b.JobCreateManyParams(jobs=[p])))[0]

    async def job_create_many(self, p: b.JobCreateManyParams) -> list[Job]:
        """One ``executemany``; the jobs returned are the ones built here, as they read back
        (instants in UTC), not read back row by row. Rows are encoded before the write lock."""
        items = list(p.jobs)  # all of them (and any error producing them) before the lock
        if not items:
            return []
        jobs: list[Job] = []
        rows: list[tuple[object, ...]] = []
        instants: dict[datetime, tuple[datetime, int]] = {}
        specs = specs_to_json(item.spec for item in items)
        for item, new_id, spec in zip(items, new_job_ids(len(items)), specs, strict=True):
            s = item.spec
            now, now_us = _stored(instants, item.now)
            next_run, next_us = (None, None) if item.next_run_at is None else _stored(
                instants, item.next_run_at)
            job = Job(id=item.id or new_id, spec=s, next_run_at=next_run, created_at=now,
                      updated_at=now)
            jobs.append(job)
            rows.append((job.id, s.name, s.queue, s.priority, s.kind, s.overlap.value,
                         spec, json.dumps(s.tags) if s.tags else "[]", int(s.paused),
                         next_us, now_us, now_us))

        def run(conn: sqlite3.Connection) -> None:
            try:
                with write_transaction(conn):
                    conn.executemany(Q["job_insert"], rows)
            except sqlite3.IntegrityError as exc:
                # Named after the rollback: inside the transaction, the batch's own rows count
                # as taken and the error would name the wrong job.
                raise _name_conflict(conn, [item.spec.name for item in items]) from exc

        await self._conn.run(run)
        return jobs

    async def job_get(self, ref: str) -> Job:
        def run(conn: sqlite3.Connection) -> Job:
            row = conn.execute(Q["job_by_id"], (ref,)).fetchone()
            row = row or conn.execute(Q["job_by_name"], (ref,)).fetchone()
            if row is None:
                raise JobNotFound(ref)
            return job_from_row(row, self._specs)

        return await self._conn.run(run)

    async def job_list(self, p: b.JobListParams) -> list[Job]:
        where: list[str] = ["deleted_at IS NULL"]
        args: list[object] = []
        if p.queue is not None:
            where.append("queue = ?")
            args.append(p.queue)
        if p.kind is not None:
            where.append("kind = ?")
            args.append(p.kind)
        if p.paused is not None:
            where.append("paused = ?")
            args.append(int(p.paused))
        if p.name_contains:
            where.append("instr(lower(name), lower(?)) > 0")
            args.append(p.name_contains)
        if p.tag is not None:
            where.append("EXISTS (SELECT 1 FROM json_each(jobs.tags) WHERE value = ?)")
            args.append(p.tag)
        if p.after_name is not None:
            where.append("name > ?")
            args.append(p.after_name)
        sql = f"SELECT * FROM jobs WHERE {' AND '.join(where)} ORDER BY name LIMIT ?"  # noqa: S608  (only fixed fragments; values are parameters)
        args.append(min(p.limit, b.MAX_BATCH))

        def run(conn: sqlite3.Connection) -> list[Job]:
            return [job_from_row(r, self._specs) for r in conn.execute(sql, args)]

        return await self._conn.run(run)

    async def job_update(self, p: b.JobUpdateParams) -> Job:
        def run(conn: sqlite3.Connection) -> Job:
            s = p.spec
            with write_transaction(conn):
                try:
                    cur = conn.execute(Q["job_update"], (
                        s.name, s.queue, s.priority, s.kind, s.overlap.value, spec_to_json(s),
                        json.dumps(s.tags), int(s.paused), to_us_or_none(p.next_run_at),
                        to_us(p.now), p.id,
                    ))
                except sqlite3.IntegrityError as exc:
                    raise _name_conflict(conn, [s.name]) from exc
                if cur.rowcount == 0:
                    raise JobNotFound(p.id)
            return self._job_row(conn, p.id)

        return await self._conn.run(run)

    async def job_set_paused(self, p: b.JobSetPausedParams) -> Job:
        def run(conn: sqlite3.Connection) -> Job:
            with write_transaction(conn):
                current = self._job_row(conn, p.id)
                spec = _with_paused(current.spec, p.paused)
                conn.execute(Q["job_set_paused"], (
                    int(p.paused), spec_to_json(spec), to_us_or_none(p.next_run_at),
                    to_us(p.now), p.id,
                ))
            return self._job_row(conn, p.id)

        return await self._conn.run(run)

    async def job_delete(self, p: b.JobDeleteParams) -> None:
        def run(conn: sqlite3.Connection) -> None:
            now = to_us(p.now)
            with write_transaction(conn):
                if conn.execute(Q["job_delete"], (now, now, p.id)).rowcount == 0:
                    raise JobNotFound(p.id)
                conn.execute(Q["attempt_close_running_of_job"], (now, "job deleted", p.id))
                conn.execute(Q["occurrence_cancel_job"], (now, now, "job deleted", p.id))

        await self._conn.run(run)

    async def job_due(self, p: b.JobDueParams) -> list[Job]:
        def run(conn: sqlite3.Connection) -> list[Job]:
            shards = None if p.shards is None else json.dumps(sorted(p.shards))
            rows = conn.execute(Q["job_due"], (
                to_us(p.until), shards, shards, min(p.limit, b.MAX_BATCH)))
            return [job_from_row(r, self._specs) for r in rows]

        return await self._conn.run(run)

    async def job_advance_many(self, p: b.JobAdvanceManyParams) -> int:
        def run(conn: sqlite3.Connection) -> int:
            now = to_us(p.now)
            inserted = 0
            with write_transaction(conn):
                for adv in p.advances:
                    cur = conn.execute(Q["job_advance"], (
                        to_us_or_none(adv.next_run_at), adv.job_id, to_us(adv.expected_next_run_at),
                    ))
                    if cur.rowcount == 0:
                        continue  # another planner moved it, or it was paused or deleted
                    inserted += self._insert_occurrences(conn, adv.occurrences, now)
            return inserted

        return await self._conn.run(run)

    # -- occurrences -------------------------------------------------------------------------

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

    async def occurrence_claim(self, p: b.OccurrenceClaimParams) -> b.ClaimResult:
        def run(conn: sqlite3.Connection) -> b.ClaimResult:
            now = to_us(p.now)
            with write_transaction(conn):
                rows = conn.execute(
                    Q["occurrence_candidates"], (p.queue, now, min(p.limit, b.MAX_BATCH) * 2)
                ).fetchall()
                if not rows:
                    return b.ClaimResult(claims=[])
                by_key = {(r["job_id"], r["scheduled_at"]): r for r in rows}
                candidates = [self._candidate(r) for r in rows]
                running = self._running_of(conn, {c.job_id for c in candidates})
                plan = plan_claims(candidates, running, p.now, p.limit)

                for c in plan.missed:
                    self._mark(conn, c, OccurrenceState.MISSED, now, "past its catch-up window")
                for c in plan.skipped:
                    self._mark(conn, c, OccurrenceState.SKIPPED_OVERLAP, now,
                               "an earlier run of the job was still running")
                for c in plan.superseded:
                    self._mark(conn, c, OccurrenceState.CANCELLED, now,
                               "superseded by a newer run (overlap cancel_previous)")
                for ref in plan.cancel_running:
                    self._cancel_running(conn, ref, now)

                claims = []
                for c in plan.claim:
                    row = by_key[(c.job_id, to_us(c.scheduled_at))]
                    lease = max(p.lease_seconds, c.spec.timeout_seconds) + p.lease_margin_seconds
                    lease_until = now + int(lease * 1_000_000)
                    conn.execute(Q["occurrence_claim"], (
                        lease_until, p.worker, now, c.job_id, row["scheduled_at"]))
                    conn.execute(Q["attempt_insert"], (
                        c.job_id, row["scheduled_at"], row["attempt"] + 1, p.worker,
                        row["due_at"], now))
                    job = Job(
                        id=c.job_id, spec=c.spec,
                        next_run_at=from_us(row["job_next_run_at"])
                        if row["job_next_run_at"] is not None else None,
                        created_at=from_us(row["job_created_at"]),
                        updated_at=from_us(row["job_updated_at"]), shard=row["job_shard"])
                    occ = occurrence_from_row(row)
                    claims.append(Claim(occurrence=_claimed(occ, lease_until, p.worker, now),
                                        job=job))
            return b.ClaimResult(claims=claims, missed=len(plan.missed),
                                 skipped=len(plan.skipped), cancelled=plan.cancel_running)

        return await self._conn.run(run)

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

    def _job_row(self, conn: sqlite3.Connection, job_id: str) -> Job:
        row = conn.execute(Q["job_by_id"], (job_id,)).fetchone()
        if row is None:
            raise JobNotFound(job_id)
        return job_from_row(row, self._specs)

    def _occurrence_row(
        self, conn: sqlite3.Connection, job_id: str, scheduled_at: datetime
    ) -> Occurrence:
        row = conn.execute(Q["occurrence_get"], (job_id, to_us(scheduled_at))).fetchone()
        if row is None:
            raise OccurrenceNotFound(f"{job_id}@{scheduled_at.isoformat()}")
        return occurrence_from_row(row)

    def _candidate(self, row: sqlite3.Row) -> Candidate:
        return Candidate(
            job_id=row["job_id"], scheduled_at=from_us(row["scheduled_at"]),
            state=STATES[row["state"]], attempt=row["attempt"],
            trigger=TRIGGERS[row["trigger"]],
            spec=self._specs.get(row["job_id"], row["job_version"], row["job_spec"]),
        )

    def _running_of(
        self, conn: sqlite3.Connection, job_ids: set[str]
    ) -> dict[str, list[b.LeaseRef]]:
        running: dict[str, list[b.LeaseRef]] = defaultdict(list)
        for job_id in job_ids:
            for r in conn.execute(Q["occurrence_running_of_job"], (job_id,)):
                running[job_id].append(
                    b.LeaseRef(r["job_id"], from_us(r["scheduled_at"]), r["attempt"]))
        return running

    def _mark(self, conn: sqlite3.Connection, c: Candidate, state: OccurrenceState, now: int,
              why: str) -> None:
        conn.execute(Q["occurrence_mark"], (
            state.value, now, now, why, c.job_id, to_us(c.scheduled_at)))

    def _cancel_running(self, conn: sqlite3.Connection, ref: b.LeaseRef, now: int) -> None:
        why = "cancelled: a newer run started (overlap cancel_previous)"
        key = (ref.job_id, to_us(ref.scheduled_at))
        conn.execute(
            "UPDATE occurrences SET state = 'cancelled', finished_at = ?, updated_at = ?, "
            "lease_until = NULL, last_error = ? "
            "WHERE job_id = ? AND scheduled_at = ? AND attempt = ? AND state = 'running'",
            (now, now, why, *key, ref.attempt))
        conn.execute(Q["attempt_finish"], (
            None, now, AttemptOutcome.FAILED.value, None, why, *key, ref.attempt))


def _claimed(occ: Occurrence, lease_until: int, worker: str, now: int) -> Occurrence:
    return replace(occ, state=OccurrenceState.RUNNING, attempt=occ.attempt + 1,
                   lease_until=from_us(lease_until), worker=worker, updated_at=from_us(now))


def _with_paused(spec: JobSpec, paused: bool) -> JobSpec:
    return replace(spec, paused=paused)


def _stored(seen: dict[datetime, tuple[datetime, int]],
            instant: datetime) -> tuple[datetime, int]:
    """``instant`` as read back (UTC, microseconds) and as stored; a batch shares a few (and
    equal instants in other offsets read back the same)."""
    known = seen.get(instant)
    if known is None:
        stored = to_us(instant)
        known = seen[instant] = (from_us(stored), stored)
    return known


def _name_conflict(conn: sqlite3.Connection, names: list[str]) -> Conflict:
    taken = [n for n in names if conn.execute(Q["job_by_name"], (n,)).fetchone() is not None]
    if taken:
        name = taken[0]
    else:  # the clash is inside the batch itself
        seen: set[str] = set()
        name = next((n for n in names if n in seen or _add(seen, n)), names[0])
    return Conflict(f"a job named {name!r} already exists")


def _add(seen: set[str], name: str) -> bool:
    seen.add(name)
    return False
