"""The PostgreSQL AdminStore: queues, aggregates and API tokens, on the PostgresStore's pool.

It shares the store's connection pool rather than opening its own, so the API process keeps
one bounded set of connections. The tables come from the store's migrations (002_admin.sql).
The answers are the SQLite driver's (drivers/sqlite/admin.py); the conformance suite in
``tickwork.testing.conformance.admin`` holds both to them.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import psycopg

from tickwork.drivers import admin as a
from tickwork.drivers.limits import (
    KeyLimitInfo,
    KeyLimitSetParams,
    LimitNotFound,
    LimitOwners,
    QueueLimitsSetParams,
    key_limit_args,
    key_limit_info,
    limit_owners_of,
    queue_limit_args,
)
from tickwork.drivers.postgres.connection import Pool, Q, fetch_all, fetch_one
from tickwork.drivers.postgres.namespaces import PostgresNamespaceMethods
from tickwork.drivers.postgres.rows import Row, instant, instant_or_none
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.errors import Conflict, StoreError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
WAITING = ("scheduled", "queued", "retrying")


class PostgresAdmin(PostgresNamespaceMethods):
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    @classmethod
    def for_store(cls, store: PostgresStore) -> PostgresAdmin:
        return cls(store.pool)

    async def health_check(self) -> None:
        async with self._pool.transaction() as conn:
            await fetch_one(conn, Q["health_check"])

    # -- queues ------------------------------------------------------------------------------

    async def queue_list(self, p: a.QueueListParams) -> list[a.QueueInfo]:
        async with self._pool.transaction() as conn:
            rows = await fetch_all(conn, Q["queue_list"], {"now": p.now, "name": None,
                                                           "namespace": p.namespace})
        return [_queue(r, p.now) for r in rows]

    async def queue_names(self) -> list[str]:
        async with self._pool.statement() as conn:
            rows = await fetch_all(conn, Q["queue_names"])
        return [r["name"] for r in rows]

    async def queue_set_paused(self, p: a.QueueSetPausedParams) -> a.QueueInfo:
        async with self._pool.transaction() as conn:
            await conn.execute(Q["queue_set_paused"], (p.name, p.paused, p.now))
            if not p.paused:  # workers of other processes wake for what is due (at commit)
                await conn.execute(Q["notify_queues"], ([p.name],))
            row = await fetch_one(conn, Q["queue_list"], {"now": p.now, "name": p.name,
                                                          "namespace": None})
        assert row is not None  # the queue has a row now
        return _queue(row, p.now)

    # -- limits (drivers/limits.py) ----------------------------------------------------------

    async def queue_limits_set(self, p: QueueLimitsSetParams) -> None:
        async with self._pool.transaction() as conn:
            await conn.execute(Q["queue_limits_set"], queue_limit_args(p))
            await conn.execute(Q["notify_queues"], ([p.name],))  # raised: claim again

    async def key_limit_set(self, p: KeyLimitSetParams) -> KeyLimitInfo:
        args = key_limit_args(p)
        async with self._pool.transaction() as conn:
            row = await fetch_one(conn, Q["key_limit_set"], args)
        assert row is not None  # RETURNING the row written
        return key_limit_info(args | {"name": p.key, "tokens": None,
                                      "namespace": row["namespace"]}, None, p.now)

    async def key_limit_list(self, now: datetime,
                             namespace: str | None = None) -> list[KeyLimitInfo]:
        async with self._pool.transaction() as conn:
            rows = await fetch_all(conn, Q["key_limit_list"], {"namespace": namespace})
        return [key_limit_info(r, instant_or_none(r["tokens_at"]), now) for r in rows]

    async def limit_owners(self) -> LimitOwners:
        async with self._pool.transaction() as conn:
            return limit_owners_of(await fetch_all(conn, Q["limit_owners"]))

    async def key_limit_delete(self, key: str) -> None:
        async with self._pool.transaction() as conn:
            cur = await conn.execute(Q["key_limit_delete"], {"key": key})
            if cur.rowcount == 0:
                raise LimitNotFound(key)

    # -- aggregates --------------------------------------------------------------------------

    async def stats_get(self, p: a.StatsParams) -> a.Stats:
        minutes = max(1, math.ceil(p.window_seconds / 60))
        last = (p.now - EPOCH) // MINUTE
        first = last - minutes + 1
        since = EPOCH + first * MINUTE
        args = {"since": since, "namespace": p.namespace}
        async with self._pool.transaction() as conn:
            jobs = await fetch_one(conn, Q["stats_jobs"], args)
            states = {r["state"]: r["n"] for r in await fetch_all(conn, Q["stats_states"], args)}
            outcomes = {r["outcome"] or "unknown": r["n"]
                        for r in await fetch_all(conn, Q["stats_outcomes"], args)}
            finished = {r["minute"]: r["n"] for r in await fetch_all(
                conn, Q["stats_finished_per_minute"], args)}
            late = {r["minute"]: (r["avg_s"], r["max_s"]) for r in await fetch_all(
                conn, Q["stats_lateness_per_minute"], args)}
        assert jobs is not None
        points = []
        for minute in range(first, last + 1):
            avg_s, max_s = late.get(minute, (None, None))
            points.append(a.MinutePoint(
                minute=EPOCH + minute * MINUTE, finished=finished.get(minute, 0),
                lateness_avg_seconds=avg_s, lateness_max_seconds=max_s))
        return a.Stats(jobs=jobs["jobs"], jobs_paused=jobs["paused"],
                       occurrences_by_state=states, attempts_by_outcome=outcomes,
                       per_minute=points)

    async def job_status_get(self, p: a.JobStatusParams) -> a.JobStatus:
        async with self._pool.transaction() as conn:
            states = {r["state"]: r["n"]
                      for r in await fetch_all(conn, Q["job_states"], (p.job_id,))}
            last = await fetch_one(conn, Q["job_last_run"], (p.job_id,))
            ended = await fetch_all(conn, Q["job_last_finished"], (p.job_id, max(1, p.last_n)))
            timed = {r["scheduled_at"] for r in ended if r["trigger"] == "schedule"}
            starts = await fetch_all(conn, Q["job_first_starts"], (
                p.job_id, min(timed))) if timed else []
        succeeded = sum(1 for r in ended if r["state"] == "succeeded")
        lateness = sorted((r["started_at"] - r["scheduled_at"]).total_seconds()
                          for r in starts if r["scheduled_at"] in timed)
        return a.JobStatus(
            job_id=p.job_id,
            last_scheduled_at=instant(last["scheduled_at"]) if last else None,
            last_state=last["state"] if last else None,
            finished=len(ended), succeeded=succeeded,
            success_rate=succeeded / len(ended) if ended else None,
            lateness_avg_seconds=sum(lateness) / len(lateness) if lateness else None,
            lateness_p95_seconds=a.percentile(list(lateness), 0.95),
            waiting=sum(states.get(s, 0) for s in WAITING),
            running=states.get("running", 0), by_state=states)

    # -- tokens ------------------------------------------------------------------------------

    async def token_create(self, p: a.TokenCreateParams) -> a.TokenInfo:
        try:
            async with self._pool.transaction() as conn:
                row = await fetch_one(conn, Q["token_insert"], (
                    p.id, p.name, p.scope.value, p.token_hash, p.now, p.namespace))
        except StoreError as exc:
            cause = exc.__cause__
            if not isinstance(cause, psycopg.errors.UniqueViolation):
                raise
            if cause.diag.constraint_name == "api_tokens_name":
                raise Conflict(f"an active token is already named {p.name!r}") from exc
            raise Conflict(f"a token with id {p.id!r} or this secret already exists") from exc
        assert row is not None
        return _token(row)

    async def token_list(self) -> list[a.TokenInfo]:
        async with self._pool.transaction() as conn:
            return [_token(r) for r in await fetch_all(conn, Q["token_list"])]

    async def token_authenticate(self, p: a.TokenAuthenticateParams) -> a.TokenInfo | None:
        async with self._pool.transaction() as conn:
            row = await fetch_one(conn, Q["token_by_hash"], (p.token_hash,))
            if row is None:
                return None
            token = _token(row)
            stale = p.now - timedelta(seconds=p.touch_after_seconds)
            if token.last_used_at is None or token.last_used_at < stale:
                await conn.execute(Q["token_touch"], (p.now, token.id))
        return token

    async def token_revoke(self, p: a.TokenRevokeParams) -> a.TokenInfo:
        async with self._pool.transaction() as conn:
            row = await fetch_one(conn, Q["token_revoke"], {"ref": p.ref, "now": p.now,
                                                              "namespace": p.namespace})
        if row is None:
            raise a.TokenNotFound(p.ref)
        return _token(row)


def _queue(row: Row, now: datetime) -> a.QueueInfo:
    return a.queue_info(row, instant_or_none(row["tokens_at"]), now, bool(row["paused"]))


def _token(row: Row) -> a.TokenInfo:
    return a.TokenInfo(id=row["id"], name=row["name"], scope=a.Scope(row["scope"]),
                       created_at=instant(row["created_at"]),
                       last_used_at=instant_or_none(row["last_used_at"]),
                       revoked_at=instant_or_none(row["revoked_at"]),
                       namespace=row["namespace"])
