"""What one execution costs PostgreSQL: WAL bytes, rows written per table, statements.

A count, not a speed: the figures do not move with the machine's load, only with the code and
the server's settings. ``--jobs`` interval jobs every ``--every`` seconds, offsets spread over
the interval, fire from an instant T0 for ``--duration`` seconds and then end (``end_at``), so
everything the deployment does for those ticks (planning, claiming, completing, and with Redis
the claims by key) happens between two snapshots:

- the first a few seconds before the planner looks at T0 (the horizon), after creation has been
  idle long enough for every backend to have flushed its statistics (PostgreSQL flushes an
  idle backend's within 10 s; the waits for it are fixed, not conditions);
- the second after the last tick ran and the processes stopped (a backend flushes its
  statistics when it exits).

Each snapshot reads ``pg_current_wal_lsn()`` (the whole server's WAL: run it on a server
nothing else writes to), ``pg_stat_user_tables`` (rows inserted, updated, HOT-updated and
deleted per table) and, when the server preloads it, ``pg_stat_statements`` for this database
(calls, rows and WAL bytes per statement). Creation is measured apart: the WAL and rows of
creating the jobs through the bulk path, per job.
"""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork.bench.deploy import is_postgres
from tickwork.bench.record import Tally
from tickwork.bench.runner import Bench
from tickwork.bench.w4 import create, offset_of, ticks
from tickwork.errors import ConfigError
from tickwork.models import idempotency_key
from tickwork.schedules import EverySchedule

STATS_IDLE_SECONDS = 11.0  # PostgreSQL flushes an idle backend's statistics within 10 s
LEAD_SECONDS = 8.0  # the first snapshot is this long before T0: before the planner's horizon
DRAIN_SECONDS = 60.0

TABLES = """
SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables
"""
STATEMENTS = """
SELECT queryid, left(regexp_replace(query, '\\s+', ' ', 'g'), 90), calls, rows, wal_bytes
  FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


def snapshot(url: str) -> dict[str, Any]:
    import psycopg  # noqa: PLC0415  (the postgres extra, only for PostgreSQL runs)

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        lsn = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
        tables = {r[0]: r[1:] for r in conn.execute(TABLES)}
        statements: dict[int, tuple[Any, ...]] | None = None
        try:
            statements = {r[0]: r[1:] for r in conn.execute(STATEMENTS)}
        except psycopg.Error:
            statements = None  # not preloaded: the statements' figures are left out
    return {"wal": int(lsn[0]) if lsn else 0, "tables": tables, "statements": statements}


def enable_statements(url: str) -> bool:
    """``CREATE EXTENSION pg_stat_statements`` in the run's database, if the server preloads
    it; whether it is there."""
    import psycopg  # noqa: PLC0415

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute("SELECT current_setting('shared_preload_libraries')").fetchone()
        if row is None or "pg_stat_statements" not in row[0]:
            return False
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return True


def per(before: dict[str, Any], after: dict[str, Any], n: int) -> dict[str, Any]:
    """What happened between two snapshots, divided by ``n``."""
    n = max(n, 1)
    rows: dict[str, dict[str, float]] = {}
    for table, now in after["tables"].items():
        was = before["tables"].get(table, (0, 0, 0, 0))
        diff = [a - b for a, b in zip(now, was, strict=True)]
        if any(diff):
            rows[table] = {k: round(v / n, 3) for k, v in zip(
                ("inserted", "updated", "hot_updated", "deleted"), diff, strict=True)}
    out: dict[str, Any] = {"wal_bytes": round((after["wal"] - before["wal"]) / n, 1),
                           "rows": rows}
    if after["statements"] is not None and before["statements"] is not None:
        top = []
        for qid, (query, calls, nrows, wal) in after["statements"].items():
            _, calls0, rows0, wal0 = before["statements"].get(qid, (query, 0, 0, 0))
            if calls - calls0:
                top.append({"statement": query, "calls": round((calls - calls0) / n, 3),
                            "rows": round((nrows - rows0) / n, 3),
                            "wal_bytes": round(float(wal - wal0) / n, 1)})
        out["statements"] = sorted(top, key=lambda s: -s["wal_bytes"])[:15]
    return out


async def run_pgcost(bench: Bench, *, jobs: int, every: float, duration: int) -> dict[str, Any]:
    d = bench.deployment
    if not is_postgres(d.url):
        raise ConfigError("database", "pgcost measures PostgreSQL: give --database "
                          "postgresql://... of a server nothing else writes to")
    statements = await asyncio.to_thread(enable_statements, d.url)
    lead = 2 * STATS_IDLE_SECONDS + LEAD_SECONDS + 2 * jobs / max(bench.warmup_rate, 500.0)
    t0 = datetime.fromtimestamp(math.ceil(time.time() + lead), UTC)
    t1 = t0 + timedelta(seconds=duration)
    last = t1 - timedelta(microseconds=1)  # end_at is inclusive: the window is [t0, t1)
    bench.progress.say(f"pgcost: {jobs:,} jobs every {every:g}s from {t0:%H:%M:%S} for "
                       f"{duration}s")
    await asyncio.sleep(STATS_IDLE_SECONDS)  # the warm-up's statistics flushed first
    created_before = await asyncio.to_thread(snapshot, d.url)
    ids, took = await create(bench, jobs, every, t0, end_at=last)
    await asyncio.sleep(STATS_IDLE_SECONDS)  # a fixed wait: PostgreSQL's flush interval
    before = await asyncio.to_thread(snapshot, d.url)
    if time.time() > t0.timestamp() - LEAD_SECONDS + 1:
        bench.notes.append("creation ran late: the first snapshot came after planning began")
    tally = Tally(expected={
        idempotency_key(job_id, t): 0 for i, job_id in enumerate(ids)
        for t in ticks(EverySchedule(every, offset_of(i, jobs, every), t0, last), t0, t1)})
    bench.progress.total = len(tally.expected)
    deadline = time.monotonic() + (t1.timestamp() - time.time()) + DRAIN_SECONDS
    await bench.follow(tally, until=lambda: tally.lost == 0, deadline=deadline)
    bench.progress.finish(tally.done)
    await d.stop()  # each backend flushes its statistics as it exits
    after = await asyncio.to_thread(snapshot, d.url)
    return {
        "workload": "pgcost",
        "parameters": {"jobs": jobs, "every_seconds": every, "duration_seconds": duration,
                       "pg_stat_statements": statements},
        "creation": {"jobs": jobs, "seconds": round(took, 3),
                     "jobs_per_second": round(jobs / took, 1) if took else None,
                     "per_job": per(created_before, before, jobs)},
        "expected": len(tally.expected), "executed": tally.done, "lost": tally.lost,
        "duplicated": tally.duplicated, "early": tally.early,
        "per_execution": per(before, after, tally.done),
    }
