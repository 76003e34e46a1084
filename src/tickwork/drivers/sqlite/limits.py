"""Limits in a SQLite claim (drivers/limits.py): read, then write back, in the claim's own
write transaction (``BEGIN IMMEDIATE`` already makes claimers take turns).

Each is a primary-key lookup per distinct queue, key and namespace of the candidates (most
claims meet one of each); a namespace without an hourly quota reads nothing more."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from tickwork.drivers.claiming import Candidate, ClaimPlan
from tickwork.drivers.limits import (
    KEY_BUCKET,
    QUEUE_BUCKET,
    Budget,
    HourQuota,
    LimitState,
    budget_of,
    hour_start,
    limit_state,
    spent_buckets,
)
from tickwork.drivers.sqlfiles import load_queries
from tickwork.drivers.sqlite.rows import from_us_or_none, to_us, to_us_or_none

Q = load_queries("tickwork.drivers.sqlite")


def limits_read(conn: sqlite3.Connection, candidates: Sequence[Candidate], now: datetime
                ) -> tuple[list[LimitState], Budget | None]:
    """The limits of the candidates' queues, keys and namespaces, and the budget they leave;
    no budget when none of them is limited."""
    limits: list[LimitState] = []
    running: dict[str, int] = {}
    for queue in sorted({c.queue for c in candidates}):
        row = conn.execute(Q["limits_queue"], (queue,)).fetchone()
        if row is not None:
            limits.append(limit_state(QUEUE_BUCKET, row, from_us_or_none(row["tokens_at"])))
            if row["max_running"] is not None:
                running[queue] = conn.execute(Q["limits_running"],
                                              (queue, to_us(now))).fetchone()["running"]
    for key in sorted({c.spec.limit_key for c in candidates if c.spec.limit_key is not None}):
        row = conn.execute(Q["limits_key"], (key,)).fetchone()
        if row is not None:
            limits.append(limit_state(KEY_BUCKET, row, from_us_or_none(row["tokens_at"])))
    hour = to_us(hour_start(now))
    hours = []
    for namespace in sorted({c.namespace for c in candidates}):
        row = conn.execute(Q["namespace_runs_read"], (hour, namespace)).fetchone()
        if row is not None:
            hours.append(HourQuota(namespace, row["max_runs_per_hour"], row["runs"]))
    if not limits and not hours:
        return [], None
    return limits, budget_of(limits, running, now, hours)


def limits_write(conn: sqlite3.Connection, plan: ClaimPlan, limits: list[LimitState],
                 budget: Budget | None, now: datetime) -> None:
    if budget is not None:
        for limit, bucket in spent_buckets(limits, budget, now):
            query = "limits_write_queue" if limit.kind == QUEUE_BUCKET else "limits_write_key"
            conn.execute(Q[query], (bucket.tokens, to_us_or_none(bucket.at), limit.name))
        hour = to_us(hour_start(now))
        for namespace, taken in sorted(budget.runs_taken.items()):
            conn.execute(Q["namespace_runs_write"], (namespace, hour, taken))
    for c in plan.held:
        if c.limited_at is None:
            conn.execute(Q["limits_held"], (to_us(now), c.job_id, to_us(c.scheduled_at)))


