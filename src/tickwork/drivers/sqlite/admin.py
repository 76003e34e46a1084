"""The SQLite AdminStore: queues, aggregates and API tokens, on the SqliteStore's connection.

It shares the store's ``Connection`` (one thread, one SQLite connection) rather than opening a
second one, so its writes queue behind the store's instead of contending for the file lock.
The tables come from the store's own migrations (003_queues_tokens.sql).
"""

from __future__ import annotations

import math
import sqlite3
from datetime import datetime, timedelta

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
from tickwork.drivers.sqlfiles import load_queries
from tickwork.drivers.sqlite.connection import Connection, write_transaction
from tickwork.drivers.sqlite.namespaces import SqliteNamespaceMethods
from tickwork.drivers.sqlite.rows import from_us, from_us_or_none, to_us
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import Conflict

Q = load_queries("tickwork.drivers.sqlite", "admin_queries")
LQ = load_queries("tickwork.drivers.sqlite")  # queries/limits.sql
MINUTE_US = 60_000_000


class SqliteAdmin(SqliteNamespaceMethods):
    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    @classmethod
    def for_store(cls, store: SqliteStore) -> SqliteAdmin:
        # The store keeps its Connection private; sharing it is the point (one thread, one lock).
        return cls(store._conn)

    async def health_check(self) -> None:
        await self._conn.run(lambda conn: conn.execute("SELECT 1").fetchone())

    # -- queues ------------------------------------------------------------------------------

    async def queue_list(self, p: a.QueueListParams) -> list[a.QueueInfo]:
        def run(conn: sqlite3.Connection) -> list[a.QueueInfo]:
            rows = conn.execute(Q["queue_list"], {"now": to_us(p.now), "name": None,
                                                  "namespace": p.namespace})
            return [_queue(r, p.now) for r in rows]

        return await self._conn.run(run)

    async def queue_names(self) -> list[str]:
        return await self._conn.run(
            lambda conn: [r[0] for r in conn.execute(Q["queue_names"])])

    async def queue_set_paused(self, p: a.QueueSetPausedParams) -> a.QueueInfo:
        def run(conn: sqlite3.Connection) -> a.QueueInfo:
            now = to_us(p.now)
            with write_transaction(conn):
                conn.execute(Q["queue_set_paused"], (p.name, int(p.paused), now))
            row = conn.execute(Q["queue_list"], {"now": now, "name": p.name,
                                                 "namespace": None}).fetchone()
            return _queue(row, p.now)

        return await self._conn.run(run)

    # -- limits (drivers/limits.py) ----------------------------------------------------------

    async def queue_limits_set(self, p: QueueLimitsSetParams) -> None:
        def run(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.execute(LQ["queue_limits_set"], queue_limit_args(p) | {"now": to_us(p.now)})

        await self._conn.run(run)

    async def key_limit_set(self, p: KeyLimitSetParams) -> KeyLimitInfo:
        args = key_limit_args(p)

        def run(conn: sqlite3.Connection) -> str | None:
            with write_transaction(conn):
                row = conn.execute(LQ["key_limit_set"], args | {"now": to_us(p.now)}).fetchone()
            owner: str | None = row["namespace"]
            return owner

        owner = await self._conn.run(run)
        return key_limit_info(args | {"name": p.key, "tokens": None, "namespace": owner}, None,
                              p.now)

    async def key_limit_list(self, now: datetime,
                             namespace: str | None = None) -> list[KeyLimitInfo]:
        def run(conn: sqlite3.Connection) -> list[KeyLimitInfo]:
            return [key_limit_info(r, from_us_or_none(r["tokens_at"]), now)
                    for r in conn.execute(LQ["key_limit_list"], {"namespace": namespace})]

        return await self._conn.run(run)

    async def limit_owners(self) -> LimitOwners:
        return await self._conn.run(
            lambda conn: limit_owners_of(conn.execute(LQ["limit_owners"])))

    async def key_limit_delete(self, key: str) -> None:
        def run(conn: sqlite3.Connection) -> int:
            with write_transaction(conn):
                return conn.execute(LQ["key_limit_delete"], {"key": key}).rowcount

        if await self._conn.run(run) == 0:
            raise LimitNotFound(key)

    # -- aggregates --------------------------------------------------------------------------

    async def stats_get(self, p: a.StatsParams) -> a.Stats:
        minutes = max(1, math.ceil(p.window_seconds / 60))
        last = to_us(p.now) // MINUTE_US
        first = last - minutes + 1
        since = first * MINUTE_US

        args = {"since": since, "namespace": p.namespace}

        def run(conn: sqlite3.Connection) -> a.Stats:
            jobs = conn.execute(Q["stats_jobs"], args).fetchone()
            states = {r["state"]: r["n"] for r in conn.execute(Q["stats_states"], args)}
            outcomes = {r["outcome"] or "unknown": r["n"]
                        for r in conn.execute(Q["stats_outcomes"], args)}
            finished = {r["minute"]: r["n"]
                        for r in conn.execute(Q["stats_finished_per_minute"], args)}
            late = {r["minute"]: (r["avg_us"], r["max_us"])
                    for r in conn.execute(Q["stats_lateness_per_minute"], args)}
            points = []
            for minute in range(first, last + 1):
                avg_us, max_us = late.get(minute, (None, None))
                points.append(a.MinutePoint(
                    minute=from_us(minute * MINUTE_US), finished=finished.get(minute, 0),
                    lateness_avg_seconds=None if avg_us is None else avg_us / 1e6,
                    lateness_max_seconds=None if max_us is None else max_us / 1e6))
            return a.Stats(jobs=jobs["jobs"], jobs_paused=jobs["paused"],
                           occurrences_by_state=states, attempts_by_outcome=outcomes,
                           per_minute=points)

        return await self._conn.run(run)

    async def job_status_get(self, p: a.JobStatusParams) -> a.JobStatus:
        def run(conn: sqlite3.Connection) -> a.JobStatus:
            states = {r["state"]: r["n"] for r in conn.execute(Q["job_states"], (p.job_id,))}
            last = conn.execute(Q["job_last_run"], (p.job_id,)).fetchone()
            ended = conn.execute(Q["job_last_finished"], (p.job_id, max(1, p.last_n))).fetchall()
            succeeded = sum(1 for r in ended if r["state"] == "succeeded")
            lateness: list[float] = []
            timed = {r["scheduled_at"] for r in ended if r["trigger"] == "schedule"}
            if timed:
                starts = conn.execute(Q["job_first_starts"], (p.job_id, min(timed)))
                lateness = sorted((r["started_at"] - r["scheduled_at"]) / 1e6
                                  for r in starts if r["scheduled_at"] in timed)
            return a.JobStatus(
                job_id=p.job_id,
                last_scheduled_at=from_us_or_none(last["scheduled_at"] if last else None),
                last_state=last["state"] if last else None,
                finished=len(ended), succeeded=succeeded,
                success_rate=succeeded / len(ended) if ended else None,
                lateness_avg_seconds=sum(lateness) / len(lateness) if lateness else None,
                lateness_p95_seconds=a.percentile(list(lateness), 0.95),
                waiting=sum(states.get(s, 0) for s in ("scheduled", "queued", "retrying")),
                running=states.get("running", 0), by_state=states)

        return await self._conn.run(run)

    # -- tokens ------------------------------------------------------------------------------

    async def token_create(self, p: a.TokenCreateParams) -> a.TokenInfo:
        def run(conn: sqlite3.Connection) -> a.TokenInfo:
            try:
                with write_transaction(conn):
                    conn.execute(Q["token_insert"], (p.id, p.name, p.scope.value, p.token_hash,
                                                     to_us(p.now), p.namespace))
            except sqlite3.IntegrityError as exc:
                raise Conflict(f"an active token is already named {p.name!r}") from exc
            return _token(conn.execute(Q["token_by_id"], (p.id,)).fetchone())

        return await self._conn.run(run)

    async def token_list(self) -> list[a.TokenInfo]:
        return await self._conn.run(
            lambda conn: [_token(r) for r in conn.execute(Q["token_list"])])

    async def token_authenticate(self, p: a.TokenAuthenticateParams) -> a.TokenInfo | None:
        def run(conn: sqlite3.Connection) -> a.TokenInfo | None:
            row = conn.execute(Q["token_by_hash"], (p.token_hash,)).fetchone()
            if row is None:
                return None
            token = _token(row)
            stale = p.now - timedelta(seconds=p.touch_after_seconds)
            if token.last_used_at is None or token.last_used_at < stale:
                with write_transaction(conn):
                    conn.execute(Q["token_touch"], (to_us(p.now), token.id))
            return token

        return await self._conn.run(run)

    async def token_revoke(self, p: a.TokenRevokeParams) -> a.TokenInfo:
        def run(conn: sqlite3.Connection) -> a.TokenInfo:
            with write_transaction(conn):
                rows = conn.execute(Q["token_active_by_ref"], (
                    p.ref, p.ref, p.namespace, p.namespace)).fetchall()
                if not rows:
                    raise a.TokenNotFound(p.ref)
                conn.execute(Q["token_revoke"], (to_us(p.now), rows[0]["id"]))
            return _token(conn.execute(Q["token_by_id"], (rows[0]["id"],)).fetchone())

        return await self._conn.run(run)


def _queue(row: sqlite3.Row, now: datetime) -> a.QueueInfo:
    return a.queue_info(row, from_us_or_none(row["tokens_at"]), now, bool(row["paused"]))


def _token(row: sqlite3.Row) -> a.TokenInfo:
    return a.TokenInfo(id=row["id"], name=row["name"], scope=a.Scope(row["scope"]),
                       created_at=from_us(row["created_at"]),
                       last_used_at=from_us_or_none(row["last_used_at"]),
                       revoked_at=from_us_or_none(row["revoked_at"]),
                       namespace=row["namespace"])
