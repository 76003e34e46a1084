"""Limits in a PostgreSQL claim (drivers/limits.py): read and lock, then write back.

Only a claim whose candidates meet a limit pays for this (the candidate query says whether
their queue has one, whether any key has one and whether any namespace has an hourly quota):
the limited queues' rows, then the limited keys' rows, then the hour's row of each namespace
with a quota are locked in name order, so claimers of a limited queue or namespace take turns
and never deadlock; running attempts are counted afresh after the lock; what the plan took is
written back to the buckets and the hourly counts, and the runs a limit held are noted.
"""

from __future__ import annotations

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
from tickwork.drivers.postgres.connection import Conn, Q, fetch_all
from tickwork.drivers.postgres.rows import Row, instant_or_none


def meets_limits(candidates: Sequence[Candidate], rows: Sequence[Row]) -> bool:
    """Whether any candidate's queue, key or namespace may have a limit (no round trip)."""
    if any(r["queue_limited"] for r in rows) or meets_quotas(rows):
        return True
    return bool(rows) and bool(rows[0]["keys_limited"]) and any(
        c.spec.limit_key is not None for c in candidates)


def meets_quotas(rows: Sequence[Row]) -> bool:
    """Whether any namespace has an hourly quota (the candidate query says)."""
    return bool(rows) and bool(rows[0]["runs_limited"])


async def limits_read(conn: Conn, candidates: Sequence[Candidate], now: datetime,
                      quotas: bool = False) -> tuple[list[LimitState], Budget]:
    """The candidates' limits, locked, and the budget they leave; with ``quotas``, the
    hourly quotas of their namespaces too."""
    queues = sorted({c.queue for c in candidates})
    keys = sorted({c.spec.limit_key for c in candidates if c.spec.limit_key is not None})
    limits = [_state(QUEUE_BUCKET, r) for r in await fetch_all(
        conn, Q["limits_lock_queues"], {"names": queues})]
    if keys:
        limits += [_state(KEY_BUCKET, r) for r in await fetch_all(
            conn, Q["limits_lock_keys"], {"names": keys})]
    capped = [lim.name for lim in limits if lim.max_running is not None]
    running: dict[str, int] = {}
    if capped:
        running = {r["queue"]: r["running"] for r in await fetch_all(
            conn, Q["limits_running"], {"names": capped, "now": now})}
    hours: list[HourQuota] = []
    if quotas:
        hours = [HourQuota(r["namespace"], r["max_runs_per_hour"], r["runs"])
                 for r in await fetch_all(conn, Q["namespace_runs_lock"], {
                     "names": sorted({c.namespace for c in candidates}),
                     "hour": hour_start(now)})]
    return limits, budget_of(limits, running, now, hours)


async def limits_write(conn: Conn, plan: ClaimPlan, limits: list[LimitState], budget: Budget,
                       now: datetime) -> None:
    for kind, query in ((QUEUE_BUCKET, "limits_write_queues"), (KEY_BUCKET, "limits_write_keys")):
        spent = [(lim, bucket) for lim, bucket in spent_buckets(limits, budget, now)
                 if lim.kind == kind]
        if spent:
            await conn.execute(Q[query], {
                "names": [lim.name for lim, _ in spent],
                "tokens": [bucket.tokens for _, bucket in spent],
                "ats": [bucket.at for _, bucket in spent]})
    if budget.runs_taken:
        names = sorted(budget.runs_taken)
        await conn.execute(Q["namespace_runs_write"], {
            "names": names, "taken": [budget.runs_taken[n] for n in names],
            "hour": hour_start(now)})
    await limits_note_held(conn, plan, now)


async def limits_note_held(conn: Conn, plan: ClaimPlan, now: datetime) -> None:
    held = [c for c in plan.held if c.limited_at is None]
    if held:
        await conn.execute(Q["limits_held"], {
            "now": now, "job_ids": [c.job_id for c in held],
            "scheduled": [c.scheduled_at for c in held]})


def _state(kind: str, r: Row) -> LimitState:
    return limit_state(kind, r, instant_or_none(r["tokens_at"]))
