"""The fault suite's ledger: one row per execution, written by the job itself.

A SQLite file of its own (WAL, ``synchronous=FULL``), never the store's tables. A row is inserted
when an execution starts and completed when it ends, so an execution cut short by a kill shows
as started and never ended. Instants are recorded twice: the wall clock and ``time.monotonic()``,
which is one clock for every process on the machine and which the clock-skew test leaves
unfaked, so a worker whose wall clock is off is still judged by the real time.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tickwork.executors.base import ExecutionContext

WORKER_ENV = "TICKWORK_TEST_WORKER_ID"

SCHEMA = """
CREATE TABLE IF NOT EXISTS executions (
    id           INTEGER PRIMARY KEY,
    key          TEXT NOT NULL,     -- the idempotency key the execution received
    job_id       TEXT NOT NULL,
    job          TEXT NOT NULL,
    scheduled_at REAL NOT NULL,     -- epoch seconds
    attempt      INTEGER NOT NULL,
    pid          INTEGER NOT NULL,
    worker       TEXT NOT NULL,
    started      REAL NOT NULL,     -- wall clock of the executing process
    started_mono REAL NOT NULL,
    ended        REAL,
    ended_mono   REAL,
    outcome      TEXT               -- ok | failed; NULL while running or when cut short
)"""


@contextmanager
def connect(path: str | Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(str(path), timeout=60, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        yield conn


def create(path: str | Path) -> None:
    with connect(path) as conn:
        conn.execute(SCHEMA)


@dataclass(frozen=True, slots=True)
class Row:
    key: str
    job_id: str
    job: str
    scheduled_at: float
    attempt: int
    pid: int
    worker: str
    started: float
    started_mono: float
    ended: float | None
    ended_mono: float | None
    outcome: str | None


def read(path: str | Path) -> list[Row]:
    if not Path(path).exists():
        return []
    with connect(path) as conn:
        rows = conn.execute(
            "SELECT key, job_id, job, scheduled_at, attempt, pid, worker, started, started_mono,"
            " ended, ended_mono, outcome FROM executions ORDER BY id").fetchall()
    return [Row(*r) for r in rows]


def count(path: str | Path, ended_only: bool = True) -> int:
    if not Path(path).exists():
        return 0
    with connect(path) as conn:
        where = " WHERE outcome IS NOT NULL" if ended_only else ""
        (n,) = conn.execute(f"SELECT count(DISTINCT key) FROM executions{where}").fetchone()  # noqa: S608  (a constant clause)
    return int(n)


def insert(path: str | Path, *, key: str, job_id: str, job: str, scheduled_at: float,
           attempt: int, worker: str, outcome: str | None = None, ended: bool = False) -> int:
    """Record an execution starting (and, with ``ended``, finishing at once); its row id."""
    now, mono = time.time(), time.monotonic()
    with connect(path) as conn:
        cur = conn.execute(
            "INSERT INTO executions (key, job_id, job, scheduled_at, attempt, pid, worker,"
            " started, started_mono, ended, ended_mono, outcome)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key, job_id, job, scheduled_at, attempt, os.getpid(), worker, now, mono,
             now if ended else None, mono if ended else None, outcome))
        return int(cur.lastrowid or 0)


def finish(path: str | Path, row_id: int, outcome: str) -> None:
    with connect(path) as conn:
        conn.execute("UPDATE executions SET ended = ?, ended_mono = ?, outcome = ? WHERE id = ?",
                     (time.time(), time.monotonic(), outcome, row_id))


def _insert_ctx(ctx: ExecutionContext, path: str, *, ended: bool, outcome: str | None) -> int:
    return insert(path, key=ctx.idempotency_key, job_id=ctx.job_id, job=ctx.job_name,
                  scheduled_at=ctx.scheduled_at.timestamp(), attempt=ctx.attempt,
                  worker=os.environ.get(WORKER_ENV, ""), ended=ended, outcome=outcome)


async def run(ctx: ExecutionContext, path: str, sleep: float = 0.0, fail_attempts: int = 0,
              kill_worker: bool = False) -> str:
    """The fault suite's job: record the start, take ``sleep`` seconds, record the end.

    ``fail_attempts``: the first attempts fail (a retriable error). ``kill_worker``: a poison
    job, which sends its own worker SIGKILL right after recording its start.
    """
    failing = ctx.attempt <= fail_attempts
    if not sleep and not kill_worker:  # one write: the burst test runs thousands of these
        _insert_ctx(ctx, path, ended=True, outcome="failed" if failing else "ok")
    else:
        row = _insert_ctx(ctx, path, ended=False, outcome=None)
        if kill_worker:
            os.kill(os.getpid(), signal.SIGKILL)
        await asyncio.sleep(sleep)
        finish(path, row, "failed" if failing else "ok")
    if failing:
        raise RuntimeError(f"failing attempt {ctx.attempt} on purpose")
    return f"recorded {ctx.idempotency_key}"


def doc(name: str, path: str | Path, schedule: dict[str, Any], *, sleep: float = 0.0,
        fail_attempts: int = 0, kill_worker: bool = False, **extra: Any) -> dict[str, Any]:
    """A job document for ``run``."""
    kwargs: dict[str, Any] = {"path": str(path)}
    if sleep:
        kwargs["sleep"] = sleep
    if fail_attempts:
        kwargs["fail_attempts"] = fail_attempts
    if kill_worker:
        kwargs["kill_worker"] = True
    return {"name": name, "schedule": schedule, "kind": "python",
            "payload": {"callable": "tickwork.testing.faults.ledger:run", "kwargs": kwargs},
            **extra}
