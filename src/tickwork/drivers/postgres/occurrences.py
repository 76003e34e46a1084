"""Occurrences after the claim: insert, complete, heartbeat, release, rescue, cancel, read.

Each call is one transaction and, for a batch, one statement (``unnest`` arrays). Inserts and
retries NOTIFY the queues they made work for, so listening workers wake at once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, LiteralString

import psycopg
from psycopg import sql

from tickwork.drivers import base as b
from tickwork.drivers.chaining import MAX_PROBES, ONE_US, ChainFire, chain_fire, same_run
from tickwork.drivers.codec import upstream_from_json, upstream_to_json
from tickwork.drivers.limits import hour_start
from tickwork.drivers.postgres.connection import Conn, Pool, Q, fetch_all, fetch_one, fetch_tuples
from tickwork.drivers.postgres.rows import (
    attempt_from_row,
    instant,
    occurrence_from_row,
)
from tickwork.drivers.rows import SpecCache
from tickwork.errors import OccurrenceNotFound, StoreError
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

log = logging.getLogger("tickwork.chaining")

_ATTEMPT_INSERTED = "    FROM done\n)\n"
_COMPLETE_ROW_WRITTEN = (
    "    FROM done\n"
    "    ON CONFLICT (job_id, scheduled_at, number) DO UPDATE\n"
    "    SET started_at = excluded.started_at, finished_at = excluded.finished_at,\n"
    "        outcome = excluded.outcome, output = excluded.output, error = excluded.error\n)\n")


def _with_upsert(query: LiteralString) -> LiteralString:
    """occurrence_complete completing an attempt row that exists already."""
    if query.count(_ATTEMPT_INSERTED) != 1:
        raise ValueError("occurrence_complete must insert the attempt's row from `done` once")
    return query.replace(_ATTEMPT_INSERTED, _COMPLETE_ROW_WRITTEN)


_COMPLETE_UPSERT = _with_upsert(Q["occurrence_complete"])


async def notify(conn: Conn, queues: Sequence[str]) -> None:
    """Wake the workers of these queues when the transaction commits."""
    distinct = sorted(set(queues))
    if distinct:
        await conn.execute(Q["notify_queues"], (distinct,))


class OccurrenceMethods:
    pool: Pool
    _specs: SpecCache

    async def _insert_occurrences(
        self, conn: Conn, items: Sequence[b.NewOccurrence], now: datetime
    ) -> int:
        if not items:
            return 0
        rows = await fetch_all(conn, Q["occurrence_insert"], {
            "now": now,
            "job_ids": [o.job_id for o in items],
            "scheduled": [o.scheduled_at for o in items],
            "due": [o.due_at for o in items],
            "queues": [o.queue for o in items],
            "priorities": [o.priority for o in items],
            "states": [o.state.value for o in items],
            "max_attempts": [o.max_attempts for o in items],
            "triggers": [o.trigger.value for o in items],
            "finished": [now if o.state in TERMINAL_STATES else None for o in items],
            "overlaps": [None if o.overlap is None else o.overlap.value for o in items],
        })
        await notify(conn, [r["queue"] for r in rows])
        return len(rows)

    async def occurrence_insert(self, p: b.OccurrenceInsertParams) -> list[Occurrence]:
        async with self.pool.transaction() as conn:
            await self._insert_occurrences(conn, p.occurrences, p.now)
            if p.audit is not None and p.occurrences:
                from tickwork.drivers.postgres.control import audit  # noqa: PLC0415  (it imports this module)

                first = p.occurrences[0]
                await audit(conn, p.now, p.actor, p.audit, first.job_id,
                            scheduled_at=first.scheduled_at
                            if p.audit is AuditAction.TRIGGER else None, details=p.details)
            rows = await fetch_all(conn, Q["occurrence_get_many"], (
                [o.job_id for o in p.occurrences], [o.scheduled_at for o in p.occurrences]))
        return [occurrence_from_row(r) for r in rows]

    async def occurrence_complete(self, p: b.OccurrenceCompleteParams) -> list[bool]:
        try:
            return await self._complete(p, Q["occurrence_complete"])
        except StoreError as exc:
            if not isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise
        # An attempt's row a claim wrote before migration 017: the batch was rolled back, and
        # is written again completing that row.
        return await self._complete(p, _COMPLETE_UPSERT)

    async def _complete(self, p: b.OccurrenceCompleteParams, query: LiteralString
                        ) -> list[bool]:
        applied = [False] * len(p.completions)
        rounds = _rounds(p.completions)
        # One round is one statement (the fence, the attempt row and the occurrence in one
        # go): without a retry to announce, it needs no transaction, nor its two round trips.
        # A chain to fire is inserted in the completion's transaction (drivers/chaining.py).
        alone = len(rounds) == 1 and all(c.state is not OccurrenceState.RETRYING
                                         and c.chain is None for c in p.completions)
        connection = self.pool.statement() if alone else self.pool.transaction()
        async with connection as conn:
            retried: list[str] = []
            for round_ in rounds:
                rows = await fetch_tuples(conn, query, _completion_args(
                    [p.completions[i] for i in round_], p.now))
                for position, state, queue in rows:  # SELECT idx, state, queue: 1 is the first
                    applied[round_[position - 1]] = True
                    if state == RETRYING:
                        retried.append(queue)
            fires = [c.chain for c, ok in zip(p.completions, applied, strict=True)
                     if ok and c.chain is not None]
            if fires:
                p.chained.extend(await self._fire_chains(conn, fires, p.now))
            await notify(conn, retried + [o.queue for o in p.chained])
        return applied

    async def _fire_chains(self, conn: Conn, fires: Sequence[ChainFire],
                           now: datetime) -> list[b.NewOccurrence]:
        """One occurrence per named job and upstream, unless it exists already."""
        names = sorted({name for f in fires for name in f.targets})
        upstreams = sorted({f.upstream.job_id for f in fires})
        targets = {(r["upstream_id"], r["name"]): (
            r["id"], self._specs.get(r["id"], r["version"], r["spec"]))
            for r in await fetch_all(conn, Q["jobs_by_names"], (names, upstreams))}
        made: list[b.NewOccurrence] = []
        for fire in fires:
            text = upstream_to_json(fire.upstream)
            for name in fire.targets:
                if (fire.upstream.job_id, name) not in targets:
                    log.warning("job %s ended (%s) and names %r, which no longer exists: "
                                "nothing triggered", fire.upstream.job_name,
                                fire.upstream.event.value, name)
                    continue
                job_id, spec = targets[fire.upstream.job_id, name]
                at = fire.upstream.scheduled_at
                for _ in range(MAX_PROBES):
                    row = await fetch_one(conn, Q["occurrence_insert_chained"], {
                        "job_id": job_id, "scheduled": at, "now": now, "queue": spec.queue,
                        "priority": spec.priority, "max_attempts": spec.retry.max_attempts,
                        "upstream": text})
                    if row is not None:
                        made.append(b.NewOccurrence(
                            job_id=job_id, scheduled_at=at, due_at=now, queue=spec.queue,
                            priority=spec.priority, max_attempts=spec.retry.max_attempts,
                            trigger=Trigger.CHAIN))
                        break
                    held = await fetch_one(conn, Q["occurrence_upstream"], (job_id, at))
                    if held is not None and held["trigger"] == Trigger.CHAIN.value and same_run(
                            upstream_from_json(held["upstream"]), fire.upstream):
                        break  # fired already
                    at += ONE_US
        return made

    async def occurrence_heartbeat(self, p: b.OccurrenceHeartbeatParams) -> list[b.LeaseRef]:
        if not p.refs:
            return []
        async with self.pool.statement() as conn:
            rows = await fetch_all(conn, Q["occurrence_heartbeat"], {
                **_ref_args(p.refs), "now": p.now, "extend": p.extend_seconds,
                "worker": p.worker})
        held = {(r["job_id"], instant(r["scheduled_at"]), r["attempt"]) for r in rows}
        return [ref for ref in p.refs
                if (ref.job_id, ref.scheduled_at, ref.attempt) not in held]

    async def occurrence_release(self, p: b.OccurrenceReleaseParams) -> int:
        if not p.refs:
            return 0
        async with self.pool.transaction() as conn:
            rows = await fetch_all(conn, Q["occurrence_release"], {
                **_ref_args(p.refs), "now": p.now, "worker": p.worker})
            await notify(conn, [r["queue"] for r in rows])
        return len(rows)

    async def occurrence_rescue(self, p: b.OccurrenceRescueParams) -> list[b.Rescued]:
        async with self.pool.transaction() as conn:
            rows = await fetch_all(conn, Q["occurrence_expired"], {
                "now": p.now, "all_but": p.all_but_worker, "limit": min(p.limit, b.MAX_BATCH)})
            if not rows:
                return []
            rescued: list[b.Rescued] = []
            fires: list[ChainFire] = []
            errors: list[str] = []
            for row in rows:
                spec = self._specs.get(row["job_id"], row["job_version"], row["job_spec"])
                retry = (spec.delivery is Delivery.AT_LEAST_ONCE
                         and row["attempt"] < row["max_attempts"])
                state = OccurrenceState.RETRYING if retry else OccurrenceState.CRASHED
                errors.append(f"lease expired: worker {row['worker']} stopped before finishing")
                rescued.append(b.Rescued(
                    job_id=row["job_id"], scheduled_at=instant(row["scheduled_at"]),
                    attempt=row["attempt"], worker=row["worker"], state=state))
                fire = chain_fire(
                    spec, job_id=row["job_id"], scheduled_at=rescued[-1].scheduled_at,
                    attempt=row["attempt"], state=state, idempotency_key=idempotency_key(
                        row["job_id"], rescued[-1].scheduled_at, Trigger(row["trigger"])))
                if fire is not None:
                    fires.append(fire)
            await conn.execute(Q["occurrence_rescue"], {
                "now": p.now,
                "job_ids": [r.job_id for r in rescued],
                "scheduled": [r.scheduled_at for r in rescued],
                "attempts": [r.attempt for r in rescued],
                "states": [r.state.value for r in rescued],
                "finished": [None if r.state is OccurrenceState.RETRYING else p.now
                             for r in rescued],
                "errors": errors,
            })
            if fires:
                p.chained.extend(await self._fire_chains(conn, fires, p.now))
            await notify(conn, [row["queue"] for row, r in zip(rows, rescued, strict=True)
                                if r.state is OccurrenceState.RETRYING]
                         + [o.queue for o in p.chained])
        return rescued

    async def occurrence_cancel(self, p: b.OccurrenceCancelParams) -> int:
        args = {"job_id": p.job_id, "now": p.now, "reason": p.reason}
        async with self.pool.transaction() as conn:
            await conn.execute(Q["attempt_close_running_of_job"], args)
            cur = await conn.execute(Q["occurrence_cancel_job"], args)
            return cur.rowcount

    async def occurrence_get(self, job_id: str, scheduled_at: datetime) -> Occurrence:
        async with self.pool.transaction() as conn:
            row = await fetch_one(conn, Q["occurrence_get"], (job_id, scheduled_at))
        if row is None:
            raise OccurrenceNotFound(f"{job_id} @ {scheduled_at.isoformat()}")
        return occurrence_from_row(row)

    async def occurrence_list(self, p: b.OccurrenceListParams) -> list[Occurrence]:
        # Runs that are not running are read in order from occurrences_scheduled, whose
        # predicate leaves running runs out (a claim then writes no entry to it); the running
        # ones, as many as the workers run at once, apart. Each part stops at the limit.
        states = {s.value for s in p.states}
        parts = [part for part, wanted in (
            (sql.SQL("state <> 'running'"), not states or states - {RUNNING}),
            (sql.SQL("state = 'running'"), not states or RUNNING in states)) if wanted]
        where, args = _list_filters(p)
        order = sql.SQL("DESC" if p.newest_first else "ASC")
        limit = min(p.limit, b.MAX_BATCH)
        branches: list[sql.Composable] = []
        params: list[Any] = []
        for part in parts:
            branches.append(sql.SQL(
                "(SELECT * FROM occurrences WHERE {} ORDER BY scheduled_at {}, job_id {} "
                "LIMIT %s)").format(sql.SQL(" AND ").join([*where, part]), order, order))
            params += [*args, limit]
        query = sql.SQL("SELECT * FROM ({}) o ORDER BY scheduled_at {}, job_id {} LIMIT %s").format(
            sql.SQL(" UNION ALL ").join(branches), order, order)
        async with self.pool.transaction() as conn:
            rows = await (await conn.execute(query, [*params, limit])).fetchall()
        return [occurrence_from_row(r) for r in rows]

    async def occurrence_next_due(self, queue: str, now: datetime) -> datetime | None:
        async with self.pool.statement() as conn:
            row = await fetch_one(conn, Q["occurrence_next_due"], {
                "queue": queue, "hour": hour_start(now)})
        return None if row is None or row["due_at"] is None else instant(row["due_at"])

    async def attempt_list(self, job_id: str, scheduled_at: datetime) -> list[Attempt]:
        async with self.pool.transaction() as conn:
            rows = await fetch_all(conn, Q["attempt_list"], {"job_id": job_id,
                                                             "scheduled_at": scheduled_at})
        return [attempt_from_row(r) for r in rows]


def _ref_args(refs: Sequence[b.LeaseRef]) -> dict[str, Any]:
    return {"job_ids": [r.job_id for r in refs], "scheduled": [r.scheduled_at for r in refs],
            "attempts": [r.attempt for r in refs]}


def _rounds(completions: Sequence[b.Completion]) -> list[list[int]]:
    """Indexes split so no round repeats an occurrence: one UPDATE changes a row once, and a
    repeat in a later round meets the state the earlier one left (and is fenced off)."""
    rounds: list[list[int]] = []
    seen: list[set[tuple[str, datetime]]] = []
    for i, c in enumerate(completions):
        key = (c.job_id, c.scheduled_at)
        for n, keys in enumerate(seen):
            if key not in keys:
                keys.add(key)
                rounds[n].append(i)
                break
        else:
            seen.append({key})
            rounds.append([i])
    return rounds


def _completion_args(cs: list[b.Completion], now: datetime) -> dict[str, Any]:
    """occurrence_complete's arrays, one element per completion (what the statement derives
    is not sent: see its comment)."""
    return {
        "now": now,
        "terminal": _TERMINAL,
        "job_ids": [c.job_id for c in cs],
        "scheduled": [c.scheduled_at for c in cs],
        "attempts": [c.attempt for c in cs],
        "states": [_VALUES[c.state] for c in cs],
        "due": _null_if_empty([c.due_at for c in cs]),
        "last_errors": _null_if_empty([c.error if c.state is not OccurrenceState.SUCCEEDED
                                       else None for c in cs]),
        "outcomes": [_VALUES[c.outcome] for c in cs],
        "started": [c.started_at for c in cs],
        "ended": [c.finished_at for c in cs],
        "outputs": _null_if_empty([c.output for c in cs]),
        "errors": _null_if_empty([c.error for c in cs]),
        "queued": _null_if_empty([None if c.due_at is None else c.queued_at for c in cs]),
    }


def _null_if_empty(values: list[Any]) -> list[Any] | None:
    """An array of nothing but NULLs sent as one NULL: unnest pads it with NULLs all the same,
    and each element of an array costs the driver a Python step to encode (a completed run's
    retry time, output and errors are usually all empty)."""
    return None if values.count(None) == len(values) else values


RUNNING = OccurrenceState.RUNNING.value
# Each state's and outcome's text: an enum's .value is a Python property, read per member once.
_VALUES: dict[OccurrenceState | AttemptOutcome, str] = {
    m: m.value for m in (*OccurrenceState, *AttemptOutcome)}
RETRYING = OccurrenceState.RETRYING.value
_TERMINAL = sorted(s.value for s in TERMINAL_STATES)  # a completion to these sets finished_at


def _list_filters(p: b.OccurrenceListParams) -> tuple[list[sql.Composable], list[Any]]:
    """occurrence_list's conditions but the state's part, and their arguments."""
    given: tuple[tuple[LiteralString, Any], ...] = (
        ("job_id = %s", p.job_id),
        ("job_id IN (SELECT id FROM jobs WHERE namespace = %s)", p.namespace),
        ("queue = %s", p.queue),
        ("state = ANY(%s::text[])", [s.value for s in p.states] if p.states else None),
        ("scheduled_at >= %s", p.since),
        ("scheduled_at < %s", p.until),
    )
    where: list[sql.Composable] = [sql.SQL(text) for text, value in given if value is not None]
    args = [value for _, value in given if value is not None]
    if p.before is not None:  # job ids compare bytewise (migration 019), as the index orders them
        op = "<" if p.newest_first else ">"
        where.append(sql.SQL("(scheduled_at, job_id) {} (%s, %s)").format(sql.SQL(op)))
        args.extend(p.before)
    return where, args
